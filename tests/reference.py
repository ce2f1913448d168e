"""Slow, independent references for tiny-cuda-nn's grid encoding, written from tcnn's formulas
(common_device.h, encodings/grid.h) with Python integers, exact rational arithmetic and the C library's
float32 log2f/exp2f (what tcnn's host code calls). Nothing here imports inr_enc."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from fractions import Fraction

import numpy as np

_libm = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("log2f", "exp2f", "logf", "expf"):
    getattr(_libm, _name).restype = ctypes.c_float
    getattr(_libm, _name).argtypes = [ctypes.c_float]

M32 = 0xFFFFFFFF
COHERENT_PRIMES = (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737)
MAX_BASES = (0, 0xFFFFFFFF, 0xFFFF, 0x659, 0xFF, 0x54, 0x28, 0x17)


def to_f32(value) -> float:
    """Nearest float32 (ties to even) of an exact rational or float value, by checking neighbours exactly."""
    exact = Fraction(value)
    guess = np.float32(float(exact))
    candidates = [guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.uint32)) & 1))
    return float(best)


def level_scale(level: int, per_level_scale: float, base_resolution: int) -> float:
    log2_scale = _libm.log2f(per_level_scale)
    return to_f32(to_f32(_libm.exp2f(to_f32(level * log2_scale)) * base_resolution) - 1)


def dense_default_per_level_scale(n_levels: int, base_resolution: int) -> float:
    """tcnn's DenseGrid default: std::exp(std::log(256.0f / (float)base_resolution) / (n_levels - 1)) in float."""
    return _libm.expf(to_f32(Fraction(_libm.logf(to_f32(Fraction(256, base_resolution)))) / (n_levels - 1)))


def level_layout(n_dims, grid_type, n_levels, log2_hashmap_size, base_resolution, per_level_scale):
    """[(scale, resolution, params_in_level, offset)] per level, following GridEncodingTemplated's constructor."""
    layout, offset = [], 0
    for level in range(n_levels):
        scale = level_scale(level, per_level_scale, base_resolution)
        resolution = int(math.ceil(scale)) + 1
        size = resolution**n_dims
        if float(resolution) ** n_dims > 2.0**31:
            size = 2**31 - 1
        size = (size + 7) // 8 * 8
        if grid_type == "Tiled":
            size = min(size, base_resolution**n_dims)
        elif grid_type == "Hash":
            size = min(size, 2**log2_hashmap_size)
        layout.append((scale, resolution, size, offset))
        offset += size
    return layout


def grid_index(grid_type: str, size: int, resolution: int, corner: list[int]) -> int:
    """tcnn's grid_index for one corner, uint32 arithmetic on Python ints."""
    n_dims = len(corner)
    stride, index = 1, 0
    if resolution <= MAX_BASES[n_dims]:
        for c in corner:
            index = (index + c * stride) & M32
            stride = (stride * resolution) & M32
    else:
        stride = M32
    if grid_type == "Hash" and size < stride:
        index = 0
        for c, prime in zip(corner, COHERENT_PRIMES):
            index ^= (c * prime) & M32
    return index % size


def point_contributions(x, layout, grid_type, interpolation="Linear"):
    """One point x (float32 values) -> [(level, table entry, weight)] for every corner it reads."""
    contributions = []
    for level, (scale, resolution, size, offset) in enumerate(layout):
        cells, fracs = [], []
        for xi in x:
            pos = to_f32(Fraction(float(xi)) * Fraction(scale) + Fraction(1, 2))  # fmaf(scale, x, 0.5f)
            floor = math.floor(pos)
            cells.append(max(-(2**31), min(2**31 - 1, floor)) & M32)  # (uint32)(int)floorf, saturating
            frac = pos - floor
            fracs.append(frac * frac * (3 - 2 * frac) if interpolation == "Smoothstep" else frac)
        if interpolation == "Nearest":
            contributions.append((level, offset + grid_index(grid_type, size, resolution, cells), 1.0))
            continue
        for corner_bits in range(2 ** len(x)):
            weight, corner = 1.0, []
            for dim in range(len(x)):
                bit = (corner_bits >> dim) & 1
                weight *= fracs[dim] if bit else 1 - fracs[dim]
                corner.append((cells[dim] + bit) & M32)
            contributions.append((level, offset + grid_index(grid_type, size, resolution, corner), weight))
    return contributions


def encode_point(x, params, n_features, layout, grid_type, interpolation="Linear"):
    """One point x (float32 values) -> [L * F] float64 output, looping over levels and corners."""
    table = np.asarray(params, dtype=np.float64).reshape(-1, n_features)
    out = np.zeros((len(layout), n_features))
    for level, entry, weight in point_contributions(x, layout, grid_type, interpolation):
        out[level] += weight * table[entry]
    return out.reshape(-1)


def table_gradient(points, grad_out, n_entries, n_features, layout, grid_type, interpolation="Linear"):
    """d(sum grad_out * encode(points)) / d(params): [n_entries * F], accumulated corner by corner."""
    grad = np.zeros((n_entries, n_features))
    for x, g in zip(points, np.asarray(grad_out, dtype=np.float64).reshape(len(points), len(layout), n_features)):
        for level, entry, weight in point_contributions(x, layout, grid_type, interpolation):
            grad[entry] += weight * g[level]
    return grad.reshape(-1)


def tcnn_sh_degree4(x, y, z):
    """tcnn's generated SH polynomials up to degree 4 (common_device.h sh_enc, constants as their formulas)."""
    sp = math.sqrt(math.pi)
    return [
        1 / (2 * sp),
        -math.sqrt(3) * y / (2 * sp), math.sqrt(3) * z / (2 * sp), -math.sqrt(3) * x / (2 * sp),
        math.sqrt(15) * x * y / (2 * sp), -math.sqrt(15) * y * z / (2 * sp), math.sqrt(5) * (3 * z * z - 1) / (4 * sp),
        -math.sqrt(15) * x * z / (2 * sp), math.sqrt(15) * (x * x - y * y) / (4 * sp),
        math.sqrt(70) * y * (-3 * x * x + y * y) / (8 * sp), math.sqrt(105) * x * y * z / (2 * sp),
        math.sqrt(42) * y * (1 - 5 * z * z) / (8 * sp), math.sqrt(7) * z * (5 * z * z - 3) / (4 * sp),
        math.sqrt(42) * x * (1 - 5 * z * z) / (8 * sp), math.sqrt(105) * z * (x * x - y * y) / (4 * sp),
        math.sqrt(70) * x * (-x * x + 3 * y * y) / (8 * sp),
    ]
