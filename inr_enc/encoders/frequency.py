"""tiny-cuda-nn's Frequency encoding (NeRF's positional encoding with a factor pi)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_int
from ..ops.phase import reduce_period
from .base import Encoder
from .registry import register_encoder


def frequency_encoding(x: torch.Tensor, n_frequencies: int) -> torch.Tensor:
    """x: [N, d] -> [N, d * 2F] ordered as tcnn: output j encodes dim j // 2F at frequency
    2^((j // 2) mod F) * pi, sin for even j, cos (= sin with phase pi/2) for odd j. Values in [-1, 1].
    """
    # As tcnn's kernel: sin(x * 2^k * pi + phase), pi and pi/2 rounded to x's dtype (float32 like tcnn's PI()).
    powers = 2.0 ** torch.arange(n_frequencies, dtype=x.dtype, device=x.device)
    phase = torch.tensor([0.0, math.pi / 2], dtype=x.dtype, device=x.device)
    angles = (x[:, :, None] * powers)[..., None] * math.pi + phase  # [N, d, F, 2]
    return torch.sin(angles).reshape(x.shape[0], x.shape[1] * n_frequencies * 2)


@register_encoder()
class Frequency(Encoder):
    """``{"otype": "Frequency", "n_frequencies": 12}``: x: [..., d] -> [..., 2 * F * d] in [-1, 1].

    Any finite x: every output has period 2 in x, so x is read mod 2 (exact, ops/phase.py; x itself for
    |x| < 2), on every backend: finite outputs and derivatives, the formula's value for the float x.
    """

    otype = "Frequency"
    source = "Mildenhall et al. 2020 (NeRF); tiny-cuda-nn include/tiny-cuda-nn/encodings/frequency.h"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"n_frequencies": 12}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"n_frequencies": check_int(cls.otype, "n_frequencies", config["n_frequencies"], 1, 64)}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims * 2 * config["n_frequencies"]

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_frequencies"]

    def _build(self, config: dict[str, Any]) -> None:
        self.n_frequencies = config["n_frequencies"]

    def output_bands(self) -> torch.Tensor:
        """Output j is at frequency 2^((j // 2) mod F) pi."""
        return (torch.arange(self.n_output_dims) // 2) % self.n_frequencies

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        return reduce_period(x, 2.0)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return frequency_encoding(x, self.n_frequencies)
