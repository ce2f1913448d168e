"""tiny-cuda-nn's Identity encoding: ``y = x * scale + offset``."""

from __future__ import annotations

from typing import Any

import torch

from .base import Encoder, check_float


class Identity(Encoder):
    """Passes coordinates through, optionally scaled and offset (tcnn keys ``scale`` = 1, ``offset`` = 0).

    x: [..., d] -> [..., d]; no range restriction.
    """

    otype = "Identity"
    tcnn_compatible = True
    defaults = {"scale": 1.0, "offset": 0.0}

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        self.scale = check_float(self.otype, "scale", config["scale"])
        self.offset = check_float(self.otype, "offset", config["offset"])
        self.n_output_dims = self.n_input_dims
        return {"scale": self.scale, "offset": self.offset}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.offset
