"""The network registry: ``otype`` -> constructor, and ``build_network``."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from ..encoders.base import Encoder, lookup_otype
from .mlp import MLP
from .patch_mlp import PatchMLP
from .pins import PINs

NetworkFactory = Callable[[int, int, dict[str, Any], Encoder], nn.Module]


def _mlp(n_input_dims: int, n_output_dims: int, config: dict[str, Any], encoder: Encoder) -> nn.Module:
    return MLP(n_input_dims, n_output_dims, config)


def _pins(n_input_dims: int, n_output_dims: int, config: dict[str, Any], encoder: Encoder) -> nn.Module:
    return PINs(n_input_dims, n_output_dims, config, encoder.output_bands())


def _patch_mlp(n_input_dims: int, n_output_dims: int, config: dict[str, Any], encoder: Encoder) -> nn.Module:
    network = PatchMLP(n_input_dims, n_output_dims, config)
    if len(network.patches) != encoder.n_input_dims:
        raise ValueError(f"network: 'patches' needs one count per coordinate dim ({encoder.n_input_dims}), got {network.patches}")
    return network


NETWORKS: dict[str, NetworkFactory] = {
    "MLP": _mlp, "FullyFusedMLP": _mlp, "CutlassMLP": _mlp, "PINs": _pins, "PatchMLP": _patch_mlp,
}


def build_network(n_output_dims: int, config: dict[str, Any] | None, encoder: Encoder) -> nn.Module:
    """The network named by ``config["otype"]`` (default "MLP", case-insensitive) reading ``encoder``'s output."""
    config = dict(config or {})
    factory = lookup_otype("network", config.get("otype", "MLP"), NETWORKS)
    return factory(encoder.n_output_dims, n_output_dims, config, encoder)
