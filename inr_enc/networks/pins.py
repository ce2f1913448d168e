"""PINs' hierarchical MLP (Landgraf et al., "Progressive Implicit Networks for Multi-Scale Neural
Representations", ICML 2022): levels of detail that share one progressive positional encoding.

The paper has no public code; the choices below are ours and tested (tests/test_pins.py):
- The encoder's bands (``Encoder.output_bands``: frequencies, or grid levels) are split into ``n_levels``
  consecutive groups of (nearly) equal size; always-on dims (NeRF's raw input) belong to level 0.
- Level k is an MLP fed the encoded dims of levels 0..k and the last hidden features of level k-1
  (the hierarchy); its linear head adds a residual to the output: y_k = y_{k-1} + head_k(h_k). Level k thus
  only sees bands of levels <= k, and ``forward(h, level=k)`` runs levels 0..k only (a smaller network).
- Training is progressive, without per-level targets: level k is switched on by the same schedule as the
  Progressive encoding (ops/schedules.py: ``start_step``, ``end_step``, ``window``; ``set_step`` is called by the
  fit loop),
  so coarse levels learn the signal alone before finer ones add detail; without ``level`` the forward
  pass uses the schedule's weights (all 1 once training passes ``end_step``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..config.checks import check_choice, check_int, check_seed, config_error
from ..encoders.base import Encoder, EncoderSpec
from ..ops.schedules import WINDOWS, band_weights, schedule_alpha
from .activations import ACTIVATIONS, PERIODIC
from .base import Network
from .mlp import MAX_HIDDEN_LAYERS, MLP
from .registry import register_network

PINS_DEFAULTS: dict[str, Any] = {
    "otype": "PINs", "n_levels": 4, "n_neurons": 64, "n_hidden_layers": 2, "activation": "ReLU",
    "output_activation": "None", "window": "hard", "start_step": 0, "end_step": 1000, "seed": 1337,
}


def level_of_bands(bands: torch.Tensor, n_levels: int) -> torch.Tensor:
    """[n_dims] level of each encoded dim: band b of B goes to level floor(b * n_levels / B); band -1 to 0."""
    n_bands = int(bands.max()) + 1
    return torch.where(bands < 0, 0, torch.div(bands.clamp(min=0) * n_levels, n_bands, rounding_mode="floor"))


@register_network()
class PINs(Network):
    """``{"otype": "PINs", "n_levels": 4, "n_neurons": 64, "n_hidden_layers": 2, "activation": "ReLU",
    "output_activation": "None", "window": "hard", "start_step": 0, "end_step": 1000, "seed": 1337}``;
    ``n_hidden_layers`` and ``n_neurons`` are per level.

    h: [..., n_input_dims] encoded coordinates whose dims belong to the encoder's ``output_bands()`` ->
    [..., n_output_dims].
    """

    otype = "PINs"
    source = "Landgraf et al. 2022 (PINs: Progressive Implicit Networks)"
    defaults = PINS_DEFAULTS
    has_levels = True

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        if encoder is None or encoder.n_bands is None:
            raise config_error("PINs", "needs an encoding with frequency bands or levels "
                                       "(Frequency, NeRF, TriangleWave, a grid)")
        activation = check_choice("PINs", "activation", config["activation"], ACTIVATIONS)
        if activation in PERIODIC:
            raise config_error("PINs", f"levels use non-periodic activations (ReLU, ...), got {activation}")
        start_step = check_int("PINs", "start_step", config["start_step"], 0)
        return {
            **config, "n_levels": check_int("PINs", "n_levels", config["n_levels"], 1, encoder.n_bands),
            "n_neurons": check_int("PINs", "n_neurons", config["n_neurons"], 1),
            "n_hidden_layers": check_int("PINs", "n_hidden_layers", config["n_hidden_layers"], 1, MAX_HIDDEN_LAYERS),
            "activation": activation,
            "output_activation": check_choice("PINs", "output_activation", config["output_activation"], ACTIVATIONS),
            "window": check_choice("PINs", "window", config["window"], WINDOWS), "start_step": start_step,
            "end_step": check_int("PINs", "end_step", config["end_step"], start_step),
            "seed": check_seed("PINs", config["seed"]),
        }

    @classmethod
    def level_input_widths(cls, n_levels: int, encoder: EncoderSpec) -> list[int]:
        """Encoded dims level k reads (those of levels <= k, ``level_of_bands``), from the encoder's spec alone."""
        always_on = encoder.cls.always_on_dims(encoder.n_input_dims, encoder.config)
        n_bands = encoder.n_bands
        per_band = (encoder.n_output_dims - always_on) // n_bands
        # band b is at level floor(b L / B) <= k for b < ceil((k + 1) B / L)
        return [always_on + per_band * min(n_bands, -(-(k + 1) * n_bands // n_levels)) for k in range(n_levels)]

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None) -> int:
        n_levels, n_neurons, depth = config["n_levels"], config["n_neurons"], config["n_hidden_layers"]
        inputs = cls.level_input_widths(n_levels, encoder)
        body = {"n_neurons": n_neurons, "n_hidden_layers": depth - 1, "bias": True}
        bodies = sum(MLP.parameter_count(w + (n_neurons if k else 0), n_neurons, body) for k, w in enumerate(inputs))
        heads = n_levels * MLP.parameter_count(n_neurons, n_output_dims, {**body, "n_hidden_layers": 0})
        return bodies + heads + sum(inputs) + 1  # + the buffers: the dims each level reads, the step

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None) -> int:
        inputs = sum(cls.level_input_widths(config["n_levels"], encoder))
        return inputs + config["n_levels"] * (config["n_neurons"] * config["n_hidden_layers"] + 2 * n_output_dims)

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        n_levels, n_neurons, seed = config["n_levels"], config["n_neurons"], config["seed"]
        self.n_levels, self.output_activation, self.window = n_levels, config["output_activation"], config["window"]
        self.start_step, self.end_step = config["start_step"], config["end_step"]
        levels = level_of_bands(encoder.output_bands(), n_levels)
        activation = config["activation"]
        body = {"n_neurons": n_neurons, "n_hidden_layers": config["n_hidden_layers"] - 1, "activation": activation,
                "output_activation": activation}
        inputs = [torch.nonzero(levels <= k).flatten() for k in range(n_levels)]  # dims level k reads
        for k, index in enumerate(inputs):
            self.register_buffer(f"inputs_{k}", index, persistent=False)
        widths = [len(index) + (n_neurons if k else 0) for k, index in enumerate(inputs)]
        self.bodies = nn.ModuleList(MLP(w, n_neurons, {**body, "seed": seed + k}) for k, w in enumerate(widths))
        self.heads = nn.ModuleList(MLP(n_neurons, self.n_output_dims,
                                       {"n_hidden_layers": 0, "seed": seed + n_levels + k})
                                   for k in range(n_levels))
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))

    def set_step(self, step: int) -> None:
        self.step.fill_(int(step))

    def level_weights(self) -> torch.Tensor:
        """[n_levels] weights of the levels at the current step (level 0 always 1)."""
        alpha = schedule_alpha(int(self.step), self.start_step, self.end_step, self.n_levels)
        return band_weights(alpha, self.n_levels, self.window)

    def forward(self, h: torch.Tensor, level: int | None = None) -> torch.Tensor:
        """h: [..., n_input_dims] -> [..., n_output_dims]; ``level``: evaluate levels 0..level only (weights 1)."""
        if level is None:
            weights = self.level_weights().tolist()
        elif isinstance(level, int) and 0 <= level < self.n_levels:
            weights = [1.0] * (level + 1)
        else:
            raise ValueError(f"PINs: level must be an int in [0, {self.n_levels - 1}], got {level!r}")
        out, hidden = None, None
        for k, weight in enumerate(weights):
            if weight == 0:
                break
            inputs = h.index_select(-1, getattr(self, f"inputs_{k}"))
            hidden = self.bodies[k](inputs if hidden is None else torch.cat([inputs, hidden], dim=-1))
            residual = self.heads[k](hidden) * weight
            out = residual if out is None else out + residual
        return ACTIVATIONS[self.output_activation](out)
