"""The fused CPU grid kernel (grid_cpu.cpp), built with torch's C++ extension tooling at first use.

``ops.grid.grid_encoding`` calls :func:`fused_grid_encoding` for the "cpp" kernel; where the extension cannot be
built (no C++ compiler) :func:`fused_unavailable_reason` says so and the dispatcher stays on the PyTorch path. The
kernel recomputes corner indices and weights in the backward instead of storing [L, 2^d, N] tensors, and its
table gradient can be sparse (the rows the batch read, see :func:`fused_grid_encoding`). Second derivatives
(backward under ``create_graph``) are taken through the PyTorch path.
"""

from __future__ import annotations

import collections
import math
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from ..cpp_extension import build_extension
from .layout import INTERPOLATIONS
from .reference import GridLevels, kernel_input_reason

# Sparse table gradients only for batches making fewer lookups than this many per table row. Measured on 2
# cores (3D, 16 levels of 2^19 rows; fwd+bwd plus GridAdam's step): at 0.02 lookups per row sparse takes 6 ms
# and dense 26 (the lazy step reads all 16.7M gradients, 24 ms), at 0.07 both about 27 ms, at 0.29 sparse 40
# and dense 35; docs/benchmarks.md.
SPARSE_BELOW_READS_PER_ROW = 0.125
SOURCES = (str(Path(__file__).with_name("grid_cpu.cpp")),)
HEADERS = (str(Path(__file__).with_name("grid_kernels.h")),)


def cpu_extension() -> ModuleType | None:
    """The compiled grid kernel, or None (after a one-line notice on stderr) when it cannot be built here."""
    return build_extension("fused CPU grid kernel", SOURCES, HEADERS)


def fused_unavailable_reason(x: torch.Tensor) -> str | None:
    """Why the fused kernel cannot encode ``x: [N, d]`` here, or None when it can."""
    if x.device.type != "cpu":
        return f"the fused kernel runs on CPU tensors only, got a {x.device.type} input"
    reason = kernel_input_reason("fused kernel", x)
    if reason is None and cpu_extension() is None:
        return "the fused CPU kernel did not build here"
    return reason


