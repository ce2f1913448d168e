"""Coarse-to-fine schedules: which frequency bands or levels are on at a training step.

Shared by the Progressive encoding (encoders/progressive.py) and PINs' levels of detail (networks/pins.py):
PINs (Landgraf et al., ICML 2022) switch bands on one after another; BARF (Lin et al., ICCV 2021) eases each in
with a cosine window.
"""

from __future__ import annotations

import math

import torch

WINDOWS = ("cosine", "hard")


def schedule_alpha(step: int, start_step: int, end_step: int, n_bands: int) -> float:
    """How many bands beyond the first are on at ``step``: 0 until ``start_step``, rising linearly to
    ``n_bands - 1`` at ``end_step``, then constant."""
    if end_step <= start_step:
        return float(n_bands - 1) if step >= end_step else 0.0
    return (n_bands - 1) * min(max((step - start_step) / (end_step - start_step), 0.0), 1.0)


def band_weights(alpha: float, n_bands: int, window: str) -> torch.Tensor:
    """[n_bands] float64 weights in [0, 1] of bands 0..n_bands-1 at progress ``alpha`` in [0, n_bands - 1].

    Band 0 is always on. "cosine": BARF's window with bands numbered from 1, weight of band k =
    (1 - cos(pi * clamp(alpha - k + 1, 0, 1))) / 2; "hard": band k is on once alpha >= k.
    So alpha = 0 passes band 0 only and alpha = n_bands - 1 passes every band at weight 1.
    """
    k = torch.arange(n_bands, dtype=torch.float64)
    if window == "hard":
        return (k <= alpha).to(torch.float64)
    return (1 - torch.cos(math.pi * (alpha - k + 1).clamp(0, 1))) / 2


def set_training_step(model: torch.nn.Module, step: int) -> None:
    """Call ``set_step(step)`` on every submodule that has a schedule (each sets only its own state)."""
    for module in model.modules():
        if callable(getattr(module, "set_step", None)):
            module.set_step(step)
