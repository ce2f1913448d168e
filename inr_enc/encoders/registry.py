"""The encoding registry: otype -> class (filled by ``@register_encoder`` where each encoding is defined), and
``build_encoder``."""

from __future__ import annotations

from typing import Any

from ..config.checks import Registry, check_mapping
from .base import Encoder, EncoderSpec

ENCODERS = Registry("encoding")
register_encoder = ENCODERS.register


def encoder_class(otype: Any) -> type[Encoder]:
    """The class registered for ``otype``, matched case-insensitively as tcnn does; ValueError listing the valid
    ones."""
    return ENCODERS.lookup(otype)


def encoder_spec(config: Any, n_input_dims: int) -> EncoderSpec:
    """Resolve an encoding config for ``n_input_dims`` inputs without building it (no tensors); ValueError naming
    the problem."""
    config = check_mapping("encoding", "encoding", config, allow_none=False)
    cls = encoder_class(config.get("otype"))
    return cls.spec_of(cls.resolve_config(config, n_input_dims), n_input_dims)


def build_encoder(config: dict[str, Any], n_input_dims: int, backend: str = "auto") -> Encoder:
    """Build the encoder named by ``config["otype"]`` (case-insensitive, as in tcnn) for ``n_input_dims`` inputs.

    Raises ValueError for a missing or unknown otype (listing the valid ones), an unknown key (listing the valid
    keys) or an out-of-range value. ``backend``: "auto" | "torch" | "cpp" | "triton" | "tcnn" (backends.py).
    """
    if not isinstance(config, dict):
        raise ValueError(f"encoding config must be a dict, got {type(config).__name__}")
    return encoder_class(config.get("otype"))(n_input_dims, config, backend)
