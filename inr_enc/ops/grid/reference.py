"""The PyTorch reference of the multiresolution grids: corner indices and weights, and table interpolation.

Numerics follow tiny-cuda-nn (include/tiny-cuda-nn/common_device.h, encodings/grid.h): per level,
position = fmaf(x, scale, 0.5), cell = floor(position), d-linear (or smoothstep, or nearest) weights over the
2^d cell corners, corner indices in uint32 arithmetic (row-major, dim 0 fastest, or the prime XOR hash),
taken mod the level size. Positions beyond the int32 range saturate like CUDA's float-to-int conversion.
Where x * scale overflows float32 (|x| > ~1e34), tcnn computes inf - inf = NaN weights; we clamp the
position to the largest finite float instead, so the output stays finite.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .layout import UINT32_MASK, GridLevel

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
        self.register_buffer("dense_size", torch.tensor([lvl.size for lvl in dense], dtype=torch.int64),
                             persistent=False)

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


def _row_elements(table: torch.Tensor) -> torch.Tensor | None:
    """On CPU, [E, 1] or [E, 2] as a 1D tensor with one element per row (F = 2 as complex): gathering and
    scatter-adding single elements is about twice as fast there as 2D rows. None where that does not apply."""
    if table.device.type != "cpu" or table.shape[1] > 2:
        return None
    return torch.view_as_complex(table) if table.shape[1] == 2 else table[:, 0]


def _element_rows(elements: torch.Tensor) -> torch.Tensor:
    """Inverse of _row_elements: [M] real or complex -> [M, F] real."""
    return torch.view_as_real(elements) if elements.is_complex() else elements.unsqueeze(-1)


def _gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table [E, F], index [L, C, N] -> [L, C, N, F]."""
    elements = _row_elements(table)
    if elements is None:
        rows = table.index_select(0, index.reshape(-1))
    else:
        rows = _element_rows(elements.index_select(0, index.reshape(-1)))
    return rows.reshape(*index.shape, table.shape[1])


def _scatter_add(table: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A new [E, F] tensor: zeros with values [L, C, N, F] added at rows index [L, C, N] (differentiable in values)."""
    result = torch.zeros_like(table)
    flat, rows = index.reshape(-1), values.reshape(-1, table.shape[1])
    elements = _row_elements(result)
    if elements is None:
        return result.index_add_(0, flat, rows)
    elements.scatter_add_(0, flat, torch.view_as_complex(rows) if elements.is_complex() else rows[:, 0])
    return result


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


def kernel_input_reason(kernel: str, x: torch.Tensor) -> str | None:
    """Why the compiled kernels (named ``kernel`` in the message) cannot take ``x``, or None: they take [N, d]
    float32 or float64 inputs with d in 1..7."""
    if x.dtype not in (torch.float32, torch.float64):
        return f"the {kernel} takes float32 or float64 inputs, got {x.dtype}"
    if x.dim() != 2 or not 1 <= x.shape[1] <= 7:
        return f"the {kernel} takes [N, d] inputs with d in 1..7, got shape {tuple(x.shape)}"
    return None


def torch_grid_encoding(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features_per_level: int, interpolation: str,
    models: int = 1,
) -> torch.Tensor:
    """The PyTorch path: x [N, d] -> [N, L * F] (level-major, feature-minor), read from the flat table ``params``;
    with ``models`` tables in ``params``, the m-th block of N / models samples reads the m-th table."""
    index, weights = grid_corners(x, levels, interpolation)
    if models > 1:
        per_model = x.shape[0] // models
        model_rows = params.numel() // (models * n_features_per_level)
        index += (torch.arange(x.shape[0], device=x.device) // per_model * model_rows)[None, None]
    table = params.to(x.dtype).reshape(-1, n_features_per_level)
    out = _InterpolateTable.apply(table, weights, index)  # [L, N, F]
    return out.permute(1, 0, 2).reshape(x.shape[0], index.shape[0] * n_features_per_level)
