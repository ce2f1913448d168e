"""Learnable Fourier features (Li et al. 2021, "Learnable Fourier Features for Multi-Dimensional
Spatial Positional Encoding", NeurIPS)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..config.checks import check_float, check_int, check_seed, config_error
from .base import Encoder, seeded_generator
from .random_fourier import MAX_SIGMA, fourier_features
from .registry import register_encoder


def _uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator) -> nn.Parameter:
    return nn.Parameter((torch.rand(shape, generator=generator) * 2 - 1) * bound)


@register_encoder()
class LearnableFourier(Encoder):
    """``{"otype": "LearnableFourier", "n_features": 128, "sigma": 10.0, "n_hidden": 32,
    "n_output": 64, "seed": 1337}``.

    r(x) = [cos(2 pi x W^T), sin(2 pi x W^T)] / sqrt(n_features) with a trainable W: [n_features/2, d],
    then PE(x) = GeLU(r W1 + b1) W2 + b2 (Li et al., eq. 2-3). Li et al. draw W ~ N(0, gamma^-2) and write
    cos(x W^T); we write W in cycles per unit like RandomFourier, so sigma = 1 / (2 pi gamma).
    The MLP uses torch.nn.Linear's default init, drawn from ``seed``.
    x: [..., d], any finite values -> [..., n_output], finite, unbounded; x saturates as in RandomFourier
    (``fourier_features``: beyond +-P / (2 pi max_j ||W_j||_1), with the current W) so no phase overflows.
    """

    otype = "LearnableFourier"
    source = "Li et al. 2021 (Learnable Fourier Features for Multi-Dimensional Spatial Positional Encoding)"
    defaults = {"n_features": 128, "sigma": 10.0, "n_hidden": 32, "n_output": 64, "seed": 1337}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        n_features = check_int(cls.otype, "n_features", config["n_features"], 2)
        if n_features % 2:
            raise config_error(cls.otype, f"'n_features' (cos and sin halves) must be even, got {n_features}")
        return {"n_features": n_features,
                "sigma": check_float(cls.otype, "sigma", config["sigma"], 0.0, high=MAX_SIGMA),
                "n_hidden": check_int(cls.otype, "n_hidden", config["n_hidden"], 1),
                "n_output": check_int(cls.otype, "n_output", config["n_output"], 1),
                "seed": check_seed(cls.otype, config["seed"])}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_output"]

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        n_features, n_hidden, n_output = config["n_features"], config["n_hidden"], config["n_output"]
        return n_features // 2 * n_input_dims + (n_features + 1) * n_hidden + (n_hidden + 1) * n_output

    def _build(self, config: dict[str, Any]) -> None:
        n_features, sigma, n_hidden, n_output = (config[k] for k in ("n_features", "sigma", "n_hidden", "n_output"))
        gen = seeded_generator(config["seed"])
        self.frequencies = nn.Parameter(torch.randn(n_features // 2, self.n_input_dims, generator=gen) * sigma)
        self.feature_scale = 1.0 / math.sqrt(n_features)
        self.hidden_weight = _uniform((n_hidden, n_features), 1 / math.sqrt(n_features), gen)
        self.hidden_bias = _uniform((n_hidden,), 1 / math.sqrt(n_features), gen)
        self.output_weight = _uniform((n_output, n_hidden), 1 / math.sqrt(n_hidden), gen)
        self.output_bias = _uniform((n_output,), 1 / math.sqrt(n_hidden), gen)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        dtype = x.dtype
        r = fourier_features(x, self.frequencies) * self.feature_scale
        h = nn.functional.gelu(nn.functional.linear(r, self.hidden_weight.to(dtype), self.hidden_bias.to(dtype)))
        return nn.functional.linear(h, self.output_weight.to(dtype), self.output_bias.to(dtype))
