"""tiny-cuda-nn's FullyFusedMLP and CutlassMLP as tcnn computes them: no biases, inputs and outputs padded to
multiples of 16, tcnn's activations and its initialisation drawn from the same PCG32 stream, so that the weights
move both ways (inr_enc/field/tcnn_layout.py).

Facts from tcnn (src/fully_fused_mlp.cu, src/cutlass_mlp.cu, include/tiny-cuda-nn/network_with_input_encoding.h,
gpu_matrix.h at 6ee3546): weight matrices are row-major [rows = outputs, cols = inputs]: [n_neurons, padded input],
(n_hidden_layers - 1) x [n_neurons, n_neurons], [padded output, n_neurons] (one [padded output, padded input]
matrix when CutlassMLP has no hidden layer). Both align to 16 (CutlassMLP could use 8 but keeps 16 for checkpoint
compatibility). The encoding feeding the network writes its constant into the padded input dims (Encoder
``tcnn_pad_value``); padded outputs are computed and dropped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..config.checks import check_choice, check_int, check_seed, config_error
from ..encoders.base import Encoder, EncoderSpec
from ..ops.pcg32 import Pcg32
from .activations import TCNN_ACTIVATIONS
from .base import Network, in_row_blocks
from .mlp import MLP
from .registry import register_network

ALIGNMENT = 16  # FullyFusedMLP: 16x16x16 tensor ops; CutlassMLP: the same, for checkpoint compatibility
FULLY_FUSED_WIDTHS = (16, 32, 64, 128)
FULLY_FUSED_UNSUPPORTED = ("Sine", "SiLU")  # hidden activations fully_fused_mlp.cu throws on (CutlassMLP runs them)
INIT_BLOCK = 1 << 20  # PCG32 draws per block: each draw holds 2-4 uint64 states while it is computed
MLP_ONLY_KEYS = ("bias", "omega_0", "first_omega_0", "spder_variant", "input_map")


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def tcnn_input_columns(n_input_dims: int, encoder: EncoderSpec | None) -> list[float | None]:
    """The input tcnn's network reads: one entry per column, None where the encoder's next output dim goes, else
    the constant tcnn's encoding writes there. ``encoder`` None: a network on its own (tcnn's Network is one with
    an Identity encoding, which pads with 1)."""
    if encoder is None:
        return [None] * n_input_dims + [1.0] * (round_up(n_input_dims, ALIGNMENT) - n_input_dims)
    natural = len(encoder.cls.tcnn_columns(encoder))
    return encoder.cls.tcnn_columns(encoder,
                                    round_up(natural, math.lcm(ALIGNMENT, encoder.cls.tcnn_alignment(encoder.config))))


def matrix_shapes(n_input_columns: int, n_output_dims: int, config: dict[str, Any]) -> list[tuple[int, int]]:
    """[rows, cols] of each weight matrix in tcnn's order, padding included."""
    padded_out, width, hidden = round_up(n_output_dims, ALIGNMENT), config["n_neurons"], config["n_hidden_layers"]
    if hidden == 0:
        return [(padded_out, n_input_columns)]
    return [(width, n_input_columns)] + [(width, width)] * (hidden - 1) + [(padded_out, width)]


