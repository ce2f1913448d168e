"""tiny-cuda-nn's TriangleWave encoding (Müller et al. 2021, Neural Radiance Caching)."""

from __future__ import annotations

from typing import Any

import torch

from ..config.checks import check_int
from ..ops.phase import reduce_period
from .base import Encoder
from .registry import register_encoder


def triangle_wave_encoding(x: torch.Tensor, n_frequencies: int) -> torch.Tensor:
    """x: [N, d] -> [N, d * F], dim-major. For k = 0..F-1: v = x * 2^(k-1) + k/4 and
    out = 4 * |v - floor(v) - 0.5| - 1, a triangle wave in [-1, 1] (tcnn triangle_wave.h).
    """
    k = torch.arange(n_frequencies, dtype=x.dtype, device=x.device)
    v = x[:, :, None] * 2.0 ** (k - 1) + k * 0.25
    return ((v - torch.floor(v) - 0.5).abs() * 4 - 1).reshape(x.shape[0], x.shape[1] * n_frequencies)


@register_encoder()
class TriangleWave(Encoder):
    """``{"otype": "TriangleWave", "n_frequencies": 12}``: x: [..., d] -> [..., F * d] in [-1, 1].

    Any finite x: output k has period 2^(1-k) (k >= 0), so x is read mod 2 (exact, ops/phase.py; x itself for
    |x| < 2), on every backend: finite outputs and derivatives, the formula's value for the float x.
    """

    otype = "TriangleWave"
    source = "Müller et al. 2021 (Neural Radiance Caching); tiny-cuda-nn include/tiny-cuda-nn/encodings/triangle_wave.h"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"n_frequencies": 12}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"n_frequencies": check_int(cls.otype, "n_frequencies", config["n_frequencies"], 1, 64)}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims * config["n_frequencies"]

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_frequencies"]

    def _build(self, config: dict[str, Any]) -> None:
        self.n_frequencies = config["n_frequencies"]

    def output_bands(self) -> torch.Tensor:
        """Output j (dim-major) has period 2^(1 - j mod F)."""
        return torch.arange(self.n_output_dims) % self.n_frequencies

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        return reduce_period(x, 2.0)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return triangle_wave_encoding(x, self.n_frequencies)
