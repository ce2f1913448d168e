"""tiny-cuda-nn's Identity encoding: ``y = x * scale + offset``."""

from __future__ import annotations

from typing import Any

import torch

from ..config.checks import check_float
from .base import Encoder
from .registry import register_encoder

MAX_MAGNITUDE = 1e6  # scale and offset: float32 coordinates keep 1e-7 of their range; far beyond, nothing is sane


@register_encoder()
class Identity(Encoder):
    """Passes coordinates through, optionally scaled and offset (tcnn keys ``scale`` = 1, ``offset`` = 0).

    x: [..., d] -> [..., d]. Every finite x whose x * scale + offset is finite in the compute dtype, i.e.
    |x| <= about (largest float - |offset|) / |scale| (every finite x when |scale| <= 1); beyond it the true
    output is not representable, and forward raises ValueError naming the range (``guard_input``: one host
    sync per forward, only for configs that can overflow).
    """

    otype = "Identity"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/identity.h"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"scale": 1.0, "offset": 0.0}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"scale": check_float(cls.otype, "scale", config["scale"], -MAX_MAGNITUDE, high=MAX_MAGNITUDE),
                "offset": check_float(cls.otype, "offset", config["offset"], -MAX_MAGNITUDE, high=MAX_MAGNITUDE)}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return n_input_dims

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        scale, offset = self._config["scale"], self._config["offset"]
        if abs(scale) <= 1 and abs(offset) <= 1e30:  # cannot overflow: 1e30 < half a float32 ulp at its largest value
            return x
        if not bool(torch.isfinite(x * scale + offset).all()):
            bound = (torch.finfo(x.dtype).max - abs(offset)) / abs(scale)
            raise ValueError(f"{self.otype}: x * scale + offset overflows {x.dtype} (scale {scale:g}, offset "
                             f"{offset:g}); inputs must have |x| <= about {bound:.6g}")
        return x

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return x * self._config["scale"] + self._config["offset"]
