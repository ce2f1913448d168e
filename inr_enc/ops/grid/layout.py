"""Level geometry and parameter layout of tiny-cuda-nn's multiresolution grids, computed as tcnn does.

Sources (NVlabs/tiny-cuda-nn): include/tiny-cuda-nn/common_device.h (``grid_scale``, ``grid_resolution``,
``grid_index``) and include/tiny-cuda-nn/encodings/grid.h (level sizes and offsets).

Every step of the level scale is rounded to float32 like tcnn's ``exp2f(level * log2f(per_level_scale)) *
base_resolution - 1.0f``: computing it in float64 instead changes some levels' resolution (and thus the
layout) when the scale lands close to an integer. tcnn computes the layout on the host with the C library's
float functions, so we call the same ones (libm's log2f, exp2f, logf, expf through ctypes): glibc's log2f
is not correctly rounded for about 0.5% of arguments, and an ulp there can move a resolution by one. Where
no C math library can be loaded, correctly rounded float32 values are used. tcnn's kernels are built with
``--use_fast_math``, so on the GPU their ``exp2f`` may differ from the host value by an ulp in rare cases.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
from dataclasses import dataclass
from typing import Callable

UINT32_MASK = 0xFFFFFFFF
# Largest resolution per dimension count whose full row-major index cannot overflow uint32 (tcnn MAX_BASES).
MAX_DENSE_RESOLUTION = {1: 0xFFFFFFFF, 2: 0xFFFF, 3: 0x659, 4: 0xFF, 5: 0x54, 6: 0x28, 7: 0x17}
GRID_TYPES = ("Hash", "Dense", "Tiled")
# The interpolations of tcnn's grids; the kernels take a name's index in this tuple as its code.
INTERPOLATIONS = ("Linear", "Nearest", "Smoothstep")
# tcnn's hash factors per dimension (common_device.h); "CoherentPrime" is tcnn's default and the only one
# its default build compiles; the other two are offered for configs that name them.
HASH_PRIMES = {
    "CoherentPrime": (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "Prime": (1958374283, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "ReversedPrime": (2165219737, 1434869437, 2097192037, 3674653429, 805459861, 2654435761, 1958374283),
}
MAX_LEVEL_ENTRIES = UINT32_MASK // 2  # tcnn caps a level at uint32 max / 2 entries before alignment


def f32(value: float) -> float:
    """Round a Python float to the nearest float32 value."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _c_float_function(name: str, fallback: Callable[[float], float]) -> Callable[[float], float]:
    """The C library's float function ``name`` (float -> float), or ``fallback`` rounded to float32."""
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    except (OSError, AttributeError):
        return lambda value: f32(fallback(value))
    function.restype, function.argtypes = ctypes.c_float, [ctypes.c_float]
    return function


log2f = _c_float_function("log2f", math.log2)
exp2f = _c_float_function("exp2f", lambda value: 2.0**value)
logf = _c_float_function("logf", math.log)
expf = _c_float_function("expf", math.exp)


def grid_scale(level: int, per_level_scale: float, base_resolution: int) -> float:
    """tcnn's grid_scale: exp2f(level * log2f(s)) * base_resolution - 1.0f, every op in float32."""
    log2_scale = log2f(f32(per_level_scale))
    return f32(f32(exp2f(f32(level * log2_scale)) * base_resolution) - 1.0)


def grid_resolution(scale: float) -> int:
    """tcnn's grid_resolution: (uint32)ceilf(scale) + 1 (vertices per axis)."""
    return max(math.ceil(scale), 0) + 1


def default_per_level_scale(grid_type: str, n_levels: int, base_resolution: int) -> float:
    """tcnn's default: 2.0, except dense grids, which grow from base_resolution to 256 over the levels
    (expf(logf(256.0f / base_resolution) / (n_levels - 1)) in float32). One dense level: 1.0 (tcnn divides by zero)."""
    if grid_type != "Dense":
        return 2.0
    if n_levels == 1:
        return 1.0
    return expf(f32(logf(f32(256.0 / base_resolution)) / (n_levels - 1)))


@dataclass(frozen=True)
class GridLevel:
    scale: float  # float32 value: position = x * scale + 0.5
    resolution: int  # vertices per axis
    size: int  # entries in this level's table
    offset: int  # first entry of this level in the flat table
    strides: tuple[int, ...]  # row-major index strides (resolution^i), all 0 when the index would overflow
    hashed: bool  # index with the spatial hash instead of the row-major index


def grid_levels(
    n_input_dims: int,
    grid_type: str,
    n_levels: int,
    log2_hashmap_size: int,
    base_resolution: int,
    per_level_scale: float,
) -> list[GridLevel]:
    """Per-level geometry and table layout, in tcnn's order (levels consecutive, offsets in entries)."""
    levels = []
    offset = 0
    for level in range(n_levels):
        scale = grid_scale(level, per_level_scale, base_resolution)
        resolution = grid_resolution(scale)
        dense_size = resolution**n_input_dims
        size = MAX_LEVEL_ENTRIES if dense_size > MAX_LEVEL_ENTRIES + 1 else dense_size
        size = -(-size // 8) * 8  # aligned to 8 entries
        if grid_type == "Tiled":
            size = min(size, base_resolution**n_input_dims)
        elif grid_type == "Hash":
            size = min(size, 1 << log2_hashmap_size)
        if resolution <= MAX_DENSE_RESOLUTION[n_input_dims]:
            strides = tuple(resolution**i for i in range(n_input_dims))
            full_stride = dense_size
        else:
            strides = (0,) * n_input_dims
            full_stride = UINT32_MASK
        hashed = grid_type == "Hash" and size < full_stride
        levels.append(GridLevel(scale, resolution, size, offset, strides, hashed))
        offset += size
    return levels
