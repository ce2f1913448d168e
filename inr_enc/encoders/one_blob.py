"""tiny-cuda-nn's OneBlob encoding (Müller et al. 2019, Neural Importance Sampling)."""

from __future__ import annotations

from typing import Any

import torch

from ..config.checks import check_int, config_error
from .base import Encoder
from .registry import register_encoder


def quartic_cdf(t: torch.Tensor, inv_radius: float) -> torch.Tensor:
    """CDF of tcnn's quartic kernel of radius 1/inv_radius: clamp(15/16 u (1 - 2/3 u^2 + 1/5 u^4) + 1/2, 0, 1)."""
    u = t * inv_radius
    u2 = u * u
    return torch.clamp(15.0 / 16.0 * u * (1 - 2.0 / 3.0 * u2 + 0.2 * u2 * u2) + 0.5, 0.0, 1.0)


def one_blob_encoding(x: torch.Tensor, n_bins: int) -> torch.Tensor:
    """x: [N, d] -> [N, d * n_bins], dim-major: the mass of a quartic blob centred at x (radius 1/n_bins)
    falling into each of n_bins equal bins of [0, 1]. The blob wraps around [0, 1] (copies at x - 1 and
    x + 1), as tcnn's kernels do, so each dim's outputs sum to 1 for x in [0, 1]. Values in [0, 1].
    """
    boundaries = torch.arange(n_bins + 1, dtype=x.dtype, device=x.device) / n_bins
    t = boundaries - x[:, :, None]  # [N, d, n_bins + 1]
    cdf = quartic_cdf(t, n_bins) + quartic_cdf(t - 1.0, n_bins) + quartic_cdf(t + 1.0, n_bins)
    return (cdf[..., 1:] - cdf[..., :-1]).reshape(x.shape[0], x.shape[1] * n_bins)


@register_encoder()
class OneBlob(Encoder):
    """``{"otype": "OneBlob", "n_bins": 16}`` (n_bins a power of two): x: [..., d] -> [..., n_bins * d] in [0, 1].

    Any finite x: the blob and its copies at x +- 1 (radius 1 / n_bins <= 1) miss [0, 1] for x outside
    [-2, 3], where every output is 0. x is clamped to [-3, 4] (``guard_input``, every backend): there each
    kernel CDF is already exactly 0 or 1, so the outputs are unchanged, and the quartic no longer overflows
    (a NaN gradient from x ~ 1e10, NaN outputs from ~1e30 in float32).
    """

    otype = "OneBlob"
    source = "Müller et al. 2019 (Neural Importance Sampling); tiny-cuda-nn include/tiny-cuda-nn/encodings/oneblob.h"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"n_bins": 16}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        n_bins = check_int(cls.otype, "n_bins", config["n_bins"], 1, 1 << 16)
        if n_bins & (n_bins - 1):
            raise config_error(cls.otype, f"'n_bins' must be a power of 2 (as in tcnn), got {n_bins}")
        return {"n_bins": n_bins}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims * config["n_bins"]

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        return x.clamp(-3.0, 4.0)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return one_blob_encoding(x, self._config["n_bins"])
