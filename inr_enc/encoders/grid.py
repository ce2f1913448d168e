"""tiny-cuda-nn's multiresolution grid encodings: HashGrid (Instant-NGP), DenseGrid and TiledGrid.

Numerics follow tcnn (common_device.h, encodings/grid.h): per level, position = fmaf(x, scale, 0.5),
cell = floor(position), d-linear (or smoothstep, or nearest) weights over the 2^d cell corners, corner
indices in uint32 arithmetic (row-major, dim 0 fastest, or the prime XOR hash), taken mod the level size.
The table is one flat ``params`` of tcnn's layout, so weights move between tcnn and inr_enc unchanged.

Inputs outside [0, 1] are encoded as tcnn encodes them: cells wrap in uint32 and every index is taken
mod its level's size, so any finite input reads a valid entry (dense and tiled grids wrap, hashed
levels hash). Positions beyond the int32 range saturate like CUDA's float-to-int conversion. One
deliberate difference: where x * scale overflows float32 (|x| > ~1e34), tcnn computes inf - inf = NaN
weights; we clamp the position to the largest finite float, so the output stays finite.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .base import Encoder, check_choice, check_float, check_int, config_error, seeded_generator
from .grid_layout import GRID_TYPES, UINT32_MASK, GridLevel, default_per_level_scale, grid_levels

# tcnn's hash factors per dimension (common_device.h); "CoherentPrime" is tcnn's default and the only one
# its default build compiles; the other two are offered for configs that name them.
HASH_PRIMES = {
    "CoherentPrime": (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "Prime": (1958374283, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "ReversedPrime": (2165219737, 1434869437, 2097192037, 3674653429, 805459861, 2654435761, 1958374283),
}
INTERPOLATIONS = ("Linear", "Nearest", "Smoothstep")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def mul_uint32(a: torch.Tensor, b: torch.Tensor | int) -> torch.Tensor:
    """(a * b) mod 2^32 for int64 tensors holding uint32 values, without int64 overflow (b split in 16-bit halves)."""
    low = a * (b & 0xFFFF)
    high = ((a * (b >> 16)) & 0xFFFF) << 16
    return (low + high) & UINT32_MASK


class GridLevels(torch.nn.Module):
    """A grid's per-level constants as integer buffers (they follow .to(device), never .half()/.double()).

    ``scale`` [L] (float32 values), ``offset`` [L]; the row-major levels' ``dense_strides`` [Ld, d] and
    ``dense_size`` [Ld]; ``n_dense`` (levels before the first hashed one), ``hash_size`` and ``primes``.
    """

    def __init__(self, levels: list[GridLevel], primes: tuple[int, ...]) -> None:
        super().__init__()
        dense = [lvl for lvl in levels if not lvl.hashed]
        if any(lvl.hashed for lvl in levels[: len(dense)]):
            raise AssertionError("hashed levels must follow the row-major ones")
        self.n_dense = len(dense)
        self.hash_size = levels[-1].size if levels[-1].hashed else 1
        self.primes = primes[: len(levels[0].strides)]
        scale_bits = torch.tensor([lvl.scale for lvl in levels], dtype=torch.float32).view(torch.int32)
        self.register_buffer("scale_bits", scale_bits, persistent=False)
        self.register_buffer("offset", torch.tensor([lvl.offset for lvl in levels]), persistent=False)
        n_dims = len(levels[0].strides)
        strides = torch.tensor([lvl.strides for lvl in dense], dtype=torch.int64).reshape(len(dense), n_dims)
        self.register_buffer("dense_strides", strides, persistent=False)
        self.register_buffer("dense_size", torch.tensor([lvl.size for lvl in dense], dtype=torch.int64), persistent=False)

    @property
    def scale(self) -> torch.Tensor:
        return self.scale_bits.view(torch.float32)


def _combine_corners(per_dim: list[torch.Tensor], op: Callable, out: torch.Tensor | None = None) -> torch.Tensor:
    """Combine per-dimension corner terms [L, k, N] into [L, k^d, N] with ``op`` (torch.add, torch.mul,
    torch.bitwise_xor), corner c taking dim i's term (c >> i) & 1; the last op writes into ``out`` if given."""
    n_dims = len(per_dim)
    n_levels, k, n = per_dim[0].shape
    full_shape = [n_levels] + [k] * n_dims + [n]
    result = per_dim[0].reshape([n_levels] + [1] * (n_dims - 1) + [k, n])
    for i in range(1, n_dims):
        shape = [n_levels] + [1] * n_dims + [n]
        shape[n_dims - i] = k
        last = i == n_dims - 1 and out is not None
        result = op(per_dim[i].reshape(shape), result, out=out.view(full_shape) if last else None)
    if n_dims == 1 and out is not None:
        out.copy_(result)
    return result.reshape(n_levels, k**n_dims, n) if out is None else out


