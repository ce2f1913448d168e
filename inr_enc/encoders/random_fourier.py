"""Gaussian random Fourier features (Tancik et al. 2020, "Fourier Features Let Networks Learn High
Frequency Functions in Low Dimensional Domains")."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_float, check_int, check_seed
from ..ops.phase import max_row_l1, saturate
from .base import Encoder, seeded_generator
from .registry import register_encoder

MAX_SIGMA = 1e5  # cycles per unit; 2 pi x B in float32 has no phase left to speak of far beyond it


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """x: [N, d], frequencies B: [M, d] -> [cos(2 pi x B^T), sin(2 pi x B^T)]: [N, 2M] in [-1, 1].

    Finite for every finite x: x saturates at +-P / (2 pi max_j ||B_j||_1) (at most P; ops/phase.py ``saturate``,
    P = 2^64 in float32, 2^512 in float64), so no phase overflows (no inf - inf in the product); inputs below it,
    every ordinary one, are encoded unchanged."""
    frequencies = frequencies.to(x.dtype)
    x = saturate(x, 2 * math.pi * max_row_l1(frequencies))
    projected = 2 * math.pi * (x @ frequencies.T)
    return torch.cat([torch.cos(projected), torch.sin(projected)], dim=-1)


@register_encoder()
class RandomFourier(Encoder):
    """``{"otype": "RandomFourier", "n_features": 256, "sigma": 10.0, "seed": 1337}``.

    B ~ N(0, sigma^2) of shape [n_features, d], drawn once from ``seed`` and kept as the buffer
    ``frequencies`` (saved in the state_dict; loading one drawn from another seed, sigma or size raises
    ValueError). x: [..., d], any finite values -> [..., 2 * n_features] in [-1, 1]; beyond +-P / (2 pi
    max_j ||B_j||_1) (P = 2^64 in float32, 2^512 in float64; about 10^12 for sigma = 10^5 in 3D) x saturates
    (``fourier_features``): outputs constant, gradient 0, where float32 phases had no precision left anyway.
    """

    otype = "RandomFourier"
    source = "Tancik et al. 2020 (Fourier Features Let Networks Learn High Frequency Functions)"
    defaults = {"n_features": 256, "sigma": 10.0, "seed": 1337}
    config_buffers = {"frequencies": ("n_features", "sigma", "seed")}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"n_features": check_int(cls.otype, "n_features", config["n_features"], 1),
                "sigma": check_float(cls.otype, "sigma", config["sigma"], 0.0, high=MAX_SIGMA),
                "seed": check_seed(cls.otype, config["seed"])}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return 2 * config["n_features"]

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_features"] * n_input_dims  # the buffer B

    def _build(self, config: dict[str, Any]) -> None:
        generator = seeded_generator(config["seed"])
        frequencies = torch.randn(config["n_features"], self.n_input_dims, generator=generator) * config["sigma"]
        self.register_buffer("frequencies", frequencies)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return fourier_features(x, self.frequencies)
