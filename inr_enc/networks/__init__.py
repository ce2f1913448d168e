"""Networks that read encoded coordinates: ``MLP`` (ReLU, Sine/SIREN, SPDER, ...), ``PINs``,
``PatchMLP``; ``build_network``."""

from .activations import ACTIVATIONS, spder, spder_arctan
from .mlp import MLP
from .patch_mlp import PatchMLP
from .pins import PINs
from .registry import NETWORKS, build_network

__all__ = ["ACTIVATIONS", "MLP", "NETWORKS", "PINs", "PatchMLP", "build_network", "spder", "spder_arctan"]
