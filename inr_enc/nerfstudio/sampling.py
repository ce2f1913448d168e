"""The model's occupancy grid and its samples as nerfstudio's: which grid a scene gets (the box's, or one over
contracted space; both are :class:`..nerf.estimator.OccupancyEstimator`, refreshed and sampled through the same
calls), the bundle's crop limits, each ray's near and far for the proposal sampler (the grid's), and packed samples
as RaySamples."""

from __future__ import annotations

import torch
from nerfstudio.cameras.rays import Frustums, RayBundle, RaySamples
from nerfstudio.data.scene_box import SceneBox
from nerfstudio.model_components.scene_colliders import AABBBoxCollider, NearFarCollider

from ..nerf.contraction import Norm
from ..nerf.estimator import OccupancyEstimator
from ..nerf.occupancy import OccupancyGrid
from ..nerf.space import box_frame
from ..nerf.unbounded import ContractedOccupancyGrid


def build_grid(aabb: torch.Tensor, contraction: Norm | None, resolution: int, threshold: float, warmup_steps: int,
               step_size: float) -> OccupancyEstimator:
    """aabb [2, 3]: the scene box -> a grid over it marched every ``step_size`` (contraction None), or over all of
    space contracted beyond it, whose steps start at ``step_size`` near the centre and grow with distance."""
    if contraction is None:
        return OccupancyGrid(aabb, resolution, threshold, warmup_steps=warmup_steps, step_size=step_size)
    centre, scale = box_frame(aabb)
    return ContractedOccupancyGrid(centre, float(scale), resolution, contraction, threshold,
                                   warmup_steps=warmup_steps, min_step=step_size)


def crop_limits(ray_bundle: RayBundle) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The bundle's near/far limits [N] each (set from the viewer's and ns-render's crop box), if any."""
    if ray_bundle.nears is None or ray_bundle.fars is None:
        return None
    return ray_bundle.nears.reshape(-1), ray_bundle.fars.reshape(-1)


def ray_limits(ray_bundle: RayBundle, grid: OccupancyEstimator) -> RayBundle:
    """The bundle with each ray's near and far set where it has none (a crop box's are kept): the stretch the
    occupancy ``grid`` would march, [grid.near, grid.far] over contracted space, else the ray's entry and exit of
    the grid's box."""
    if ray_bundle.nears is not None and ray_bundle.fars is not None:
        return ray_bundle
    if isinstance(grid, ContractedOccupancyGrid):
        return NearFarCollider(grid.near, grid.far)(ray_bundle)
    return AABBBoxCollider(SceneBox(aabb=grid.aabb))(ray_bundle)


def packed_ray_samples(ray_bundle: RayBundle, ray_indices: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor
                       ) -> RaySamples:
    """The grid's packed samples (ray index, start, end [M]) of a flat bundle of N rays as nerfstudio's
    RaySamples [M] (with each ray's camera index: the appearance embedding reads it)."""
    def rays(value: torch.Tensor) -> torch.Tensor:  # [..., C] per ray -> [M, C] per sample
        return value.reshape(-1, value.shape[-1])[ray_indices]

    cameras = ray_bundle.camera_indices
    return RaySamples(frustums=Frustums(origins=rays(ray_bundle.origins), directions=rays(ray_bundle.directions),
                                        starts=starts[:, None], ends=ends[:, None],
                                        pixel_area=rays(ray_bundle.pixel_area)),
                      camera_indices=None if cameras is None else rays(cameras))
