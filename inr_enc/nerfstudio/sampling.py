"""The model's occupancy grid, bounded or unbounded, behind one set of calls: which grid a scene gets, how it is
refreshed and how rays are sampled through it. The only place that tells the two apart (nerf/occupancy.py,
nerf/unbounded.py): the box's grid marches with a fixed step and takes opacity (density * that step) on update;
the contracted grid steps by distance (cone-angle, then disparity steps) and weighs density itself."""

from __future__ import annotations

from typing import Any

import torch
from nerfstudio.cameras.rays import Frustums, RayBundle, RaySamples

from ..nerf.contraction import Norm
from ..nerf.occupancy import DensityFn, OccupancyGrid
from ..nerf.space import box_frame
from ..nerf.unbounded import ContractedOccupancyGrid


def build_grid(aabb: torch.Tensor, contraction: Norm | None, resolution: int, threshold: float, warmup_steps: int,
               step_size: float) -> OccupancyGrid:
    """aabb [2, 3]: the scene box -> a grid over it (contraction None), or over all of space contracted beyond it,
    whose steps start at ``step_size`` near the centre and grow with distance."""
    if contraction is None:
        return OccupancyGrid(aabb, resolution, threshold, warmup_steps=warmup_steps)
    centre, scale = box_frame(aabb)
    return ContractedOccupancyGrid(centre, float(scale), resolution, contraction, threshold,
                                   warmup_steps=warmup_steps, min_step=step_size)


def update_grid(grid: OccupancyGrid, step: int, density_fn: DensityFn, step_size: float) -> None:
    """One occupancy update at training step ``step``; density_fn: world points [P, 3] -> density [P] or [P, 1]."""
    if isinstance(grid, ContractedOccupancyGrid):  # weighs density by the step a ray takes where it is
        grid.update(step, density_fn)
    else:
        grid.update(step, lambda x: density_fn(x) * step_size)


def sample_grid(grid: OccupancyGrid, origins: torch.Tensor, directions: torch.Tensor, step_size: float,
                density_fn: DensityFn, **options: Any) -> tuple[torch.Tensor, ...]:
    """The grid's ``sample`` (options: early_stop_eps, alpha_threshold, jitter, clip, features), with the fixed
    step where it marches with one -> (ray_indices [M], t_starts [M], t_ends [M][, features [M, C]])."""
    fixed_step = () if isinstance(grid, ContractedOccupancyGrid) else (step_size,)
    return grid.sample(origins, directions, *fixed_step, density_fn, **options)


def crop_limits(ray_bundle: RayBundle) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The bundle's near/far limits [N] each (set from the viewer's and ns-render's crop box), if any."""
    if ray_bundle.nears is None or ray_bundle.fars is None:
        return None
    return ray_bundle.nears.reshape(-1), ray_bundle.fars.reshape(-1)


def packed_ray_samples(ray_bundle: RayBundle, ray_indices: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor
                       ) -> RaySamples:
    """sample_grid's packed samples (ray index, start, end [M]) of a flat bundle of N rays as nerfstudio's
    RaySamples [M] (with each ray's camera index: the appearance embedding reads it)."""
    def rays(value: torch.Tensor) -> torch.Tensor:  # [..., C] per ray -> [M, C] per sample
        return value.reshape(-1, value.shape[-1])[ray_indices]

    cameras = ray_bundle.camera_indices
    return RaySamples(frustums=Frustums(origins=rays(ray_bundle.origins), directions=rays(ray_bundle.directions),
                                        starts=starts[:, None], ends=ends[:, None],
                                        pixel_area=rays(ray_bundle.pixel_area)),
                      camera_indices=None if cameras is None else rays(cameras))
