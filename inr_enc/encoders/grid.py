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

import operator
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
        self.primes = primes
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


def _combine_corners(per_dim: list[torch.Tensor], op: Callable) -> torch.Tensor:
    """Combine per-dimension corner terms [N, L, k] into [N, L, k^d], corner c taking dim i's term (c >> i) & 1."""
    n_dims = len(per_dim)
    result = None
    for i, term in enumerate(per_dim):
        shape = list(term.shape[:2]) + [1] * n_dims
        shape[2 + n_dims - 1 - i] = term.shape[2]
        term = term.reshape(shape)
        result = term if result is None else op(result, term)
    n, n_levels, k = per_dim[0].shape
    return result.reshape(n, n_levels, k**n_dims)


def grid_corners(x: torch.Tensor, levels: GridLevels, interpolation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Table entries and interpolation weights of every level's cell corners.

    x: [N, d]. Returns (index [N, L, C] int64 into the flat [entries, F] table, weights [N, L, C] in x's
    dtype), C = 2^d (1 for "Nearest"). Weights are differentiable w.r.t. x.
    """
    scale = levels.scale.to(torch.float64)
    if x.dtype == torch.float64:
        pos = x[:, None, :] * scale[:, None] + 0.5
    else:  # one rounding of x * scale + 0.5, like tcnn's fmaf: the product is exact in float64
        pos = (x.double()[:, None, :] * scale[:, None] + 0.5).float()
    # Where x * scale overflows (|x| > ~1e34), tcnn's frac is inf - inf = NaN; clamp so the output stays finite.
    pos = pos.clamp(-torch.finfo(pos.dtype).max, torch.finfo(pos.dtype).max)
    cell = torch.floor(pos.detach())
    frac = pos - cell
    # (uint32)(int)floorf(pos), saturating to the int32 range like CUDA (float32 cannot hold INT32_MAX: clamp twice)
    cell = cell.clamp(INT32_MIN, INT32_MAX).long().clamp(INT32_MIN, INT32_MAX) & UINT32_MASK
    if interpolation == "Nearest":
        corners = [cell[..., i : i + 1] for i in range(x.shape[1])]
        weights = torch.ones_like(frac[..., :1])
    else:
        corners = [torch.stack([cell[..., i], (cell[..., i] + 1) & UINT32_MASK], -1) for i in range(x.shape[1])]
        if interpolation == "Smoothstep":
            frac = frac * frac * (3.0 - 2.0 * frac)
        weights = _combine_corners([torch.stack([1 - frac[..., i], frac[..., i]], -1) for i in range(x.shape[1])], operator.mul)
    # Coarse levels use the row-major index, fine ones the hash (a suffix, since resolution grows with level).
    n_dense = levels.n_dense
    dense = _combine_corners(
        [mul_uint32(c[:, :n_dense], levels.dense_strides[:, i, None]) for i, c in enumerate(corners)], operator.add
    )
    dense = (dense & UINT32_MASK) % levels.dense_size[:, None]
    hashed = _combine_corners([mul_uint32(c[:, n_dense:], levels.primes[i]) for i, c in enumerate(corners)], operator.xor)
    hashed = hashed & (levels.hash_size - 1)  # hashed levels hold exactly 2^log2_hashmap_size entries
    index = torch.cat([dense, hashed], dim=1) + levels.offset[:, None]
    return index, weights


def _interpolate(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """values [N, L, C, F], weights [N, L, C] -> [N, L, F] (a batched matrix product: faster than mul + sum)."""
    n, l, c, f = values.shape
    return torch.bmm(weights.reshape(n * l, 1, c), values.reshape(n * l, c, f)).reshape(n, l, f)


def _gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, index.reshape(-1)).reshape(*index.shape, table.shape[1])


class _InterpolateTable(torch.autograd.Function):
    """out[n, l] = sum_c weights[n, l, c] * table[index[n, l, c]]: table [E, F], weights/index [N, L, C] -> [N, L, F].

    The backward scatters into the table with index_add (no autograd of advanced indexing, no saved
    [N, L, C, F] values); it is written with differentiable ops, so second derivatives work.
    """

    @staticmethod
    def forward(ctx: Any, table: torch.Tensor, weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(table, weights, index)
        return _interpolate(_gather(table, index), weights)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        table, weights, index = ctx.saved_tensors
        n, l, c = index.shape
        f = table.shape[1]
        grad_table = grad_weights = None
        if ctx.needs_input_grad[0]:
            contributions = torch.bmm(weights.reshape(n * l, c, 1), grad.reshape(n * l, 1, f))
            grad_table = torch.zeros_like(table).index_add(0, index.reshape(-1), contributions.reshape(-1, f))
        if ctx.needs_input_grad[1]:
            values = _gather(table, index).reshape(n * l, c, f)
            grad_weights = torch.bmm(values, grad.reshape(n * l, f, 1)).reshape(n, l, c)
        return grad_table, grad_weights, None


def grid_encoding(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features_per_level: int, interpolation: str
) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] (level-major, feature-minor), read from the flat table ``params``."""
    index, weights = grid_corners(x, levels, interpolation)
    table = params.to(x.dtype).reshape(-1, n_features_per_level)
    return _InterpolateTable.apply(table, weights, index).reshape(x.shape[0], index.shape[1] * n_features_per_level)


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
