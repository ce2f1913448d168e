"""Coarse-to-fine positional encoding: a schedule that switches an encoder's bands on one after another.

As in PINs (Landgraf et al., "Progressive Implicit Networks for Multi-Scale Neural Representations",
ICML 2022) and BARF (Lin et al., ICCV 2021, whose cosine window this offers), and for grids like tcnn's
``max_level``; the schedule is ops/schedules.py, shared with PINs' levels. The fit loop calls ``set_step(step)``
(``set_training_step``) on every module that has it before each training step.
"""

from __future__ import annotations

from typing import Any

import torch

from ..config.checks import check_choice, check_int, config_error
from ..ops.schedules import WINDOWS, band_weights, schedule_alpha
from .base import Encoder
from .registry import build_encoder, encoder_spec, register_encoder


@register_encoder()
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
    source = "Landgraf et al. 2022 (PINs); Lin et al. 2021 (BARF) for the cosine window"
    passes_backend_to_nested = True  # the window is torch; the nested encoder runs the backend asked for
    defaults = {"nested": None, "window": "cosine", "start_step": 0, "end_step": 1000}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(config["nested"], dict):
            got = f"{type(config['nested']).__name__} {config['nested']!r}"[:200]
            raise config_error(cls.otype,
                               f"'nested' must be the config (a mapping) of the encoder to schedule, got {got}")
        nested = encoder_spec(config["nested"], n_input_dims)
        if nested.n_bands is None:
            raise config_error(cls.otype, f"{nested.cls.otype} has no frequency bands or levels to schedule")
        start_step = check_int(cls.otype, "start_step", config["start_step"], 0)
        end_step = check_int(cls.otype, "end_step", config["end_step"], 0)
        if end_step < start_step:
            raise config_error(cls.otype, f"'end_step' ({end_step}) must not be before 'start_step' ({start_step})")
        return {"nested": nested.config, "window": check_choice(cls.otype, "window", config["window"], WINDOWS),
                "start_step": start_step, "end_step": end_step}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return encoder_spec(config["nested"], n_input_dims).n_output_dims

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int | None:
        return encoder_spec(config["nested"], n_input_dims).n_bands

    @classmethod
    def always_on_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        nested = encoder_spec(config["nested"], n_input_dims)
        return nested.cls.always_on_dims(n_input_dims, nested.config)

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        nested = encoder_spec(config["nested"], n_input_dims)
        return nested.cls.parameter_count(n_input_dims, nested.config) + nested.n_output_dims + 1  # + bands, step

    @classmethod
    def fixed_activation_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        nested = encoder_spec(config["nested"], n_input_dims)
        return nested.cls.fixed_activation_count(n_input_dims, nested.config)

    def _build(self, config: dict[str, Any]) -> None:
        self.nested = build_encoder(config["nested"], self.n_input_dims, self.nested_backend(self.backend))
        bands = self.nested.output_bands()
        self.register_buffer("bands", bands, persistent=False)
        self.n_bands = int(bands.max()) + 1
        self.window, self.start_step, self.end_step = config["window"], config["start_step"], config["end_step"]
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))
        self.uses_cov = self.nested.uses_cov

    def set_step(self, step: int) -> None:
        self.step.fill_(int(step))

    @property
    def alpha(self) -> float:
        """Progress in [0, n_bands - 1] at the current step."""
        return schedule_alpha(int(self.step), self.start_step, self.end_step, self.n_bands)

    def output_bands(self) -> torch.Tensor:
        return self.bands.cpu()

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        weights = torch.cat([torch.ones(1, dtype=torch.float64), band_weights(self.alpha, self.n_bands, self.window)])
        per_output = weights.to(x.device, x.dtype)[self.bands + 1]  # band -1 (always on) reads weights[0]
        return self.nested.run(x, cov) * per_output
