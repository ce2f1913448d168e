"""Weights in tiny-cuda-nn's layout, both ways: the flat ``params`` of tcnn's Encoding, Network and
NetworkWithInputEncoding (its torch modules' ``params``; docs/interop.md).

- Encoding: a grid's table, level after level, ``n_features_per_level`` floats per entry (tcnn's grid.h; inr_enc's
  ``Grid.params`` is that table); a Composite's nested encodings' params one after another; no params otherwise.
- Network (FullyFusedMLP, CutlassMLP = ``TcnnMLP``): the weight matrices in order, each row-major [outputs,
  inputs], padded (networks/tcnn_mlp.py).
- NetworkWithInputEncoding (``Field``): the network's params, then the encoding's
  (network_with_input_encoding.h ``set_params_impl``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..encoders import Composite, Encoder
from ..encoders.grid import Grid
from ..networks import Network, TcnnMLP
from .field import Field


def tcnn_parameters(module: Encoder | Network | Field) -> list[nn.Parameter]:
    """The parameters holding ``module``'s tcnn ``params``, in tcnn's order (each flattened row-major); ValueError
    for a module tcnn has no layout for."""
    if isinstance(module, Field):
        return tcnn_parameters(module.network) + tcnn_parameters(module.encoder)
    if isinstance(module, TcnnMLP):
        return [layer.weight for layer in module.layers]
    if isinstance(module, Network):
        hint = "; tcnn's networks are otype FullyFusedMLP or CutlassMLP" if module.otype == "MLP" else ""
        raise ValueError(f"tcnn has no layout for a {module.otype} network{hint}")
    if isinstance(module, Grid) and module.models == 1:
        return [module.params]
    if isinstance(module, Composite):
        return [p for encoder in module.encoders for p in tcnn_parameters(encoder)]
    if isinstance(module, Encoder) and module.tcnn_config() is not None and not list(module.parameters()):
        return []
    raise ValueError(f"tcnn has no layout for a {type(module).__name__} encoding")


def tcnn_n_params(module: Encoder | Network | Field) -> int:
    """tcnn's ``n_params()`` for the same config: padded matrices and grid tables."""
    return sum(p.numel() for p in tcnn_parameters(module))


def tcnn_params(module: Encoder | Network | Field) -> torch.Tensor:
    """[tcnn_n_params] float32, a copy: what tcnn's module's ``params`` holds for these weights."""
    parts = [p.detach().reshape(-1).float().cpu() for p in tcnn_parameters(module)]
    return torch.cat(parts) if parts else torch.zeros(0)


def load_tcnn_params(module: Encoder | Network | Field, params: Any) -> None:
    """Copies tcnn's flat ``params`` (a tensor or array of tcnn_n_params values, e.g. a tcnn module's
    ``params``) into ``module``'s parameters, in their dtype and device; ValueError for another size or shape."""
    targets = tcnn_parameters(module)
    flat = torch.as_tensor(params).detach()
    expected = sum(p.numel() for p in targets)
    if flat.dim() != 1 or flat.numel() != expected or not flat.is_floating_point():
        raise ValueError(f"tcnn params: expected a flat float array of {expected} values (tcnn's n_params for this "
                         f"config), got {flat.dtype} of shape {tuple(flat.shape)}")
    with torch.no_grad():
        for target, part in zip(targets, flat.split([p.numel() for p in targets])):
            target.copy_(part.reshape(target.shape))
