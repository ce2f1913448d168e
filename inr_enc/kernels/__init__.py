"""Optional compiled kernels for the grid encodings; the PyTorch path (encoders/grid_functional.py) stays the
reference and the fallback. cpu_grid: a C++ kernel built at first use; triton_grid: a Triton kernel for CUDA."""

from __future__ import annotations

import torch

GRID_KERNELS = ("auto", "torch", "cpp", "triton")


def grid_kernel(backend: str) -> str:
    """The grid kernel an encoder ``backend`` asks for: itself for "torch", "cpp", "triton", else "auto"."""
    return backend if backend in GRID_KERNELS else "auto"


def grid_kernel_unavailable_reason(kernel: str, x: torch.Tensor, params: torch.Tensor, n_features: int) -> str | None:
    """Why ``kernel`` ("cpp" or "triton") cannot encode ``x`` here, or None when it can."""
    if kernel == "cpp":
        from .cpu_grid import fused_unavailable_reason

        return fused_unavailable_reason(x, params, n_features)
    from .triton_grid import triton_unavailable_reason

    return triton_unavailable_reason(x)


def pick_grid_kernel(kernel: str, x: torch.Tensor, params: torch.Tensor, n_features: int) -> str:
    """The path that computes a grid encoding of ``x``: ``kernel`` itself ("torch", or "cpp"/"triton" when
    they can run here, else ValueError), or for "auto" cpp on CPU, triton on CUDA where they run, else torch."""
    if kernel == "torch":
        return "torch"
    if kernel == "auto":
        candidate = "cpp" if x.device.type == "cpu" else "triton" if x.device.type == "cuda" else None
        if candidate is None or grid_kernel_unavailable_reason(candidate, x, params, n_features) is not None:
            return "torch"
        return candidate
    reason = grid_kernel_unavailable_reason(kernel, x, params, n_features)
    if reason is not None:
        raise ValueError(f"grid kernel {kernel!r} unavailable: {reason}")
    return kernel
