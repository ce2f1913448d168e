"""Gaussian random Fourier features (Tancik et al. 2020, "Fourier Features Let Networks Learn High
Frequency Functions in Low Dimensional Domains")."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_float, check_int
from .base import Encoder, seeded_generator
from .registry import register_encoder


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """x: [N, d], frequencies B: [M, d] -> [cos(2 pi x B^T), sin(2 pi x B^T)]: [N, 2M] in [-1, 1]."""
    projected = 2 * math.pi * (x @ frequencies.to(x.dtype).T)
    return torch.cat([torch.cos(projected), torch.sin(projected)], dim=-1)


@register_encoder()
class RandomFourier(Encoder):
    """``{"otype": "RandomFourier", "n_features": 256, "sigma": 10.0, "seed": 1337}``.

    B ~ N(0, sigma^2) of shape [n_features, d], drawn once from ``seed`` and kept as the buffer
    ``frequencies`` (saved in the state_dict). x: [..., d] -> [..., 2 * n_features] in [-1, 1].
    """

    otype = "RandomFourier"
    defaults = {"n_features": 256, "sigma": 10.0, "seed": 1337}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"n_features": check_int(cls.otype, "n_features", config["n_features"], 1),
                "sigma": check_float(cls.otype, "sigma", config["sigma"], 0.0),
                "seed": check_int(cls.otype, "seed", config["seed"], 0)}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return 2 * config["n_features"]

    def _build(self, config: dict[str, Any]) -> None:
        generator = seeded_generator(config["seed"])
        frequencies = torch.randn(config["n_features"], self.n_input_dims, generator=generator) * config["sigma"]
        self.register_buffer("frequencies", frequencies)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return fourier_features(x, self.frequencies)
