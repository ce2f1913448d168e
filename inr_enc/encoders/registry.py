"""The otype registry: one line per encoding, and ``build_encoder``."""

from __future__ import annotations

from typing import Any

from .base import Encoder, lookup_otype
from .composite import Composite
from .frequency import Frequency
from .grid import DenseGrid, Grid, HashGrid, TiledGrid
from .hybrid import Hybrid
from .identity import Identity
from .latent_grid import LatentGrid
from .learnable_fourier import LearnableFourier
from .nerf import NeRF
from .one_blob import OneBlob
from .progressive import Progressive
from .random_fourier import RandomFourier
from .shifted_basis import ShiftedBasis
from .spherical_harmonics import SphericalHarmonics
from .triangle_wave import TriangleWave

ENCODERS: dict[str, type[Encoder]] = {
    cls.otype: cls
    for cls in (
        Identity, Frequency, OneBlob, TriangleWave, SphericalHarmonics, Composite,
        Grid, HashGrid, DenseGrid, TiledGrid,
        NeRF, RandomFourier, LearnableFourier, Progressive, ShiftedBasis, Hybrid,
        LatentGrid,
    )
}


def encoder_class(otype: Any) -> type[Encoder]:
    """The class registered for ``otype``, matched case-insensitively as tcnn does; ValueError listing the valid ones."""
    return lookup_otype("encoding", otype, ENCODERS)


def build_encoder(config: dict[str, Any], n_input_dims: int, backend: str = "auto") -> Encoder:
    """Build the encoder named by ``config["otype"]`` (case-insensitive, as in tcnn) for ``n_input_dims`` inputs.

    Raises ValueError for a missing or unknown otype (listing the valid ones), an unknown key
    (listing the valid keys) or an out-of-range value. ``backend``: "auto" | "torch" | "tcnn" (tcnn_backend.py).
    """
    if not isinstance(config, dict):
        raise ValueError(f"encoding config must be a dict, got {type(config).__name__}")
    return encoder_class(config.get("otype"))(n_input_dims, config, backend)
