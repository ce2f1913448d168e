"""Running an encoder through tiny-cuda-nn: same config, same ``params``, float32 output.

An encoder's ``backend`` is "auto" (tcnn for float32 CUDA inputs when tinycudann imports and the encoding is a
grid tcnn has; otherwise grids use inr_enc's own kernels where they run, see inr_enc/kernels, and the rest
torch), "torch" (PyTorch ops only), "cpp" or "triton" (one grid kernel) or "tcnn" (errors where it cannot run). "auto" keeps tcnn's
other encodings (Frequency, SphericalHarmonics, ...) on torch because tcnn has no second derivatives for
them (only for grids), and torch's are cheap. tcnn reads our parameter
tensor directly (grids keep tcnn's table layout), so gradients land in the encoder's own parameters and
switching backends changes nothing but speed. tcnn computes in float32 here (``dtype=torch.float32``);
its default build has grids for 2 to 4 input dims with the CoherentPrime hash only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..backends import tinycudann

if TYPE_CHECKING:
    from .base import Encoder

BACKENDS = ("auto", "torch", "cpp", "triton", "tcnn")  # cpp, triton: the grid kernels (inr_enc/kernels)


def tcnn_unavailable_reason(encoder: Encoder, x: torch.Tensor) -> str | None:
    """Why tcnn cannot encode ``x: [N, d]`` with ``encoder`` here, or None when it can."""
    if encoder.tcnn_config() is None:
        return f"tiny-cuda-nn has no equivalent of this {encoder.otype} config"
    if not x.is_cuda:
        return f"tiny-cuda-nn runs on CUDA tensors only, got a {x.device.type} input"
    if x.dtype != torch.float32:
        return f"the tiny-cuda-nn backend takes float32 inputs, got {x.dtype}"
    if tinycudann() is None:
        return "tinycudann is not installed or does not import here"
    return None


def uses_tcnn(encoder: Encoder, x: torch.Tensor) -> bool:
    """Whether ``encoder`` (with its ``backend``) runs ``x`` through tcnn; ValueError when "tcnn" is forced but impossible."""
    if encoder.backend in ("torch", "cpp", "triton") or (encoder.backend == "auto" and not encoder.tcnn_auto):
        return False
    reason = tcnn_unavailable_reason(encoder, x)
    if reason is not None and encoder.backend == "tcnn":
        raise ValueError(f"{encoder.otype}: backend 'tcnn' unavailable: {reason}")
    return reason is None


def encoder_params(encoder: Encoder) -> torch.Tensor:
    """All of the encoder's parameters as one flat tensor in registration order (tcnn's order for Composite)."""
    params = [p.reshape(-1) for p in encoder.parameters()]
    if len(params) == 1:
        return params[0]
    return torch.cat(params) if params else torch.zeros(0)


def tcnn_encode(encoder: Encoder, x: torch.Tensor, modules: dict[torch.device, torch.nn.Module]) -> torch.Tensor:
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
