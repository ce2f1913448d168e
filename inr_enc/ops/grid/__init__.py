"""Grid operations: tiny-cuda-nn's multiresolution grids as functions of a flat parameter table.

- ``layout``: level geometry and table layout, computed as tcnn does (pure Python);
- ``reference``: the PyTorch reference (corner indices, weights, interpolation; first and second derivatives);
- ``cpu_kernel``: the fused C++ kernel (CPU), ``triton_kernel``: the Triton kernel (CUDA);
- here: :func:`grid_encoding`, which runs the implementation it is told to, and :func:`kernel_unavailable_reason`,
  which says why a kernel cannot run an input. Which implementation to use is decided by the encoders'
  dispatcher (encoders/backends.py), not here.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable

import torch

from ...config.backends import KERNELS
from ..ranks import several_ranks
from .layout import (
    GRID_TYPES,
    HASH_PRIMES,
    INTERPOLATIONS,
    UINT32_MASK,
    GridLevel,
    default_per_level_scale,
    grid_levels,
)
from .reference import GridLevels, torch_grid_encoding


def kernel_unavailable_reason(kernel: str, x: torch.Tensor, tables: Iterable[torch.Tensor] = ()) -> str | None:
    """Why ``kernel`` cannot encode ``x: [N, d]`` from ``tables`` here ("torch" always can), or None when it can.
    Asking about "cpp" builds the C++ extension at its first use; asking about "triton" imports triton."""
    if kernel == "torch":
        return None
    elsewhere = [table.device for table in tables if table.device != x.device]
    if elsewhere:  # the kernels read raw pointers: a table on another device must not reach them
        return f"the grid table is on {elsewhere[0]}, the input on {x.device}"
    if kernel == "cpp":
        from .cpu_kernel import fused_unavailable_reason

        return fused_unavailable_reason(x)
    if kernel == "triton":
        from .triton_kernel import triton_unavailable_reason

        return triton_unavailable_reason(x)
    raise ValueError(f"unknown grid kernel {kernel!r}; valid kernels: {', '.join(KERNELS)}")


def sparse_accumulator(owner: torch.nn.Module, params: torch.Tensor) -> Callable[[], torch.Tensor] | None:
    """None unless ``owner.sparse_gradients`` is on and ``params`` is being trained; else a function giving the
    zero workspace (like ``params``) that sparse table gradients accumulate in, made at its first call (only a
    backward that goes sparse needs it) and kept on ``owner``.

    Also None in a torch.distributed group of several ranks: DistributedDataParallel's reducer copies each
    gradient into a dense bucket and takes sparse ones only for ``nn.Embedding(sparse=True)``, and then always
    (it fails with "Cannot access storage of SparseTensorImpl"); the tables get dense gradients there."""
    if not (owner.sparse_gradients and params.requires_grad and torch.is_grad_enabled()) or several_ranks():
        return None

    def workspace() -> torch.Tensor:
        kept = owner.__dict__.get("_sparse_accumulator")
        if kept is None or kept.shape != params.shape or kept.dtype != params.dtype or kept.device != params.device:
            kept = owner.__dict__["_sparse_accumulator"] = torch.zeros_like(params, requires_grad=False)
        return kept

    return workspace


def grid_encoding(
    x: torch.Tensor, params: torch.Tensor, levels: GridLevels, n_features_per_level: int, interpolation: str,
    kernel: str = "torch", sparse_accumulator: Callable[[], torch.Tensor] | None = None, models: int = 1,
) -> torch.Tensor:
    """x: [N, d] -> [N, L * F] (level-major, feature-minor), read from the flat table ``params`` [E * F].

    ``models`` > 1: ``params`` holds that many tables back to back ([models * E * F]) and x that many equal
    blocks of samples, block m reading table m (many fields fitted as one computation; N divisible by models).

    ``kernel``: "torch" (the reference), "cpp" (the fused CPU kernel) or "triton"; the three agree to float
    rounding. ``sparse_accumulator`` (see the function of that name): the cpp kernel may then give ``params`` a
    sparse gradient holding only the rows the batch read (for optim.GridAdam); the other kernels ignore it.
    """
    if models < 1 or x.shape[0] % models or params.numel() % models:
        raise ValueError(f"models={models}: the {x.shape[0]} samples and {params.numel()} table elements must split "
                         "into that many equal blocks")
    if kernel == "torch":
        return torch_grid_encoding(x, params, levels, n_features_per_level, interpolation, models)
    table = params.to(x.dtype)
    if kernel == "cpp":
        from .cpu_kernel import fused_grid_encoding

        accumulator = sparse_accumulator if table is params else None  # not through a dtype conversion
        reference = functools.partial(torch_grid_encoding, models=models)
        return fused_grid_encoding(x, table, levels, n_features_per_level, interpolation, accumulator, reference,
                                   models)
    if kernel == "triton":
        from .triton_kernel import triton_grid_encoding

        return triton_grid_encoding(x, table, levels, n_features_per_level, interpolation, models)
    raise ValueError(f"unknown grid kernel {kernel!r}; valid kernels: {', '.join(KERNELS)}")


__all__ = ["GRID_TYPES", "HASH_PRIMES", "INTERPOLATIONS", "KERNELS", "UINT32_MASK", "GridLevel", "GridLevels",
           "default_per_level_scale", "grid_encoding", "grid_levels", "kernel_unavailable_reason",
           "sparse_accumulator", "torch_grid_encoding"]
