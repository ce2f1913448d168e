"""Coarse-to-fine positional encoding: a schedule that switches an encoder's bands on one after another.

As in PINs (Landgraf et al., "Progressive Implicit Networks for Multi-Scale Neural Representations",
ICML 2022; networks/pins.py uses the same schedule for its levels) and BARF (Lin et al., ICCV 2021, whose
cosine window this offers), and for grids like tcnn's ``max_level``. The fit loop calls ``set_step(step)``
(``set_training_step``) on every module that has it before each training step.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import Encoder, check_choice, check_int, config_error

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


class Progressive(Encoder):
    """``{"otype": "Progressive", "nested": {<encoder config>}, "window": "cosine" | "hard",
    "start_step": 0, "end_step": 1000}``.

    Wraps an encoder whose outputs are ordered in bands (Frequency, TriangleWave, NeRF: one band per
    frequency; Grid/HashGrid/DenseGrid/TiledGrid: one band per level) and multiplies each band by its
    window weight at the current step (``set_step``); finer bands and, for grids, their table entries get
    no gradient until switched on. The step is a buffer, so a saved model evaluates as it was trained.
    x: [..., d] -> [..., nested width], the nested encoder's values times weights in [0, 1].
    """

    otype = "Progressive"
    grid_kernels = True  # the backend goes to the nested encoder
    defaults = {"nested": None, "window": "cosine", "start_step": 0, "end_step": 1000}

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        from .registry import build_encoder

        if not isinstance(config["nested"], dict):
            raise config_error(self.otype, "'nested' must be the config of the encoder to schedule")
        self.nested = build_encoder(config["nested"], self.n_input_dims, self.backend)
        self.backend = "torch"  # the window is torch; the nested encoder runs on the backend asked for
        bands = self.nested.output_bands()
        if bands is None:
            raise config_error(self.otype, f"{self.nested.otype} has no frequency bands or levels to schedule")
        self.register_buffer("bands", bands, persistent=False)
        self.n_bands = int(bands.max()) + 1
        self.window = check_choice(self.otype, "window", config["window"], WINDOWS)
        self.start_step = check_int(self.otype, "start_step", config["start_step"], 0)
        self.end_step = check_int(self.otype, "end_step", config["end_step"], 0)
        if self.end_step < self.start_step:
            raise config_error(self.otype, f"'end_step' ({self.end_step}) must not be before 'start_step' ({self.start_step})")
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))
        self.n_output_dims = self.nested.n_output_dims
        return {"nested": self.nested.config, "window": self.window, "start_step": self.start_step, "end_step": self.end_step}

    def set_step(self, step: int) -> None:
        self.step.fill_(int(step))

    @property
    def alpha(self) -> float:
        """Progress in [0, n_bands - 1] at the current step."""
        return schedule_alpha(int(self.step), self.start_step, self.end_step, self.n_bands)

    def output_bands(self) -> torch.Tensor:
        return self.bands.cpu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.cat([torch.ones(1, dtype=torch.float64), band_weights(self.alpha, self.n_bands, self.window)])
        per_output = weights.to(x.device, x.dtype)[self.bands + 1]  # band -1 (always on) reads weights[0]
        return self.nested(x) * per_output
