"""inr_enc: coordinate encoders for implicit neural representations and NeRF.

    >>> import torch, inr_enc
    >>> enc = inr_enc.build_encoder({"otype": "HashGrid", "n_levels": 16}, n_input_dims=3)
    >>> enc(torch.rand(8, 3)).shape
    torch.Size([8, 32])

Layers, each importing only those below it (docs/architecture.md): ``config`` (checks, files), ``ops`` (grid
operations, schedules), ``encoders``, ``networks``, ``optim``, ``field``, then the tasks ``fitting`` and ``nerf``,
then the ``cli`` and the ``nerfstudio`` plugin.
"""

from .config import available_configs, load_config
from .encoders import ENCODERS, Encoder, build_encoder
from .encoders.tcnn import tcnn_available
from .field import Field, build_field
from .networks import NETWORKS, Network, build_network

__all__ = ["ENCODERS", "NETWORKS", "Encoder", "Field", "Network", "available_configs", "build_encoder", "build_field",
           "build_network", "load_config", "tcnn_available"]
__version__ = "0.1.0"