@register_network("CutlassMLP", "MegakernelMLP")
class TcnnMLP(Network):
    """``{"otype": "FullyFusedMLP" | "CutlassMLP", "n_neurons": 128, "n_hidden_layers": 5, "activation": "ReLU",
    "output_activation": "None"}``, tcnn's keys and defaults, plus ``seed`` (1337, as tcnn's torch modules).

    FullyFusedMLP takes 16, 32, 64 or 128 neurons, at least one hidden layer and no Sine or SiLU hidden layers;
    CutlassMLP any. Activations: tcnn's (None, ReLU, LeakyReLU, SiLU, Exponential, Sine, Sigmoid, Squareplus,
    Softplus, Tanh; where tcnn's float32 Softplus overflows to inf, past z = 8.8, this one gives z). Init: xavier
    uniform on the padded matrices (SIREN's for Sine: U(+-30/fan_in) first, U(+-sqrt(6/fan_in)) after), drawn
    from PCG32(seed) in tcnn's order: tcnn's own initial weights. Computed in the weights' dtype (tcnn: float16).
    A config naming a key of inr_enc's MLP (``bias``, ``omega_0``, ...) builds that MLP under this otype, as
    inr_enc before 0.2.0 did. x: [..., n_input_dims] -> [..., n_output_dims].
    """

    otype = "FullyFusedMLP"
    source = "tiny-cuda-nn src/fully_fused_mlp.cu, src/cutlass_mlp.cu"
    defaults: dict[str, Any] = {"otype": "FullyFusedMLP", "n_neurons": 128, "n_hidden_layers": 5,
                                "activation": "ReLU", "output_activation": "None", "seed": 1337}

    @classmethod
    def class_for(cls, config: dict[str, Any]) -> type[Network]:
        return MLP if any(key in config for key in MLP_ONLY_KEYS) else cls

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        otype = check_choice("network", "otype", config["otype"], ("FullyFusedMLP", "CutlassMLP", "MegakernelMLP"))
        otype = "FullyFusedMLP" if otype == "MegakernelMLP" else otype  # tcnn's other name for it
        n_neurons = check_int("network", "n_neurons", config["n_neurons"], 1)
        fully_fused = otype == "FullyFusedMLP"
        hidden = check_int("network", "n_hidden_layers", config["n_hidden_layers"], 1 if fully_fused else 0, 1024)
        if fully_fused and n_neurons not in FULLY_FUSED_WIDTHS:
            raise config_error("network", f"FullyFusedMLP takes 16, 32, 64 or 128 'n_neurons' (as tcnn), got "
                                          f"{n_neurons}; CutlassMLP takes any")
        activation = check_choice("network", "activation", config["activation"], TCNN_ACTIVATIONS)
        if fully_fused and activation in FULLY_FUSED_UNSUPPORTED:
            raise config_error("network", f"tcnn's FullyFusedMLP has no {activation} hidden activation; CutlassMLP has")
        return {"otype": otype, "n_neurons": n_neurons, "n_hidden_layers": hidden, "activation": activation,
                "output_activation": check_choice("network", "output_activation", config["output_activation"],
                                                  TCNN_ACTIVATIONS),
                "seed": check_seed("network", config["seed"])}

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None = None) -> int:
        """tcnn's ``n_params``: the padded matrices."""
        columns = len(tcnn_input_columns(n_input_dims, encoder))
        return sum(rows * cols for rows, cols in matrix_shapes(columns, n_output_dims, config))

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None = None) -> int:
        return config["n_neurons"] * config["n_hidden_layers"] + round_up(n_output_dims, ALIGNMENT)

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        columns = tcnn_input_columns(self.n_input_dims, None if encoder is None else encoder.spec)
        self.data_columns = [i for i, value in enumerate(columns) if value is None]
        self.pad_columns = [(i, value) for i, value in enumerate(columns) if value is not None and value != 0]
        shapes = matrix_shapes(len(columns), self.n_output_dims, config)
        self.layers = nn.ModuleList(nn.Linear(cols, rows, bias=False) for rows, cols in shapes)
        self.hidden_fn = TCNN_ACTIVATIONS[config["activation"]]
        self.output_fn = TCNN_ACTIVATIONS[config["output_activation"]]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """tcnn's initialize_params: one PCG32(seed) stream over the matrices in order, float32 arithmetic."""
        rng = Pcg32(self.config["seed"])
        sine = self.config["activation"] == "Sine"
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                fan_out, fan_in = layer.weight.shape
                if sine:
                    scale = (np.float32(30) / np.float32(fan_in) if i == 0
                             else np.sqrt(np.float32(6) / np.float32(fan_in)))
                else:
                    scale = np.sqrt(np.float32(6) / np.float32(fan_in + fan_out))
                flat = layer.weight.view(-1)
                for start in range(0, flat.numel(), INIT_BLOCK):  # the stream in blocks: bounded temporaries
                    values = rng.next_floats(min(INIT_BLOCK, flat.numel() - start)) * np.float32(2) * scale - scale
                    flat[start:start + len(values)] = torch.from_numpy(values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., n_input_dims] -> [..., n_output_dims] (large batches without autograd in blocks of rows)."""
        return in_row_blocks(self._layers, x)

    def _first_layer(self, h: torch.Tensor) -> torch.Tensor:
        """The first matrix on tcnn's padded input: its data columns on h, its padded columns' constants as a bias."""
        weight = self.layers[0].weight
        n = len(self.data_columns)
        reads = weight[:, :n] if self.data_columns[-1] == n - 1 else weight[:, self.data_columns]
        bias = None
        if self.pad_columns:
            index, values = zip(*self.pad_columns)
            bias = weight[:, list(index)] @ torch.tensor(values, dtype=weight.dtype, device=weight.device)
        return F.linear(h, reads, bias)

    def _layers(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(self.layers[0].weight.dtype)
        if len(self.layers) == 1:
            return self.output_fn(self._first_layer(h)[..., :self.n_output_dims])
        h = self.hidden_fn(self._first_layer(h))
        for layer in self.layers[1:-1]:
            h = self.hidden_fn(F.linear(h, layer.weight))
        return self.output_fn(F.linear(h, self.layers[-1].weight[:self.n_output_dims]))
