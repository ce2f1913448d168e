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


def frame_to_unit(points: torch.Tensor, frame: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """World points [..., 3] through an affine ``frame`` [3, 4] (x = A p + b; e.g. Instant-NGP's dataset transform,
    snapshot.py) -> (unit coordinates [..., 3], inside [0, 1]^3 [..., 1] bool)."""
    x = points @ frame[:, :3].T.to(points.dtype) + frame[:, 3].to(points.dtype)
    return x, ((x >= 0) & (x <= 1)).all(-1, keepdim=True)


def frame_gaussians_to_unit(mean: torch.Tensor, cov: torch.Tensor, frame: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """World Gaussians (mean [..., 3], cov [..., 3, 3]) through ``frame`` -> (mean, cov = A cov A^T, inside)."""
    linear = frame[:, :3].to(mean.dtype)
    x, inside = frame_to_unit(mean, frame)
    return x, linear @ cov @ linear.T, inside


def unit_lengths_per_world_length(aabb: torch.Tensor, contraction: Norm | None = None,
                                  frame: torch.Tensor | None = None) -> float:
    """How many unit-cube lengths one world length spans where the encoders read the scene box (the geometric mean
    over the axes): |det A|^(1/3) for a ``frame``, 1 / extent for a bounded box, 1 / (4 * largest half extent)
    inside a contracted one (the box fills [1/4, 3/4]^3 of the unit cube)."""
    if frame is not None:
        return float(torch.linalg.det(frame[:, :3].double()).abs() ** (1 / 3))
    if contraction is None:
        return float((1 / (aabb[1] - aabb[0]).double()).prod() ** (1 / 3))
    return float(1 / (4 * box_frame(aabb)[1]))


def frame_world_box(frame: torch.Tensor) -> torch.Tensor:
    """The world box [2, 3] (float32) that holds what ``frame`` [3, 4] maps onto [0, 1]^3."""
    world = unit_to_world(torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * 3), frame)
    return torch.stack([world.amin(0), world.amax(0)]).float()


def unit_to_world(unit: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
    """Unit-cube points [P, 3] -> world [P, 3] (float64): ``frame`` inverted."""
    linear, shift = frame[:, :3].double(), frame[:, 3].double()
    return torch.linalg.solve(linear, (unit.double() - shift).T).T
