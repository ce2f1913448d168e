"""A multilayer perceptron configured with tiny-cuda-nn's network keys, plus SIREN/SPDER settings."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..config.checks import check_bool, check_choice, check_float, check_int, check_seed, config_error
from ..encoders.base import Encoder, EncoderSpec, seeded_generator
from .activations import ACTIVATIONS, PERIODIC, spder_arctan
from .base import Network, in_row_blocks
from .registry import register_network

OTYPES = ("MLP", "FullyFusedMLP", "CutlassMLP")
DEFAULTS: dict[str, Any] = {
    "otype": "MLP", "n_neurons": 64, "n_hidden_layers": 2, "activation": "ReLU", "output_activation": "None",
    "omega_0": 30.0, "first_omega_0": None, "spder_variant": "sqrt", "input_map": None, "bias": True, "seed": 1337,
}
MAX_HIDDEN_LAYERS = 1024  # each layer is its own nn.Linear module
MAX_OMEGA = 1e5  # SIREN's audio uses 3000; beyond, float32 pre-activations have no sine left to speak of


@register_network()
class MLP(Network):
    """``{"otype": "MLP", "n_neurons": 64, "n_hidden_layers": 2,
    "activation": "ReLU", "output_activation": "None"}`` (tcnn's keys) and, for "Sine"/"SPDER":
    ``omega_0`` (30), ``first_omega_0`` (defaults to omega_0; SIREN uses 3000 for audio), ``spder_variant``
    ("sqrt": sin(z) sqrt|z|, "arctan": sin(z) arctan(z) for audio).

    ``input_map``: "signed" maps inputs from [0, 1] to [-1, 1] first, "none" leaves them; the default is
    "signed" for Sine/SPDER (SIREN and SPDER work on [-1, 1]) and "none" otherwise. ``bias``: default true.
    tcnn's FullyFusedMLP/CutlassMLP (no biases, padded) are ``TcnnMLP``; a config of either otype that names one
    of this class's own keys (``bias``, ``omega_0``, ...) builds this class under that otype. Init: torch's nn.Linear
    default for ReLU-like nets; SIREN's for Sine/SPDER
    (first layer U(+-1/fan_in), later layers U(+-sqrt(6/fan_in)/omega_0), biases U(+-1/sqrt(fan_in))),
    drawn from ``seed``. x: [..., n_input_dims] -> [..., n_output_dims].
    """

    otype = "MLP"
    source = "tiny-cuda-nn DOCUMENTATION.md network keys; Sitzmann et al. 2020 (SIREN); Shah & Sitawarin 2024 (SPDER)"
    defaults = DEFAULTS

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        otype = check_choice("network", "otype", config["otype"], OTYPES)
        activation = check_choice("network", "activation", config["activation"], ACTIVATIONS)
        omega_0 = check_float("network", "omega_0", config["omega_0"], 0.0, low_inclusive=False, high=MAX_OMEGA)
        first = config["first_omega_0"] if config["first_omega_0"] is not None else omega_0
        first_omega_0 = check_float("network", "first_omega_0", first, 0.0, low_inclusive=False, high=MAX_OMEGA)
        spder_variant = check_choice("network", "spder_variant", config["spder_variant"], ("sqrt", "arctan"))
        periodic = activation in PERIODIC
        input_map = config["input_map"] if config["input_map"] is not None else ("signed" if periodic else "none")
        if not periodic and (config["first_omega_0"] is not None or config["omega_0"] != DEFAULTS["omega_0"]):
            raise config_error("network", f"'omega_0' and 'first_omega_0' apply to Sine and SPDER, not {activation}")
        if spder_variant != "sqrt" and activation != "SPDER":
            raise config_error("network", f"'spder_variant' applies to SPDER, not {activation}")
        return {
            "otype": otype, "n_neurons": check_int("network", "n_neurons", config["n_neurons"], 1),
            "n_hidden_layers": check_int("network", "n_hidden_layers", config["n_hidden_layers"], 0, MAX_HIDDEN_LAYERS),
            "activation": activation,
            "output_activation": check_choice("network", "output_activation", config["output_activation"], ACTIVATIONS),
            "omega_0": omega_0, "first_omega_0": first_omega_0 if periodic else None, "spder_variant": spder_variant,
            "input_map": check_choice("network", "input_map", input_map, ("signed", "none")),
            "bias": check_bool("network", "bias", config["bias"]), "seed": check_seed("network", config["seed"]),
        }

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None = None) -> int:
        widths = [n_input_dims] + [config["n_neurons"]] * config["n_hidden_layers"] + [n_output_dims]
        return sum(a * b + (b if config["bias"] else 0) for a, b in zip(widths[:-1], widths[1:]))

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None = None) -> int:
        return config["n_neurons"] * config["n_hidden_layers"] + n_output_dims

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        self.activation, self.output_activation = config["activation"], config["output_activation"]
        self.omega_0, self.input_map = config["omega_0"], config["input_map"]
        periodic = self.activation in PERIODIC
        self.first_omega_0 = config["first_omega_0"] if periodic else self.omega_0
        widths = [self.n_input_dims] + [config["n_neurons"]] * config["n_hidden_layers"] + [self.n_output_dims]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=config["bias"]) for a, b in zip(widths[:-1], widths[1:]))
        self._hidden_fn = ACTIVATIONS[self.activation]
        if self.activation == "SPDER" and config["spder_variant"] == "arctan":
            self._hidden_fn = spder_arctan
        self._init(seeded_generator(config["seed"]), periodic)

    def _init(self, generator: torch.Generator, periodic: bool) -> None:
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                fan_in = layer.in_features
                if not periodic:
                    bound = 1 / math.sqrt(fan_in)
                elif i == 0:
                    bound = 1 / fan_in
                else:
                    bound = math.sqrt(6 / fan_in) / self.omega_0
                # U(-bound, bound) drawn in place, no temporary the size of the layer: (rand * 2 - 1) * bound
                torch.rand(layer.weight.shape, generator=generator,
                           out=layer.weight.detach()).mul_(2).sub_(1).mul_(bound)
                if layer.bias is not None:
                    bias_bound = 1 / math.sqrt(fan_in)
                    torch.rand(layer.bias.shape, generator=generator,
                               out=layer.bias.detach()).mul_(2).sub_(1).mul_(bias_bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., n_input_dims] -> [..., n_output_dims], in the dtype of the weights (large batches without
        autograd in blocks of rows: base.in_row_blocks)."""
        return in_row_blocks(self._layers, x)

    def _layers(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(self.layers[0].weight.dtype)
        if self.input_map == "signed":
            h = h * 2 - 1
        periodic = self.activation in PERIODIC
        for i, layer in enumerate(self.layers[:-1]):
            z = layer(h)
            if periodic:
                z = z * (self.first_omega_0 if i == 0 else self.omega_0)
            h = z.relu_() if self.activation == "ReLU" else self._hidden_fn(z)  # in place: no new buffer
        return ACTIVATIONS[self.output_activation](self.layers[-1](h))
