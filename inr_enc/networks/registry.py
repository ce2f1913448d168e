"""The network registry: otype -> class (filled by ``@register_network`` where each network is defined), and
``build_network``."""

from __future__ import annotations

from typing import Any

from ..config.checks import INHERITED, Registry, check_mapping
from ..encoders.base import Encoder, EncoderSpec
from .base import Network

NETWORKS = Registry("network")
register_network = NETWORKS.register
DEFAULT_OTYPE = "MLP"


def network_class(config: Any) -> type[Network]:
    """The class a network config names (``otype``, default MLP; case-insensitive); ValueError listing the valid
    ones."""
    config = check_mapping("network", "network", config) or {}
    own = {k: v for k, v in config.items() if k not in config.get(INHERITED, ())}  # a parent's keys pick no class
    return NETWORKS.lookup(config.get("otype", DEFAULT_OTYPE)).class_for(own)


def resolve_network(config: Any, n_output_dims: int, encoder: EncoderSpec) -> dict[str, Any]:
    """The canonical network config reading ``encoder``'s output, without building anything; ValueError naming the
    problem."""
    config = check_mapping("network", "network", config)
    return network_class(config).resolve_config(config, encoder.n_output_dims, n_output_dims, encoder)


def build_network(n_output_dims: int, config: dict[str, Any] | None, encoder: Encoder) -> Network:
    """The network named by ``config["otype"]`` (default "MLP", case-insensitive) reading ``encoder``'s output."""
    config = check_mapping("network", "network", config)
    return network_class(config)(encoder.n_output_dims, n_output_dims, config, encoder)
