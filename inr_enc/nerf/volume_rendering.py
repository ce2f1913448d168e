"""Volume rendering of packed ray samples (samples of all rays in one flat list, each tagged with its ray), in
plain torch so it runs on every device: the quadrature of Max 1995 / NeRF (Mildenhall et al. 2020, eq. 3),
w_i = T_i (1 - exp(-sigma_i delta_i)), T_i = exp(-sum_{j<i} sigma_j delta_j), over each ray's samples in order.
"""

from __future__ import annotations

import torch

from ..ops.precision import wide_dtype


def _check_packed(ray_indices: torch.Tensor, n_rays: int) -> None:
    if ray_indices.dim() != 1 or ray_indices.dtype != torch.int64:
        raise ValueError(f"ray_indices must be a 1D int64 tensor, got shape {list(ray_indices.shape)}, {ray_indices.dtype}")
    if len(ray_indices) and (bool((ray_indices[1:] < ray_indices[:-1]).any()) or int(ray_indices[-1]) >= n_rays
                             or int(ray_indices[0]) < 0):
        raise ValueError(f"ray_indices must be sorted and in [0, {n_rays}) (each ray's samples together, in order)")


def optical_depth_before(tau: torch.Tensor, ray_indices: torch.Tensor, n_rays: int) -> torch.Tensor:
    """Per-ray exclusive sums: tau [M] (sigma * delta, >= 0), ray_indices [M] sorted -> [M], sum of tau over the
    same ray's earlier samples. Summed in float64 (float32 on MPS) over the whole list, so long lists lose no
    precision."""
    _check_packed(ray_indices, n_rays)
    wide = tau.to(wide_dtype(tau.device))
    inclusive = torch.cumsum(wide, 0)
    exclusive = inclusive - wide
    counts = torch.bincount(ray_indices, minlength=n_rays)
    first = torch.cumsum(counts, 0) - counts  # index of each ray's first sample (unused for empty rays)
    ray_start = exclusive[first.clamp_max(max(len(tau) - 1, 0))] if len(tau) else exclusive.new_zeros(n_rays)
    return (exclusive - ray_start[ray_indices]).to(tau.dtype)


def render_weights(sigmas: torch.Tensor, deltas: torch.Tensor, ray_indices: torch.Tensor, n_rays: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """sigmas, deltas: [M] (density >= 0, interval length > 0) -> (weights [M], transmittance before each
    sample [M]), both in [0, 1]."""
    tau = sigmas * deltas
    transmittance = torch.exp(-optical_depth_before(tau, ray_indices, n_rays))
    return transmittance * (1 - torch.exp(-tau)), transmittance


def accumulate(values: torch.Tensor, ray_indices: torch.Tensor, n_rays: int) -> torch.Tensor:
    """values: [M, C] -> [n_rays, C], the sum over each ray's samples (zero for rays without samples)."""
    return values.new_zeros(n_rays, values.shape[-1]).index_add_(0, ray_indices, values)
