"""Running an encoder through tiny-cuda-nn: same config, same ``params``, float32 output.

tcnn reads the encoder's own parameter tensor (grids keep tcnn's table layout), so gradients land in the
encoder's parameters and switching backends changes nothing but speed. tcnn computes in float32 here
(``dtype=torch.float32``); its default build has grids for 2 to 4 input dims with the CoherentPrime hash only.
``import tinycudann`` raises OSError (not ImportError) on a machine without a usable GPU, so both are caught.
"""

from __future__ import annotations

import functools
from types import ModuleType

import torch


@functools.lru_cache(maxsize=1)
def tinycudann() -> ModuleType | None:
    """The tinycudann module if it imports here, else None."""
    try:
        import tinycudann as tcnn
    except (ImportError, OSError):
        return None
    return tcnn


def tcnn_available() -> bool:
    return tinycudann() is not None


def tcnn_unavailable_reason(encoder: torch.nn.Module, x: torch.Tensor, cov: torch.Tensor | None = None) -> str | None:
    """Why tcnn cannot encode ``x: [N, d]`` (and ``cov``) with ``encoder`` here, or None when it can."""
    if encoder.tcnn_config() is None:
        return f"tiny-cuda-nn has no equivalent of this {encoder.otype} config"
    if cov is not None:
        return "tiny-cuda-nn takes no covariances"
    if not x.is_cuda:
        return f"tiny-cuda-nn runs on CUDA tensors only, got a {x.device.type} input"
    if x.dtype != torch.float32:
        return f"the tiny-cuda-nn backend takes float32 inputs, got {x.dtype}"
    if tinycudann() is None:
        return "tinycudann is not installed or does not import here"
    return None


def encoder_params(encoder: torch.nn.Module) -> torch.Tensor:
    """All of the encoder's parameters as one flat tensor in registration order (tcnn's order for Composite)."""
    params = [p.reshape(-1) for p in encoder.parameters()]
    if len(params) == 1:
        return params[0]
    return torch.cat(params) if params else torch.zeros(0)


def tcnn_encode(encoder: torch.nn.Module, x: torch.Tensor,
                modules: dict[torch.device, torch.nn.Module]) -> torch.Tensor:
    """x: [N, d] float32 on CUDA -> [N, n_output_dims] float32, computed by tcnn on the encoder's parameters.

    ``modules`` caches one tcnn module per device (kept out of the encoder's submodules and state_dict).
    """
    tcnn = tinycudann()
    module = modules.get(x.device)
    params = encoder_params(encoder).to(x.device, torch.float32)
    if module is None:
        with torch.cuda.device(x.device):
            module = tcnn.Encoding(encoder.n_input_dims, encoder.tcnn_config(), dtype=torch.float32)
        if module.params.numel() != params.numel():
            raise ValueError(f"{encoder.otype}: tiny-cuda-nn's layout has {module.params.numel()} parameters, "
                             f"this encoder {params.numel()}; use backend='torch'")
        del module._parameters["params"]  # tcnn's forward reads self.params: point it at ours on every call
        modules[x.device] = module
    object.__setattr__(module, "params", params)
    return module(x).float()
