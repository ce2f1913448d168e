"""Volume rendering of packed ray samples (samples of all rays in one flat list, each tagged with its ray), in
plain torch so it runs on every device: the quadrature of Max 1995 / NeRF (Mildenhall et al. 2020, eq. 3),
w_i = T_i (1 - exp(-sigma_i delta_i)), T_i = exp(-sum_{j<i} sigma_j delta_j), over each ray's samples in order.
"""

from __future__ import annotations

import torch

from ..ops.precision import wide_dtype


def _check_packed(ray_indices: torch.Tensor, n_rays: int) -> None:
    if ray_indices.dim() != 1 or ray_indices.dtype != torch.int64:
        raise ValueError(f"ray_indices must be a 1D int64 tensor, "
                         f"got shape {list(ray_indices.shape)}, {ray_indices.dtype}")
    if len(ray_indices) and (bool((ray_indices[1:] < ray_indices[:-1]).any()) or int(ray_indices[-1]) >= n_rays
                             or int(ray_indices[0]) < 0):
        raise ValueError(f"ray_indices must be sorted and in [0, {n_rays}) (each ray's samples together, in order)")


def sum_before(values: torch.Tensor, ray_indices: torch.Tensor, n_rays: int) -> torch.Tensor:
    """Per-ray exclusive sums: values [M], ray_indices [M] sorted -> [M], the sum of values over the same ray's
    earlier samples (of tau = sigma * delta: the optical depth before each sample). Summed in float64 (float32 on
    MPS) over the whole list, so long lists lose no precision."""
    _check_packed(ray_indices, n_rays)
    wide = values.to(wide_dtype(values.device))
    inclusive = torch.cumsum(wide, 0)
    exclusive = inclusive - wide
    counts = torch.bincount(ray_indices, minlength=n_rays)
    first = torch.cumsum(counts, 0) - counts  # index of each ray's first sample (unused for empty rays)
    ray_start = exclusive[first.clamp_max(max(len(values) - 1, 0))] if len(values) else exclusive.new_zeros(n_rays)
    return (exclusive - ray_start[ray_indices]).to(values.dtype)


# Optical depth past which a sample is opaque to float precision (exp(-100) < 4e-44): each sample's is capped
# there, so an overflowing density (inf, or 1e38: exp of a network output past 88) stays a finite opaque sample
# instead of turning the packed list's running sums into inf - inf = NaN, or swamping them, for every later ray.
MAX_OPTICAL_DEPTH = 100.0


def optical_depth(sigmas: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """sigmas, deltas: [M] (density >= 0, interval length > 0) -> tau = sigma * delta [M], at most
    MAX_OPTICAL_DEPTH."""
    return (sigmas * deltas).clamp_max(MAX_OPTICAL_DEPTH)


def render_weights(sigmas: torch.Tensor, deltas: torch.Tensor, ray_indices: torch.Tensor, n_rays: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """sigmas, deltas: [M] (density >= 0, interval length > 0) -> (weights [M], transmittance before each
    sample [M]), both in [0, 1]."""
    tau = optical_depth(sigmas, deltas)
    transmittance = torch.exp(-sum_before(tau, ray_indices, n_rays))
    return transmittance * (1 - torch.exp(-tau)), transmittance


def accumulate(values: torch.Tensor, ray_indices: torch.Tensor, n_rays: int) -> torch.Tensor:
    """values: [M, C] -> [n_rays, C], the sum over each ray's samples (zero for rays without samples)."""
    return values.new_zeros(n_rays, values.shape[-1]).index_add_(0, ray_indices, values)


def composite(sigmas: torch.Tensor, colours: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor,
              ray_indices: torch.Tensor, n_rays: int) -> tuple[torch.Tensor, ...]:
    """Packed samples (sigmas, starts, ends [M], colours [M, C]) -> (weights [M], colour [n_rays, C], opacity
    [n_rays, 1], weighted depth [n_rays, 1]: the sum of weight * interval midpoint, not divided by the opacity)."""
    weights, _ = render_weights(sigmas, ends - starts, ray_indices, n_rays)
    per_sample = torch.cat([colours, torch.ones_like(starts)[:, None], ((starts + ends) / 2)[:, None]], -1)
    colour, opacity, depth = accumulate(weights[:, None] * per_sample, ray_indices, n_rays).split(
        [colours.shape[-1], 1, 1], -1)  # one pass over the samples
    return weights, colour, opacity, depth


def distortion(weights: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, ray_indices: torch.Tensor,
               n_rays: int) -> torch.Tensor:
    """mip-NeRF 360's distortion loss (Barron et al. 2022, eq. 15) per ray: weights, starts, ends [M] (the
    intervals in a normalised distance s, each ray's in order, not overlapping) -> [n_rays],
    sum_{i,j} w_i w_j |m_i - m_j| + 1/3 sum_i w_i^2 (e_i - s_i), m the midpoints. Small when each ray's weight
    sits in one short stretch: it pulls floaters and fog into surfaces. O(M): with each ray's midpoints in order, the
    double sum is 2 sum_i w_i (m_i W_i - (wm)_i), W_i and (wm)_i the sums of w and w m over the ray's earlier
    samples."""
    midpoints = (starts + ends) / 2
    weight_before = sum_before(weights, ray_indices, n_rays)
    moment_before = sum_before(weights * midpoints, ray_indices, n_rays)
    per_sample = 2 * weights * (midpoints * weight_before - moment_before) + weights**2 * (ends - starts) / 3
    return per_sample.new_zeros(n_rays).index_add_(0, ray_indices, per_sample)
