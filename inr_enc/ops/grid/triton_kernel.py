"""Triton kernel for the multiresolution grid encodings, numerically matching the torch path (``torch_grid_encoding``).

One program per (block of samples, level). Per level: position = x * scale + 0.5 (float64, rounded once to
float32 for float32 inputs, clamped to the largest finite value), cell = floor(position) saturated to the
int32 range and wrapped to uint32, corner c taking dim i's +1 when (c >> i) & 1, index row-major mod the
level size on the first ``levels.n_dense`` levels, the prime-XOR hash mod the (power-of-two) hash size on the
others, plus the level offset (formulas: tiny-cuda-nn, include/tiny-cuda-nn/common_device.h; see
inr_enc/ops/grid/reference.py). Weights: products over dims, multiplied in dimension order as the
torch path does. The backward recomputes the indices (nothing [N, L, 2^d] is kept), scatters table
gradients with atomic adds and sums input gradients over levels in float64.

Runs on CUDA tensors (compiled) or on CPU tensors under Triton's interpreter when ``TRITON_INTERPRET=1``
is set at call time: the kernel is jit-decorated on first use, once per mode, so it does not matter
whether the variable was set when this module was imported.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable
from typing import Any

import torch

from .layout import INTERPOLATIONS
from .reference import GridLevels, kernel_input_reason, torch_grid_encoding

try:
    import triton
    import triton.language as tl
except Exception:  # optional (ImportError), or broken on this machine: triton_unavailable_reason says so
    triton = tl = None

BLOCK = 128  # samples per program
MAX_UNROLL = 8  # corners unrolled in the kernel's corner loop


def _grid_kernel(
    x_ptr, table_ptr, scale_ptr, consts_ptr, out_ptr, grad_out_ptr, grad_table_ptr, grad_x_ptr, n_samples, n_dense,
    samples_per_model, model_rows, D: tl.constexpr, F: tl.constexpr, INTERP: tl.constexpr, POS_MAX: tl.constexpr,
    BLOCK: tl.constexpr,
    FORWARD: tl.constexpr, GRAD_TABLE: tl.constexpr, GRAD_X: tl.constexpr, UNROLL: tl.constexpr,
):
    """Forward (FORWARD): out [N, L*F] = sum over corners of weight * table row. Backward: grad_out [N, L*F]
    -> atomic adds into grad_table [E*F] (GRAD_TABLE) and into grad_x [N, D] float64 (GRAD_X).
    x [N, D] (float32 | float64: the compute dtype), table [E*F], scale [L] float32, consts [L, D + 2] int64
    (per-dim row-major stride or hash prime, level size, level offset). Sample n reads the table that starts at
    row (n // samples_per_model) * model_rows (several tables back to back; one: model_rows 0)."""
    level = tl.program_id(1)
    n = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = n < n_samples
    features = tl.arange(0, F)
    mask2 = mask[:, None] & (features[None, :] < F)
    scale = tl.load(scale_ptr + level).to(tl.float64)
    consts = consts_ptr + level * (D + 2)
    size = tl.load(consts + D).to(tl.uint32)
    offset = tl.load(consts + D + 1) + n // samples_per_model * model_rows  # [BLOCK]
    hashed = level >= n_dense
    cells, fracs, weights1, inside, factors = (), (), (), (), ()
    for i in tl.static_range(D):
        xi = tl.load(x_ptr + n * D + i, mask=mask, other=0.0)
        pos = (xi.to(tl.float64) * scale + 0.5).to(xi.dtype)  # the product is exact for float32 x
        inside += (tl.abs(pos) <= POS_MAX,)  # torch's clamp passes no gradient where it clamps
        pos = tl.minimum(tl.maximum(pos, -POS_MAX, propagate_nan=tl.PropagateNan.ALL), POS_MAX,
                         propagate_nan=tl.PropagateNan.ALL)
        cell = tl.floor(pos)
        frac = pos - cell
        # (int)floor saturating to int32 (clamped in float64 with exact bounds, then as integers), as uint32.
        cell = tl.minimum(tl.maximum(cell.to(tl.float64), -2147483648.0), 2147483648.0).to(tl.int64)
        cells += (tl.minimum(cell, 2147483647).to(tl.uint32),)
        fracs += (frac,)
        weights1 += (frac * frac * (3.0 - 2.0 * frac) if INTERP == 2 else frac,)
        factors += (tl.load(consts + i).to(tl.uint32),)
    dtype = x_ptr.dtype.element_ty
    row_start = n * (tl.num_programs(1) * F) + level * F  # of this level's features in out / grad_out [N, L*F]
    out_rows = row_start[:, None] + features[None, :]
    if GRAD_TABLE:
        grad = tl.load(grad_out_ptr + out_rows, mask=mask2, other=0.0)
    if GRAD_X:  # one feature at a time, for the sequential sums over features below
        grads1 = ()
        for f in tl.static_range(F):
            grads1 += (tl.load(grad_out_ptr + row_start + f, mask=mask, other=0.0),)
    # d out / d frac_i, summed over the corners that take dim i's low (grad_low) and high (grad_high) term
    grad_low, grad_high = (), ()
    for i in tl.static_range(D):
        grad_low += (tl.full([BLOCK], 0, dtype),)
        grad_high += (tl.full([BLOCK], 0, dtype),)
    acc = tl.full([BLOCK, F], 0, dtype)
    for c in tl.range(0, 1 if INTERP == 1 else 2**D, loop_unroll_factor=UNROLL):  # 2^d unrolled compile slowly
        dense_index = tl.full([BLOCK], 0, tl.uint32)
        hash_index = tl.full([BLOCK], 0, tl.uint32)
        terms, prefix = (), ()  # per-dim weight terms and their running products w_0 * ... * w_i
        for i in tl.static_range(D):
            high = (c >> i) & 1  # corner c takes dim i's + 1
            term = (cells[i] + high) * factors[i]
            dense_index += term
            hash_index ^= term
            if INTERP != 1:
                terms += (tl.where(high == 1, weights1[i], 1.0 - weights1[i]),)
                prefix += (terms[0] if i == 0 else terms[i] * prefix[i - 1],)
        if hashed:  # the same branch for the whole program; hashed levels hold 2^k entries
            entry = hash_index & (size - 1)
        else:
            entry = dense_index % size
        index = entry.to(tl.int64) + offset
        rows = index[:, None] * F + features[None, :]
        if FORWARD:
            values = tl.load(table_ptr + rows, mask=mask2, other=0.0).to(dtype)
            if INTERP == 1:
                acc += values
            else:  # the torch path accumulates with addcmul: a fused multiply-add (from 0: the product)
                acc = tl.fma(prefix[D - 1][:, None], values, acc)
        else:
            if GRAD_TABLE:
                grad_rows = grad if INTERP == 1 else prefix[D - 1][:, None] * grad
                tl.atomic_add(grad_table_ptr + rows, grad_rows, mask=mask2, sem="relaxed")
            if GRAD_X and INTERP != 1:
                g = tl.load(table_ptr + index * F, mask=mask, other=0.0).to(dtype) * grads1[0]
                for f in tl.static_range(1, F):  # g = sum_f value_f * grad_f, as the torch path's addcmul (fused)
                    g = tl.fma(tl.load(table_ptr + index * F + f, mask=mask, other=0.0).to(dtype), grads1[f], g)
                # d weight / d term_i = (g * w_{D-1} * ... * w_{i+1}) * (w_0 * ... * w_{i-1}), as autograd multiplies
                suffix = (g,)
                for j in tl.static_range(D - 1, 0, -1):
                    suffix = (suffix[0] * terms[j],) + suffix
                new_low, new_high = (), ()
                for i in tl.static_range(D):
                    grad_term = suffix[i] if i == 0 else suffix[i] * prefix[i - 1]
                    high = ((c >> i) & 1) == 1
                    new_low += (grad_low[i] + tl.where(high, 0.0, grad_term),)  # + 0 is exact
                    new_high += (grad_high[i] + tl.where(high, grad_term, 0.0),)
                grad_low, grad_high = new_low, new_high
    if FORWARD:
        tl.store(out_ptr + out_rows, acc, mask=mask2)
    if GRAD_X and INTERP != 1:
        for i in tl.static_range(D):
            grad_frac = grad_high[i] - grad_low[i]
            if INTERP == 2:  # through frac * frac * (3 - 2 * frac), summed in autograd's order
                frac = fracs[i]
                from_square = grad_frac * (3.0 - 2.0 * frac) * frac
                grad_frac = (-(grad_frac * (frac * frac)) * 2.0 + from_square) + from_square
            grad_pos = tl.where(inside[i], grad_frac, 0.0).to(tl.float64) * scale
            tl.atomic_add(grad_x_ptr + n * D + i, grad_pos, mask=mask, sem="relaxed")


@functools.cache
def _kernel(interpret: bool) -> Callable:
    """``_grid_kernel`` jit-compiled (interpret False) or run by Triton's CPU interpreter (True); triton
    reads TRITON_INTERPRET when a function is decorated, so each mode is decorated under its own setting."""
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = interpret
        return triton.jit(_grid_kernel)


def triton_unavailable_reason(x: torch.Tensor) -> str | None:
    """Why the Triton path cannot encode ``x: [N, d]`` here, or None when it can."""
    if triton is None:
        return "triton is not installed or does not import here"
    if not hasattr(triton, "knobs"):  # triton.knobs.runtime (3.4+) selects the interpreter per kernel
        return f"the triton grid kernel needs triton >= 3.4, found {triton.__version__}"
    if not x.is_cuda and not (x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") == "1"):
        return f"triton runs on CUDA tensors (or on CPU with TRITON_INTERPRET=1), got a {x.device.type} input"
    return kernel_input_reason("triton grid kernel", x)


_LEVEL_CONSTANTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _level_constants(levels: GridLevels, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale [L] float32, consts [L, d + 2] int64: per-dim stride (row-major levels) or hash prime, level
    size, level offset) on ``device``, built once per GridLevels and device (its buffers never change)."""
    per_device = _LEVEL_CONSTANTS.setdefault(levels, {})
    if device not in per_device:
        n_levels, n_dense = levels.offset.numel(), levels.n_dense
        primes = torch.tensor(levels.primes, dtype=torch.int64).expand(n_levels - n_dense, -1)
        factors = torch.cat([levels.dense_strides.cpu(), primes])
        sizes = torch.cat([levels.dense_size.cpu(), torch.full((n_levels - n_dense,), levels.hash_size)])
        consts = torch.cat([factors, sizes[:, None], levels.offset.cpu()[:, None]], 1)
        per_device[device] = levels.scale.to(device).contiguous(), consts.to(device)
    return per_device[device]


def _launch(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features: int, interpolation: str,
    grad_out: torch.Tensor | None = None, grad_table: torch.Tensor | None = None, grad_x: torch.Tensor | None = None,
    models: int = 1,
) -> torch.Tensor | None:
    """Forward (``grad_out`` None): returns [N, L*F] in x's dtype. Backward: accumulates into ``grad_table``
    [E*F] (x's dtype) and/or ``grad_x`` [N, d] float64, both zeroed by the caller; returns None."""
    scale, consts = _level_constants(levels, x.device)
    n_samples, n_dims = x.shape
    n_levels = consts.shape[0]
    out = torch.empty(n_samples, n_levels * n_features, dtype=x.dtype, device=x.device) if grad_out is None else None
    if n_samples == 0:
        return out
    kernel = _kernel(not x.is_cuda or triton.knobs.runtime.interpret)
    kernel[(triton.cdiv(n_samples, BLOCK), n_levels)](
        x, params, scale, consts, out, grad_out, grad_table, grad_x, n_samples, levels.n_dense,
        max(n_samples // models, 1), params.numel() // (n_features * models) if models > 1 else 0,
        D=n_dims, F=n_features, INTERP=INTERPOLATIONS.index(interpolation), POS_MAX=torch.finfo(x.dtype).max,
        BLOCK=BLOCK,
        FORWARD=grad_out is None, GRAD_TABLE=grad_table is not None, GRAD_X=grad_x is not None,
        UNROLL=1 if interpolation == "Nearest" else min(2**n_dims, MAX_UNROLL),
        num_warps=4, enable_fp_fusion=False,  # no fused multiply-adds: positions round like the torch path's
    )
    return out


class _TritonGridEncoding(torch.autograd.Function):
    """x [N, d], params [E*F] -> [N, L*F]; first derivatives by the Triton kernel, second ones by the torch path."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features: int,
                interpolation: str, models: int) -> torch.Tensor:
        ctx.save_for_backward(x, params)
        ctx.settings = levels, n_features, interpolation, models
        return _launch(x, params, levels, n_features, interpolation, models=models)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, params = ctx.saved_tensors
        levels, n_features, interpolation, models = ctx.settings
        need_x, need_params = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled():  # create_graph: differentiate the torch path, which has second derivatives
            inputs = [t for t, needed in ((x, need_x), (params, need_params)) if needed]
            out = torch_grid_encoding(x, params, levels, n_features, interpolation, models)
            grads = list(torch.autograd.grad(out, inputs, grad, create_graph=True, allow_unused=True))
            grad_x = grads.pop(0) if need_x else None
            grad_params = grads.pop(0) if need_params else None
            if need_x and grad_x is None:  # Nearest: the output does not depend on x
                grad_x = torch.zeros_like(x)
            return grad_x, grad_params, None, None, None, None
        grad_table = torch.zeros(params.shape, dtype=x.dtype, device=x.device) if need_params else None
        grad_x = torch.zeros(x.shape, dtype=torch.float64, device=x.device) if need_x else None
        if need_params or (need_x and interpolation != "Nearest"):
            _launch(x, params, levels, n_features, interpolation, grad.contiguous(), grad_table, grad_x, models)
        return (None if grad_x is None else grad_x.to(x.dtype),
                None if grad_table is None else grad_table.to(params.dtype),
                None, None, None, None)


def triton_grid_encoding(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features_per_level: int, interpolation: str,
    models: int = 1,
) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] (level-major, feature-minor) from the flat table ``params`` [E*F] (``models`` tables
    back to back, read by equal blocks of x in turn); the same numerics as ``torch_grid_encoding``. Raises RuntimeError
    where ``triton_unavailable_reason(x)`` gives a reason."""
    reason = triton_unavailable_reason(x)
    if reason is not None:
        raise RuntimeError(f"triton grid encoding unavailable: {reason}")
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {list(INTERPOLATIONS)}, got {interpolation!r}")
    return _TritonGridEncoding.apply(x.contiguous(), params.contiguous(), levels, n_features_per_level, interpolation,
                                     models)
