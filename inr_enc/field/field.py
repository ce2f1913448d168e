"""A field: an encoder followed by a network, built from one config like tiny-cuda-nn's
NetworkWithInputEncoding: ``{"encoding": {...}, "network": {...}}``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..config.memory import check_memory
from .schema import FieldSpec, field_spec


class Field(nn.Module):
    """x: [..., n_input_dims] coordinates in [0, 1] -> [..., n_output_dims].

    ``config``: ``{"encoding": ..., "network": ...}``; the encoding defaults to Identity (no encoding), the network
    to tcnn's MLP defaults. The whole config is checked (field/schema.py ``field_spec``), and its parameters
    against the memory limit, before anything is built; a ``FieldSpec`` (resolved already) is built as it is.
    ``field.config`` is the resolved config of both parts. ``backend`` is the encoder's: "auto" runs it through
    tiny-cuda-nn on CUDA when tinycudann is installed, inr_enc's own kernels where they run, torch otherwise, on the
    same parameters.
    """

    def __init__(self, n_input_dims: int, n_output_dims: int, config: dict[str, Any] | FieldSpec,
                 backend: str = "auto") -> None:
        super().__init__()
        spec = config if isinstance(config, FieldSpec) else field_spec(config, n_input_dims, n_output_dims)
        if (spec.encoding.n_input_dims, spec.n_output_dims) != (n_input_dims, n_output_dims):
            raise ValueError(f"field: a spec of {spec.encoding.n_input_dims} -> {spec.n_output_dims} dims built for "
                             f"{n_input_dims} -> {n_output_dims}")
        check_memory("field: encoding and network parameters", 4 * spec.parameter_count())
        encoding = spec.encoding
        self.encoder = encoding.cls(n_input_dims, encoding.config, backend, resolved=True)
        self.network = spec.network_cls(encoding.n_output_dims, n_output_dims, spec.network, self.encoder,
                                        resolved=True)
        self.n_input_dims, self.n_output_dims = n_input_dims, n_output_dims

    @property
    def config(self) -> dict[str, Any]:
        return {"encoding": self.encoder.config, "network": dict(self.network.config)}

    @property
    def n_levels(self) -> int | None:
        """Levels of detail of a multi-level network (PINs), else None."""
        return self.network.n_levels if self.network.has_levels else None

    def matrix_parameters(self) -> list[nn.Parameter]:
        """The weight matrices of the network's nn.Linear layers (tcnn's "matrix params", which its Adam's l2_reg
        applies to)."""
        return [m.weight for m in self.network.modules() if isinstance(m, nn.Linear)]

    def forward(self, x: torch.Tensor, level: int | None = None) -> torch.Tensor:
        """x: [..., n_input_dims] -> [..., n_output_dims]; ``level`` picks a level of detail (PINs networks)."""
        if level is not None and not self.network.has_levels:
            raise ValueError(f"level={level}: this field's network has no levels of detail")
        features = self.encoder(x)
        if self.network.reads_coordinates:  # PatchMLP routes samples by position
            return self.network(features, x)
        return self.network(features) if level is None else self.network(features, level=level)


def build_field(n_input_dims: int, n_output_dims: int, config: dict[str, Any]) -> Field:
    """``Field(n_input_dims, n_output_dims, config)``."""
    return Field(n_input_dims, n_output_dims, config)
