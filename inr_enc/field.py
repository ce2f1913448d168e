"""A field: an encoder followed by a network, built from one config like tiny-cuda-nn's
NetworkWithInputEncoding: ``{"encoding": {...}, "network": {...}}``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .encoders import build_encoder
from .encoders.base import check_keys
from .networks import build_network
from .separable import NAME as SEPARABLE
from .separable import SeparableField

FIELD_KEYS = ("encoding", "network")


class Field(nn.Module):
    """x: [..., n_input_dims] coordinates in [0, 1] -> [..., n_output_dims].

    ``config["encoding"]`` defaults to Identity (no encoding), ``config["network"]`` to tcnn's MLP defaults.
    ``field.config`` is the resolved config of both parts. ``backend`` is the encoder's: "auto" runs it through
    tiny-cuda-nn on CUDA when tinycudann is installed, torch otherwise, on the same parameters.
    """

    def __init__(self, n_input_dims: int, n_output_dims: int, config: dict[str, Any], backend: str = "auto") -> None:
        super().__init__()
        if not isinstance(config, dict):
            raise ValueError(f"field config must be a dict with keys {', '.join(FIELD_KEYS)}, got {type(config).__name__}")
        check_keys("field", config, FIELD_KEYS)
        self.encoder = build_encoder(config.get("encoding") or {"otype": "Identity"}, n_input_dims, backend)
        self.network = build_network(n_output_dims, config.get("network"), self.encoder)
        self.n_input_dims, self.n_output_dims = n_input_dims, n_output_dims

    @property
    def config(self) -> dict[str, Any]:
        return {"encoding": self.encoder.config, "network": dict(self.network.config)}

    @property
    def n_levels(self) -> int | None:
        """Levels of detail of a multi-level network (PINs), else None."""
        return getattr(self.network, "n_levels", None)

    def forward(self, x: torch.Tensor, level: int | None = None) -> torch.Tensor:
        """x: [..., n_input_dims] -> [..., n_output_dims]; ``level`` picks a level of detail (PINs networks)."""
        if level is not None and self.n_levels is None:
            raise ValueError(f"level={level}: this field's network has no levels of detail")
        if getattr(self.network, "reads_coordinates", False):  # PatchMLP routes samples by position
            return self.network(self.encoder(x), x)
        if level is None:
            return self.network(self.encoder(x))
        return self.network(self.encoder(x), level=level)


def is_separable(network: dict[str, Any] | None) -> bool:
    return str((network or {}).get("otype", "")).lower() == SEPARABLE.lower()


def build_field(n_input_dims: int, n_output_dims: int, config: dict[str, Any]) -> nn.Module:
    """A Field, or for ``network.otype: Separable`` the separable linear model of 2D grids (separable.py)."""
    if is_separable(config.get("network")):
        check_keys("network", config["network"], ("otype",))
        if n_input_dims != 2:
            raise ValueError(f"network otype {SEPARABLE} fits 2D signals (images) only, not {n_input_dims}D")
        return SeparableField(n_output_dims, config.get("encoding"))
    return Field(n_input_dims, n_output_dims, config)
