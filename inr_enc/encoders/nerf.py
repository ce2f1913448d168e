"""NeRF positional encoding (Mildenhall et al. 2020) with an explicit frequency scale."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_bool, check_choice, check_int
from ..ops.phase import reduce_period, saturate
from .base import Encoder
from .registry import register_encoder

# The factor in front of 2^k: tcnn's Frequency uses pi, nerfstudio's torch NeRFEncoding and Tancik et al.
# use 2 pi, the original NeRF code (get_embedder) uses 1.
SCALES = {"pi": math.pi, "2pi": 2 * math.pi, "1": 1.0}


def nerf_encoding(x: torch.Tensor, n_frequencies: int, scale: float, include_input: bool) -> torch.Tensor:
    """x: [N, d] -> [N, (include_input + 2F) * d] ordered like the original NeRF embedder:
    [x (if include_input), sin(s 2^0 x), cos(s 2^0 x), sin(s 2^1 x), cos(s 2^1 x), ...], each block d wide.

    Finite for every finite x (ops/phase.py): with s = pi or 2 pi every sin/cos has period 2 in x, so the phases
    read x mod 2 (exact; x itself for |x| < 2); with s = 1 (no exact period) x saturates at +-P / 2^(F-1)
    (P = 2^64 in float32, 2^512 in float64: at least 2), past which phases have no precision anyway.
    """
    freqs = scale * 2.0 ** torch.arange(n_frequencies, dtype=x.dtype, device=x.device)
    periodic = scale != 1.0  # pi, 2 pi: period 2
    phase_x = reduce_period(x, 2.0) if periodic else saturate(x, 2.0 ** (n_frequencies - 1))
    angles = phase_x[:, None, :] * freqs[:, None]  # [N, F, d]
    encoded = torch.stack([torch.sin(angles), torch.cos(angles)], dim=2).reshape(x.shape[0],
                                                                                 2 * n_frequencies * x.shape[1])
    return torch.cat([x, encoded], dim=-1) if include_input else encoded


@register_encoder()
class NeRF(Encoder):
    """``{"otype": "NeRF", "n_frequencies": 10, "scale": "pi" | "2pi" | "1", "include_input": true}``.

    x: [..., d] (used as given, no remapping) -> [..., (include_input + 2F) * d]; sin/cos values in [-1, 1].
    Any finite x: scales "pi" and "2pi" read x mod 2 in the phases (exact), scale "1" saturates it beyond
    +-P / 2^(F-1) (``nerf_encoding``); the raw input block is x itself.
    """

    otype = "NeRF"
    source = "Mildenhall et al. 2020 (NeRF positional encoding)"
    defaults = {"n_frequencies": 10, "scale": "2pi", "include_input": True}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"n_frequencies": check_int(cls.otype, "n_frequencies", config["n_frequencies"], 1, 64),
                "scale": check_choice(cls.otype, "scale", str(config["scale"]), SCALES),
                "include_input": check_bool(cls.otype, "include_input", config["include_input"])}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims * (2 * config["n_frequencies"] + int(config["include_input"]))

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_frequencies"]

    @classmethod
    def always_on_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims if config["include_input"] else 0

    def _build(self, config: dict[str, Any]) -> None:
        self.n_frequencies, self.scale = config["n_frequencies"], SCALES[config["scale"]]
        self.include_input = config["include_input"]

    def output_bands(self) -> torch.Tensor:
        """The raw input (if included) is always on; then sin and cos blocks, d wide, per frequency."""
        d = self.n_input_dims
        bands = torch.arange(2 * self.n_frequencies * d) // (2 * d)
        return torch.cat([torch.full((d,), -1), bands]) if self.include_input else bands

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return nerf_encoding(x, self.n_frequencies, self.scale, self.include_input)
