"""The Gaussian of a cone's (or cylinder's) stretch along a ray: mip-NeRF (Barron et al. 2021, "Mip-NeRF: A
Multiscale Representation for Anti-Aliasing Neural Radiance Fields", eq. 7-8). Cone-traced encoders (Hybrid) read
each sample's mean and covariance."""

from __future__ import annotations

import torch


def frustum_gaussian(
    origins: torch.Tensor, directions: torch.Tensor, t_starts: torch.Tensor, t_ends: torch.Tensor,
    radii: torch.Tensor, shape: str = "cone",
) -> tuple[torch.Tensor, torch.Tensor]:
    """mip-NeRF's Gaussian of the ray interval [t_starts, t_ends] of the cone o + t d (radius ``radii * t``).

    origins, directions: [..., d] (directions need not be unit); t_starts, t_ends, radii: [...]; mip-NeRF sets
    radii to the pixel width at t = 1 times 2 / sqrt(12). With t_mu = (t0 + t1) / 2, t_delta = (t1 - t0) / 2:
      "cone" (mip-NeRF eq. 7, its numerically stable form of the frustum's exact moments):
        mu_t = t_mu + 2 t_mu t_delta^2 / (3 t_mu^2 + t_delta^2),
        sigma_t^2 = t_delta^2 / 3 - 4 t_delta^4 (12 t_mu^2 - t_delta^2) / (15 (3 t_mu^2 + t_delta^2)^2),
        sigma_r^2 = r^2 (t_mu^2 / 4 + 5 t_delta^2 / 12 - 4 t_delta^4 / (15 (3 t_mu^2 + t_delta^2)));
      "cylinder": mu_t = t_mu, sigma_t^2 = (t1 - t0)^2 / 12 (a uniform interval), sigma_r^2 = r^2 / 4.
    Returns mean [..., d] = o + mu_t d and cov [..., d, d] = sigma_t^2 d d^T + sigma_r^2 (I - d d^T / |d|^2)
    (eq. 8). Hybrid wants both in [0, 1] coordinates: for x = (p - lo) / (hi - lo) divide cov[i, j] by
    (hi - lo)_i (hi - lo)_j.
    """
    t_mu, t_delta = (t_starts + t_ends) / 2, (t_ends - t_starts) / 2
    if shape == "cone":
        mu2, delta2 = t_mu**2, t_delta**2
        denom = 3 * mu2 + delta2
        mean_t = t_mu + 2 * t_mu * delta2 / denom
        var_t = delta2 / 3 - 4 * delta2**2 * (12 * mu2 - delta2) / (15 * denom**2)
        var_r = radii**2 * (mu2 / 4 + 5 * delta2 / 12 - 4 * delta2**2 / (15 * denom))
    elif shape == "cylinder":
        mean_t, var_t, var_r = t_mu, (t_ends - t_starts) ** 2 / 12, radii**2 / 4
    else:
        raise ValueError(f"frustum_gaussian: shape must be 'cone' or 'cylinder', got {shape!r}")
    mean = origins + mean_t[..., None] * directions
    outer = directions[..., :, None] * directions[..., None, :]
    eye = torch.eye(directions.shape[-1], dtype=directions.dtype, device=directions.device)
    norm2 = (directions**2).sum(-1).clamp_min(1e-10)[..., None, None]
    cov = var_t[..., None, None] * outer + var_r[..., None, None] * (eye - outer / norm2)
    return mean, cov
