"""tiny-cuda-nn's Identity encoding: ``y = x * scale + offset``."""

from __future__ import annotations

from typing import Any

import torch

from ..config.checks import check_float
from .base import Encoder
from .registry import register_encoder


@register_encoder()
class Identity(Encoder):
    """Passes coordinates through, optionally scaled and offset (tcnn keys ``scale`` = 1, ``offset`` = 0).

    x: [..., d] -> [..., d]; no range restriction.
    """

    otype = "Identity"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"scale": 1.0, "offset": 0.0}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"scale": check_float(cls.otype, "scale", config["scale"]),
                "offset": check_float(cls.otype, "offset", config["offset"])}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return x * self._config["scale"] + self._config["offset"]
