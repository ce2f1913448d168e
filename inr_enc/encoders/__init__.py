"""Coordinate encoders: ``build_encoder(config, n_input_dims)`` and the classes behind each otype.

Every module of this package is imported here, so an encoding registers itself (``@register_encoder``) by being a
file in this folder.
"""

import importlib
import pkgutil

from .base import Encoder
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
from .registry import ENCODERS, EncoderSpec, build_encoder, encoder_class, encoder_spec, register_encoder
from .shifted_basis import ShiftedBasis
from .spherical_harmonics import SphericalHarmonics
from .triangle_wave import TriangleWave

for _module in pkgutil.iter_modules(__path__):  # encodings added as a new file register on import
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "ENCODERS", "Composite", "DenseGrid", "Encoder", "EncoderSpec", "Frequency", "Grid", "HashGrid", "Hybrid",
    "Identity", "LatentGrid", "LearnableFourier", "NeRF", "OneBlob", "Progressive", "RandomFourier", "ShiftedBasis",
    "SphericalHarmonics", "TiledGrid", "TriangleWave", "build_encoder", "encoder_class", "encoder_spec",
    "register_encoder",
]