def grid_corners(x: torch.Tensor, levels: GridLevels, interpolation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Table entries and interpolation weights of every level's cell corners, level-major.

    x: [N, d]. Returns (index [L, C, N] int64 into the flat [entries, F] table, weights [L, C, N] in x's
    dtype), C = 2^d (1 for "Nearest"). Weights are differentiable w.r.t. x. Level-major order keeps one
    level's table hot in cache while it is read, and the sample axis innermost for long vector loops.
    """
    scale = levels.scale.to(torch.float64)[:, None, None]
    if x.dtype == torch.float64:
        pos = x.T * scale + 0.5
    else:  # one rounding of x * scale + 0.5, like tcnn's fmaf: the product is exact in float64
        pos = (x.T.double() * scale + 0.5).float()
    # Where x * scale overflows (|x| > ~1e34), tcnn's frac is inf - inf = NaN; clamp so the output stays finite.
    pos = pos.clamp(-torch.finfo(pos.dtype).max, torch.finfo(pos.dtype).max)  # [L, d, N]
    cell = torch.floor(pos.detach())
    frac = pos - cell
    # (int)floorf(pos), saturating to the int32 range like CUDA; read as uint32 below (masks, mod 2^k).
    cell = cell.double().clamp(INT32_MIN, INT32_MAX).long()
    n_dims = x.shape[1]
    if interpolation == "Nearest":
        corners = [cell[:, i : i + 1] for i in range(n_dims)]
        weights = torch.ones_like(frac[:, :1])
    else:
        corners = [torch.stack([cell[:, i], cell[:, i] + 1], 1) for i in range(n_dims)]
        if interpolation == "Smoothstep":
            frac = frac * frac * (3.0 - 2.0 * frac)
        weights = _combine_corners([torch.stack([1 - frac[:, i], frac[:, i]], 1) for i in range(n_dims)], torch.mul)
    # Coarse levels use the row-major index, fine ones the hash (a suffix, since resolution grows with level).
    n_dense, n_levels = levels.n_dense, cell.shape[0]
    index = torch.empty(weights.shape, dtype=torch.int64, device=x.device)
    if n_dense:
        strides = levels.dense_strides[:, :, None, None]
        terms = [mul_uint32(c[:n_dense] & UINT32_MASK, strides[:, i]) for i, c in enumerate(corners)]
        index[:n_dense] = (_combine_corners(terms, torch.add) & UINT32_MASK) % levels.dense_size[:, None, None]
    if n_dense < n_levels:
        # Hashed levels hold 2^k entries, so only the low k bits of each uint32 product matter: with the
        # factor reduced mod 2^k (< 2^31) and |corner| <= 2^31, the int64 product cannot overflow.
        mask = levels.hash_size - 1
        terms = [(c[n_dense:] * (prime & mask)) & mask for c, prime in zip(corners, levels.primes)]
        _combine_corners(terms, torch.bitwise_xor, out=index[n_dense:])
    index += levels.offset[:, None, None]
    return index, weights


def _table_view(table: torch.Tensor) -> torch.Tensor:
    """[E, F] -> the 1D view whose elements are whole rows where one exists (F = 2 as complex: one
    index_select / scatter_add element per row, about twice as fast on CPU as 2D rows), else [E, F]."""
    if table.shape[1] == 2:
        return torch.view_as_complex(table)
    return table[:, 0] if table.shape[1] == 1 else table


def _rows(view: torch.Tensor) -> torch.Tensor:
    """Inverse of _table_view for gathered rows: -> [M, F] real."""
    if view.is_complex():
        return torch.view_as_real(view)
    return view.unsqueeze(-1) if view.dim() == 1 else view


def _gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table [E, F], index [L, C, N] -> [L, C, N, F]."""
    rows = _table_view(table).index_select(0, index.reshape(-1))
    return _rows(rows).reshape(*index.shape, table.shape[1])


def _scatter_add(table: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """zeros like table [E, F] with values [L, C, N, F] added at rows index [L, C, N] (out of place, differentiable)."""
    zeros = torch.zeros_like(table)
    flat = index.reshape(-1)
    if table.shape[1] <= 2:
        target = _table_view(zeros)
        source = values.reshape(-1, table.shape[1])
        source = torch.view_as_complex(source) if target.is_complex() else source[:, 0]
        return _rows(target.scatter_add(0, flat, source)).reshape(table.shape)
    return zeros.index_add(0, flat, values.reshape(-1, table.shape[1]))


def _interpolate(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """values [L, C, N, F], weights [L, C, N] -> [L, N, F]: a sum over corners of fused multiply-adds."""
    out = weights[:, 0, :, None] * values[:, 0]
    for corner in range(1, values.shape[1]):
        out = out.addcmul(weights[:, corner, :, None], values[:, corner])
    return out


class _InterpolateTable(torch.autograd.Function):
    """out[l, n] = sum_c weights[l, c, n] * table[index[l, c, n]]: table [E, F], weights/index [L, C, N] -> [L, N, F].

    The backward scatters into the table with scatter_add (no autograd of advanced indexing). When the
    weights need a gradient (inputs that require grad), the gathered rows are kept for it; under
    create_graph they are gathered again with differentiable ops, so second derivatives work.
    """

    @staticmethod
    def forward(ctx: Any, table: torch.Tensor, weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        values = _gather(table, index)
        ctx.values = values if ctx.needs_input_grad[1] else None
        ctx.save_for_backward(table, weights, index)
        return _interpolate(values, weights)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        table, weights, index = ctx.saved_tensors
        grad_table = grad_weights = None
        if ctx.needs_input_grad[0]:
            grad_table = _scatter_add(table, index, weights.unsqueeze(-1) * grad.unsqueeze(1))
        if ctx.needs_input_grad[1]:
            values = _gather(table, index) if torch.is_grad_enabled() else ctx.values
            grad_weights = values[..., 0] * grad[:, None, :, 0]
            for feature in range(1, values.shape[-1]):  # a sum over the short feature axis, as multiply-adds
                grad_weights = grad_weights.addcmul(values[..., feature], grad[:, None, :, feature])
        return grad_table, grad_weights, None


def grid_encoding(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features_per_level: int, interpolation: str
) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] (level-major, feature-minor), read from the flat table ``params``."""
    index, weights = grid_corners(x, levels, interpolation)
    table = params.to(x.dtype).reshape(-1, n_features_per_level)
    out = _InterpolateTable.apply(table, weights, index)  # [L, N, F]
    return out.permute(1, 0, 2).reshape(x.shape[0], index.shape[0] * n_features_per_level)


class Grid(Encoder):
    """tcnn's ``Grid`` encoding: ``{"otype": "Grid", "type": "Hash" | "Dense" | "Tiled", "n_levels": 16,
    "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16, "per_level_scale": 2.0,
    "interpolation": "Linear" | "Nearest" | "Smoothstep", "hash": "CoherentPrime"}``.

    ``per_level_scale`` defaults as in tcnn (2.0; dense grids grow to 256). ``seed`` draws the init,
    uniform in [-1e-4, 1e-4] like tcnn. x: [..., d], d in 1..7 -> [..., n_levels * n_features_per_level].
    """

    otype = "Grid"
    default_type = "Hash"
    max_input_dims = 7
    defaults = {
        "type": None, "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16,
        "per_level_scale": None, "interpolation": "Linear", "hash": "CoherentPrime", "seed": 1337,
    }

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        name = self.otype
        grid_type = check_choice(name, "type", config["type"] or self.default_type, GRID_TYPES)
        n_levels = check_int(name, "n_levels", config["n_levels"], 1, 128)
        n_features = check_int(name, "n_features_per_level", config["n_features_per_level"], 1, 8)
        if n_features not in (1, 2, 4, 8):
            raise config_error(name, f"'n_features_per_level' must be 1, 2, 4 or 8 (as in tcnn), got {n_features}")
        log2_size = check_int(name, "log2_hashmap_size", config["log2_hashmap_size"], 1, 31)
        base_resolution = check_int(name, "base_resolution", config["base_resolution"], 1)
        per_level_scale = config["per_level_scale"]
        if per_level_scale is None:
            per_level_scale = default_per_level_scale(grid_type, n_levels, base_resolution)
        per_level_scale = check_float(name, "per_level_scale", per_level_scale, 1.0)
        self.interpolation = check_choice(name, "interpolation", config["interpolation"], INTERPOLATIONS)
        hash_name = check_choice(name, "hash", config["hash"], HASH_PRIMES)
        seed = check_int(name, "seed", config["seed"], 0)

        levels = grid_levels(self.n_input_dims, grid_type, n_levels, log2_size, base_resolution, per_level_scale)
        n_entries = levels[-1].offset + levels[-1].size
        if n_entries > UINT32_MASK:
            raise config_error(name, f"needs {n_entries} table entries; tcnn's uint32 offsets allow at most {UINT32_MASK}")
        self.levels = GridLevels(levels, HASH_PRIMES[hash_name])
        self.n_features_per_level = n_features
        self.n_output_dims = n_levels * n_features
        init = (torch.rand(n_entries * n_features, generator=seeded_generator(seed)) * 2 - 1) * 1e-4
        self.params = torch.nn.Parameter(init)
        return {
            "type": grid_type, "n_levels": n_levels, "n_features_per_level": n_features, "log2_hashmap_size": log2_size,
            "base_resolution": base_resolution, "per_level_scale": per_level_scale,
            "interpolation": self.interpolation, "hash": hash_name, "seed": seed,
        }

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return grid_encoding(x, self.params, self.levels, self.n_features_per_level, self.interpolation)


class HashGrid(Grid):
    """``{"otype": "HashGrid", ...}``: a Grid whose ``type`` defaults to "Hash" (Instant-NGP)."""

    otype = "HashGrid"


class DenseGrid(Grid):
    """``{"otype": "DenseGrid", ...}``: a Grid whose ``type`` defaults to "Dense"."""

    otype = "DenseGrid"
    default_type = "Dense"


class TiledGrid(Grid):
    """``{"otype": "TiledGrid", ...}``: a Grid whose ``type`` defaults to "Tiled" (levels capped at base_resolution^d)."""

    otype = "TiledGrid"
    default_type = "Tiled"