def _level_args(levels: GridLevels, x: torch.Tensor, table: torch.Tensor, f: int, models: int) -> tuple:
    """The kernels' level arguments, then samples per model and rows per table (``models`` tables in ``table``)."""
    return (levels.scale.contiguous(), levels.offset, levels.dense_strides.contiguous(), levels.dense_size,
            torch.tensor(levels.primes, dtype=torch.int64), levels.n_dense, levels.hash_size,
            x.shape[0] // models, table.numel() // (f * models))


_KEPT: collections.OrderedDict[tuple[int, torch.dtype], torch.Tensor] = collections.OrderedDict()
_KEPT_MAX, _KEPT_MIN_BYTES = 8, 1 << 20  # the 8 most recently used sizes of at least 1 MiB
_KEPT_LOCK = threading.Lock()


def _buffer(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor for an output or a dense table gradient of the kernels (not a view of anything).

    The storage of the last one handed out for this size is reused once nothing else holds it (the step that
    used it is over: ``zero_grad(set_to_none=True)``, activations freed): a fresh table- or batch-sized buffer
    costs a page fault per 4 KiB on every step, which takes longer than writing it.
    """
    numel = math.prod(shape)
    if numel * dtype.itemsize < _KEPT_MIN_BYTES or not hasattr(torch._C, "_storage_Use_Count"):
        return torch.empty(shape, dtype=dtype)
    key = (numel, dtype)
    with _KEPT_LOCK:
        kept = _KEPT.get(key)
        if kept is not None:
            storage = kept.untyped_storage()
            claimed = torch.empty(0, dtype=dtype).set_(storage, 0, shape)
            if torch._C._storage_Use_Count(storage._cdata) == 3:  # `kept`, `storage` and `claimed` only
                _KEPT.move_to_end(key)
                return claimed
        fresh = torch.empty(shape, dtype=dtype)
        _KEPT[key] = torch.empty(0, dtype=dtype).set_(fresh.untyped_storage(), 0, (numel,))
        _KEPT.move_to_end(key)
        while len(_KEPT) > _KEPT_MAX:
            _KEPT.popitem(last=False)
        return fresh


class _FusedGrid(torch.autograd.Function):
    """table [E * F] flat, x [N, d] -> [N, L * F]; see fused_grid_encoding."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, table: torch.Tensor, levels: GridLevels, f: int, interpolation: str,
                accumulator: Callable[[], torch.Tensor] | None, reference: Callable, models: int) -> torch.Tensor:
        ext, args = cpu_extension(), _level_args(levels, x, table, f, models)
        ctx.save_for_backward(x, table)
        ctx.setup = (args, f, interpolation, accumulator, reference, levels)
        out = _buffer((x.shape[0], levels.scale.numel() * f), x.dtype)
        ext.forward(x.contiguous(), table.contiguous(), out, f, INTERPOLATIONS.index(interpolation), *args)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        x, table = ctx.saved_tensors
        args, f, interpolation, accumulator, reference, levels = ctx.setup
        if torch.is_grad_enabled():  # create_graph: differentiate the PyTorch path instead (second derivatives)
            wanted = [t for t, needed in zip((x, table), ctx.needs_input_grad[:2]) if needed]
            with torch.enable_grad():
                out = reference(x, table, levels, f, interpolation)
            grads = iter(torch.autograd.grad(out, wanted, grad, create_graph=True))
            return (next(grads) if ctx.needs_input_grad[0] else None,
                    next(grads) if ctx.needs_input_grad[1] else None, None, None, None, None, None, None)
        ext, code, grad = cpu_extension(), INTERPOLATIONS.index(interpolation), grad.contiguous()
        grad_x = grad_table = None
        if ctx.needs_input_grad[0]:
            grad_x = ext.backward_input(x.contiguous(), table.contiguous(), grad, f, code, *args)
        if ctx.needs_input_grad[1]:
            n_rows, n_reads = (table.numel() // f,
                               x.shape[0] * levels.scale.numel() * (1 if code == 1 else 2 ** x.shape[1]))
            if accumulator is None or n_reads >= SPARSE_BELOW_READS_PER_ROW * n_rows:  # dense is cheaper there
                grad_table = _buffer((table.numel(),), table.dtype)
                ext.backward_table(x.contiguous(), grad, grad_table, f, code, *args)
            else:
                workspace = accumulator()
                try:
                    index, values = ext.backward_table_sparse(x.contiguous(), grad, workspace, f, code, *args)
                except BaseException:  # the workspace must stay zero for the next step
                    workspace.zero_()
                    raise
                # unique but unsorted indices: not "coalesced" to torch, which assumes sorted ones
                grad_table = torch.sparse_coo_tensor(index[None], values, table.shape, is_coalesced=False,
                                                     check_invariants=False)
        return grad_x, grad_table, None, None, None, None, None, None


def fused_grid_encoding(x: torch.Tensor, table: torch.Tensor, levels: GridLevels, n_features_per_level: int,
                        interpolation: str, accumulator: Callable[[], torch.Tensor] | None,
                        reference: Callable, models: int = 1) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] from the flat table [E * F] (same dtype as x), as ``reference`` computes it.

    ``accumulator``: None for a dense table gradient, or a function giving a zero [E * F] workspace of the
    table's dtype for a sparse one where the batch makes fewer than SPARSE_BELOW_READS_PER_ROW lookups per table
    row (else dense, which is cheaper then): a COO tensor of the rows with a nonzero gradient, each once
    (unsorted, so not flagged coalesced); the workspace is left at zero, so such a step never touches the
    whole table.
    ``reference(x, table, levels, F, interpolation)`` is the differentiable PyTorch path, for second derivatives.
    ``models``: tables back to back in ``table``, read by equal blocks of x in turn (ops/grid ``grid_encoding``).
    """
    return _FusedGrid.apply(x, table, levels, n_features_per_level, interpolation, accumulator, reference, models)
