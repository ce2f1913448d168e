"""The fused CPU grid kernel (grid_cpu.cpp), built with torch's C++ extension tooling at first use.

``grid_encoding`` in encoders/grid_functional.py calls :func:`fused_grid_encoding` for CPU inputs when the
extension builds (a C++ compiler is present); otherwise it prints one line and stays on the PyTorch path. The
kernel recomputes corner indices and weights in the backward instead of storing [L, 2^d, N] tensors, and its
table gradient can be sparse (the rows the batch read, see :func:`fused_grid_encoding`). Second derivatives
(backward under ``create_graph``) are taken through the PyTorch path.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import math
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from ..encoders.grid_functional import GridLevels

INTERPOLATION_CODES = {"Linear": 0, "Nearest": 1, "Smoothstep": 2}
# Sparse table gradients only for batches making fewer lookups than this many per table row. Measured on 2
# cores (3D, 16 levels of 2^19 rows; fwd+bwd plus GridAdam's step): at 0.02 lookups per row sparse takes 6 ms
# and dense 26 (the lazy step reads all 16.7M gradients, 24 ms), at 0.07 both about 27 ms, at 0.29 sparse 40
# and dense 35; docs/benchmarks.md.
SPARSE_BELOW_READS_PER_ROW = 0.125
SOURCES = [str(Path(__file__).with_name(name)) for name in ("grid_cpu.cpp", "lazy_adam.cpp")]
HEADER = Path(__file__).with_name("grid_kernels.h")


@functools.lru_cache(maxsize=1)
def cpu_extension() -> ModuleType | None:
    """The compiled kernels, or None (after a one-line notice on stderr) when they cannot be built here.
    ``INR_ENC_NO_EXTENSION=1`` skips them. Builds land in torch's extension cache (TORCH_EXTENSIONS_DIR)."""
    if os.environ.get("INR_ENC_NO_EXTENSION") == "1":
        return None
    try:
        from torch.utils.cpp_extension import _get_build_directory, load

        # one build per environment and torch version (an extension is bound to the torch it was compiled
        # against; environments sharing a build folder would rebuild it in turn) and per kernel source, header
        # included (torch's own rebuild check reads the listed sources only)
        stamp = b"".join(Path(path).read_bytes() for path in (*SOURCES, HEADER)) + sys.prefix.encode()
        digest = hashlib.sha1(stamp).hexdigest()[:10]
        name = "inr_enc_grid_cpu_" + re.sub(r"\W", "_", torch.__version__) + "_" + digest
        build = Path(_get_build_directory(name, verbose=False))  # the folder load() builds in
        if not any(build.glob("*.so")) and not any(build.glob("*.pyd")):
            print("inr_enc: building the fused CPU grid kernel for this environment (once, about a minute)",
                  file=sys.stderr)
        try:
            return load(name=name, sources=SOURCES, extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
        except Exception:  # e.g. Apple clang, which has no -fopenmp: one thread, still fused
            return load(name=name + "_serial", sources=SOURCES, extra_cflags=["-O3"])
    except Exception as error:  # no compiler, no headers, a failed build: all mean "use the torch path"
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        print(f"inr_enc: the fused CPU grid kernel is unavailable ({reason[:200]}); grids run on the PyTorch path",
              file=sys.stderr)
        return None


def fused_unavailable_reason(x: torch.Tensor, params: torch.Tensor, n_features_per_level: int) -> str | None:
    """Why the fused kernel cannot encode ``x`` here, or None when it can."""
    if x.device.type != "cpu" or params.device.type != "cpu":
        return "the fused kernel runs on CPU tensors only"
    if x.dtype not in (torch.float32, torch.float64):
        return f"the fused kernel takes float32 or float64 inputs, got {x.dtype}"
    if n_features_per_level > 8 or x.shape[1] > 7:
        return "the fused kernel handles up to 8 features per level and 7 input dims"
    if cpu_extension() is None:
        return "the fused CPU kernel did not build here"
    return None


def _level_args(levels: GridLevels) -> tuple:
    return (levels.scale.contiguous(), levels.offset, levels.dense_strides.contiguous(), levels.dense_size,
            torch.tensor(levels.primes, dtype=torch.int64), levels.n_dense, levels.hash_size)


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
                accumulator: Callable[[], torch.Tensor] | None, reference: Callable) -> torch.Tensor:
        ext, args = cpu_extension(), _level_args(levels)
        ctx.save_for_backward(x, table)
        ctx.setup = (args, f, interpolation, accumulator, reference, levels)
        out = _buffer((x.shape[0], levels.scale.numel() * f), x.dtype)
        ext.forward(x.contiguous(), table.contiguous(), out, f, INTERPOLATION_CODES[interpolation], *args)
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
                    next(grads) if ctx.needs_input_grad[1] else None, None, None, None, None, None)
        ext, code, grad = cpu_extension(), INTERPOLATION_CODES[interpolation], grad.contiguous()
        grad_x = grad_table = None
        if ctx.needs_input_grad[0]:
            grad_x = ext.backward_input(x.contiguous(), table.contiguous(), grad, f, code, *args)
        if ctx.needs_input_grad[1]:
            n_rows, n_reads = table.numel() // f, x.shape[0] * levels.scale.numel() * (1 if code == 1 else 2 ** x.shape[1])
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
        return grad_x, grad_table, None, None, None, None, None


def fused_grid_encoding(x: torch.Tensor, table: torch.Tensor, levels: GridLevels, n_features_per_level: int,
                        interpolation: str, accumulator: Callable[[], torch.Tensor] | None,
                        reference: Callable) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] from the flat table [E * F] (same dtype as x), as ``reference`` computes it.

    ``accumulator``: None for a dense table gradient, or a function giving a zero [E * F] workspace of the
    table's dtype for a sparse one where the batch makes fewer than SPARSE_BELOW_READS_PER_ROW lookups per table
    row (else dense, which is cheaper then): a COO tensor of the rows with a nonzero gradient, each once
    (unsorted, so not flagged coalesced); the workspace is left at zero, so such a step never touches the
    whole table.
    ``reference(x, table, levels, F, interpolation)`` is the differentiable PyTorch path, for second derivatives.
    """
    return _FusedGrid.apply(x, table, levels, n_features_per_level, interpolation, accumulator, reference)


def lazy_adam_step(param: torch.Tensor, state: dict[str, torch.Tensor], grad: torch.Tensor, lr: float,
                   betas: tuple[float, float], eps: float) -> None:
    """In place: optim.GridAdam's lazy update of the flat ``param`` with a dense or a flat sparse ``grad``.
    A sparse gradient is coalesced (a sort) only where its indices repeat: the kernel's own never do, while
    gradients accumulated over several backwards do."""
    def apply(grad: torch.Tensor) -> bool:
        indices, values = (grad._indices()[0], grad._values()) if grad.is_sparse else (grad.new_empty(0, dtype=torch.int64), grad)
        return cpu_extension().lazy_adam(param, state["exp_avg"], state["exp_avg_sq"], state["step"],
                                         indices.contiguous(), values.contiguous(), lr, betas[0], betas[1], eps)

    if not apply(grad) and not apply(grad.coalesce()):
        raise AssertionError("lazy_adam rejected a coalesced gradient")
