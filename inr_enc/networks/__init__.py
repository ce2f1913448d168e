"""Networks that read encoded coordinates: ``MLP`` (ReLU, Sine/SIREN, SPDER, ...)."""

from .activations import ACTIVATIONS, spder, spder_arctan
from .mlp import MLP

__all__ = ["ACTIVATIONS", "MLP", "spder", "spder_arctan"]
