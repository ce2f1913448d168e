"""inr_enc: coordinate encoders for implicit neural representations and NeRF.

    >>> import torch, inr_enc
    >>> enc = inr_enc.build_encoder({"otype": "HashGrid", "n_levels": 16}, n_input_dims=3)
    >>> enc(torch.rand(8, 3)).shape
    torch.Size([8, 32])
"""

from .backends import tcnn_available
from .config import available_configs, load_config
from .encoders import ENCODERS, Encoder, build_encoder

__all__ = ["ENCODERS", "Encoder", "available_configs", "build_encoder", "load_config", "tcnn_available"]
__version__ = "0.1.0"
