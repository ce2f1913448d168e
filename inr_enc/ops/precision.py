"""Which floating types computations use."""

from __future__ import annotations

import torch


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 input computes in float64 (gradcheck); every other floating dtype computes in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def wide_dtype(device: torch.device | str) -> torch.dtype:
    """The type for running sums and other wide intermediates: float64, except on MPS, which has no float64."""
    return torch.float32 if torch.device(device).type == "mps" else torch.float64
