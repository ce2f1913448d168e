"""A multilayer perceptron configured with tiny-cuda-nn's network keys, plus SIREN/SPDER settings."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..encoders.base import check_bool, check_choice, check_float, check_int, check_keys, config_error, seeded_generator
from .activations import ACTIVATIONS, PERIODIC, spder, spder_arctan

OTYPES = ("MLP", "FullyFusedMLP", "CutlassMLP")
DEFAULTS: dict[str, Any] = {
    "otype": "MLP", "n_neurons": 64, "n_hidden_layers": 2, "activation": "ReLU", "output_activation": "None",
    "omega_0": 30.0, "first_omega_0": None, "spder_variant": "sqrt", "input_map": None, "bias": True, "seed": 1337,
}


class MLP(nn.Module):
    """``{"otype": "FullyFusedMLP" | "CutlassMLP" | "MLP", "n_neurons": 64, "n_hidden_layers": 2,
    "activation": "ReLU", "output_activation": "None"}`` (tcnn's keys) and, for "Sine"/"SPDER":
    ``omega_0`` (30), ``first_omega_0`` (defaults to omega_0; SIREN uses 3000 for audio), ``spder_variant``
    ("sqrt": sin(z) sqrt|z|, "arctan": sin(z) arctan(z) for audio).

    ``input_map``: "signed" maps inputs from [0, 1] to [-1, 1] first, "none" leaves them; the default is
    "signed" for Sine/SPDER (SIREN and SPDER work on [-1, 1]) and "none" otherwise. ``bias``: tcnn's fused
    MLPs have none; default true. Init: torch's nn.Linear default for ReLU-like nets; SIREN's for Sine/SPDER
    (first layer U(+-1/fan_in), later layers U(+-sqrt(6/fan_in)/omega_0), biases U(+-1/sqrt(fan_in))),
    drawn from ``seed``. x: [..., n_input_dims] -> [..., n_output_dims].
    """

    def __init__(self, n_input_dims: int, n_output_dims: int, config: dict | None = None) -> None:
        super().__init__()
        config = {**DEFAULTS, **(config or {})}
        check_keys("network", config, DEFAULTS)
        otype = check_choice("network", "otype", config["otype"], OTYPES)
        self.n_input_dims = check_int("network", "n_input_dims", n_input_dims, 1)
        self.n_output_dims = check_int("network", "n_output_dims", n_output_dims, 1)
        n_neurons = check_int("network", "n_neurons", config["n_neurons"], 1)
        n_hidden = check_int("network", "n_hidden_layers", config["n_hidden_layers"], 0)
        self.activation = check_choice("network", "activation", config["activation"], ACTIVATIONS)
        self.output_activation = check_choice("network", "output_activation", config["output_activation"], ACTIVATIONS)
        self.omega_0 = check_float("network", "omega_0", config["omega_0"], 0.0, low_inclusive=False)
        first = config["first_omega_0"] if config["first_omega_0"] is not None else self.omega_0
        self.first_omega_0 = check_float("network", "first_omega_0", first, 0.0, low_inclusive=False)
        spder_variant = check_choice("network", "spder_variant", config["spder_variant"], ("sqrt", "arctan"))
        periodic = self.activation in PERIODIC
        input_map = config["input_map"] if config["input_map"] is not None else ("signed" if periodic else "none")
        self.input_map = check_choice("network", "input_map", input_map, ("signed", "none"))
        bias = check_bool("network", "bias", config["bias"])
        seed = check_int("network", "seed", config["seed"], 0)
        if not periodic and (config["first_omega_0"] is not None or config["omega_0"] != DEFAULTS["omega_0"]):
            raise config_error("network", f"'omega_0' and 'first_omega_0' apply to Sine and SPDER, not {self.activation}")
        if spder_variant != "sqrt" and self.activation != "SPDER":
            raise config_error("network", f"'spder_variant' applies to SPDER, not {self.activation}")

        widths = [self.n_input_dims] + [n_neurons] * n_hidden + [self.n_output_dims]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(widths[:-1], widths[1:]))
        self._hidden_fn = ACTIVATIONS[self.activation]
        if self.activation == "SPDER" and spder_variant == "arctan":
            self._hidden_fn = spder_arctan
        self._init(seeded_generator(seed), periodic)
        self.config = {
            "otype": otype, "n_neurons": n_neurons, "n_hidden_layers": n_hidden, "activation": self.activation,
            "output_activation": self.output_activation, "omega_0": self.omega_0,
            "first_omega_0": self.first_omega_0 if periodic else None, "spder_variant": spder_variant,
            "input_map": self.input_map, "bias": bias, "seed": seed,
        }

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
                layer.weight.copy_((torch.rand(layer.weight.shape, generator=generator) * 2 - 1) * bound)
                if layer.bias is not None:
                    bias_bound = 1 / math.sqrt(fan_in)
                    layer.bias.copy_((torch.rand(layer.bias.shape, generator=generator) * 2 - 1) * bias_bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., n_input_dims] -> [..., n_output_dims], in the dtype of the weights."""
        h = x.to(self.layers[0].weight.dtype)
        if self.input_map == "signed":
            h = h * 2 - 1
        periodic = self.activation in PERIODIC
        for i, layer in enumerate(self.layers[:-1]):
            z = layer(h)
            if periodic:
                z = z * (self.first_omega_0 if i == 0 else self.omega_0)
            h = self._hidden_fn(z)
        return ACTIVATIONS[self.output_activation](self.layers[-1](h))


__all__ = ["MLP", "spder", "spder_arctan"]
