"""Coordinate encoders: ``build_encoder(config, n_input_dims)`` and the classes behind each otype."""

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
from .registry import ENCODERS, build_encoder, encoder_class
from .shifted_basis import ShiftedBasis
from .spherical_harmonics import SphericalHarmonics
from .triangle_wave import TriangleWave

__all__ = [
    "ENCODERS", "Composite", "DenseGrid", "Encoder", "Frequency", "Grid", "HashGrid", "Hybrid", "Identity",
    "LatentGrid", "LearnableFourier", "NeRF", "OneBlob", "Progressive", "RandomFourier", "ShiftedBasis", "SphericalHarmonics", "TiledGrid",
    "TriangleWave", "build_encoder", "encoder_class",
]
