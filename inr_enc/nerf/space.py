"""Where a NeRF field's encoders read positions: world points (and frustum Gaussians) mapped into [0, 1]^3.

- Bounded scenes (NeRF-synthetic; ``contraction`` None): the scene box ``aabb`` scaled to [0, 1]^3; points outside
  it are marked outside (no density there).
- Unbounded scenes (real captures; ``contraction`` "l2" or "linf"): the scene box centred and scaled by its largest
  half extent (uniformly, so the contraction stays isotropic; a cube box becomes [-1, 1]^3), then
  mip-NeRF 360's contraction (nerf/contraction.py) takes all of R^3 into the radius-2 ball (L2) or cube (L-inf),
  scaled to [0, 1]^3: the box keeps its resolution, the far field down to the horizon and the sky fill the shell
  around it. Every finite point is inside. Gaussians go through the contraction's Jacobian (mip-NeRF 360 §2), so
  far footprints stay right.
"""

from __future__ import annotations

import torch

from .contraction import Norm, contract, contract_gaussians


def box_frame(aabb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The scene box ``aabb`` [2, 3] -> (its centre [3], its largest half extent []): what contraction scales by."""
    return (aabb[0] + aabb[1]) / 2, ((aabb[1] - aabb[0]) / 2).amax()


def to_box(points: torch.Tensor, aabb: torch.Tensor) -> torch.Tensor:
    """World points [..., 3] -> (points - centre) / scale (``box_frame``): the box's largest axis spans [-1, 1]."""
    centre, scale = box_frame(aabb)
    return (points - centre) / scale


def to_unit(points: torch.Tensor, aabb: torch.Tensor, contraction: Norm | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """World points [..., 3] -> (unit coordinates [..., 3], inside [..., 1] bool)."""
    if contraction is None:
        x = (points - aabb[0]) / (aabb[1] - aabb[0])
        return x, ((x >= 0) & (x <= 1)).all(-1, keepdim=True)
    y = contract(to_box(points, aabb), contraction)
    return (y + 2) / 4, torch.ones_like(points[..., :1], dtype=torch.bool)


def gaussians_to_unit(mean: torch.Tensor, cov: torch.Tensor, aabb: torch.Tensor, contraction: Norm | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """World Gaussians (mean [..., 3], cov [..., 3, 3]) -> (mean, cov in unit coordinates, inside [..., 1])."""
    if contraction is None:
        extent = aabb[1] - aabb[0]
        x, inside = to_unit(mean, aabb)
        return x, cov / (extent[:, None] * extent[None, :]), inside
    mean_c, cov_c = contract_gaussians(to_box(mean, aabb), cov / box_frame(aabb)[1] ** 2, contraction)
    return (mean_c + 2) / 4, cov_c / 16, torch.ones_like(mean[..., :1], dtype=torch.bool)
