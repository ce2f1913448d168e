"""Networks that read encoded coordinates: ``MLP`` (ReLU, Sine/SIREN, SPDER, ...), ``TcnnMLP`` (tcnn's
FullyFusedMLP and CutlassMLP), ``PINs``, ``PatchMLP``, ``Separable``; ``build_network``.

Every module of this package is imported here, so a network registers itself (``@register_network``) by being a
file in this folder.
"""

import importlib
import pkgutil

from .activations import ACTIVATIONS, spder, spder_arctan
from .base import Network
from .mlp import MLP
from .patch_mlp import PatchMLP
from .pins import PINs
from .registry import NETWORKS, build_network, network_class, register_network, resolve_network
from .separable import Separable
from .tcnn_mlp import TcnnMLP

for _module in pkgutil.iter_modules(__path__):  # networks added as a new file register on import
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ACTIVATIONS", "MLP", "NETWORKS", "Network", "PINs", "PatchMLP", "Separable", "TcnnMLP", "build_network",
           "network_class", "register_network", "resolve_network", "spder", "spder_arctan"]
