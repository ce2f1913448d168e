"""Gaussian random Fourier features (Tancik et al. 2020, "Fourier Features Let Networks Learn High
Frequency Functions in Low Dimensional Domains")."""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import Encoder, check_float, check_int, seeded_generator


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """x: [N, d], frequencies B: [M, d] -> [cos(2 pi x B^T), sin(2 pi x B^T)]: [N, 2M] in [-1, 1]."""
    projected = 2 * math.pi * (x @ frequencies.to(x.dtype).T)
    return torch.cat([torch.cos(projected), torch.sin(projected)], dim=-1)


class RandomFourier(Encoder):
    """``{"otype": "RandomFourier", "n_features": 256, "sigma": 10.0, "seed": 1337}``.

    B ~ N(0, sigma^2) of shape [n_features, d], drawn once from ``seed`` and kept as the buffer
    ``frequencies`` (saved in the state_dict). x: [..., d] -> [..., 2 * n_features] in [-1, 1].
    """

    otype = "RandomFourier"
    defaults = {"n_features": 256, "sigma": 10.0, "seed": 1337}

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        n_features = check_int(self.otype, "n_features", config["n_features"], 1)
        sigma = check_float(self.otype, "sigma", config["sigma"], 0.0)
        seed = check_int(self.otype, "seed", config["seed"], 0)
        frequencies = torch.randn(n_features, self.n_input_dims, generator=seeded_generator(seed)) * sigma
        self.register_buffer("frequencies", frequencies)
        self.n_output_dims = 2 * n_features
        return {"n_features": n_features, "sigma": sigma, "seed": seed}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return fourier_features(x, self.frequencies)
