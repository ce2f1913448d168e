"""Instant-NGP's occupancy grid over a box (Müller et al. 2022, "Instant Neural Graphics Primitives", §5.1 and
appendix E.2) in plain torch, so NeRF training skips empty space on CPU too.

:class:`OccupancyGrid` is the bounded :class:`.estimator.OccupancyEstimator` (the occupancy rule, ``update`` and
``sample`` are there): rays are marched with a fixed step, ``step_size``, through the bounding box of the occupied
cells only, after a coarse pass that skips stretches that cannot meet an occupied cell.
"""

from __future__ import annotations

import math

import torch

from ..ops.precision import wide_dtype
from .estimator import COARSE, OccupancyEstimator, Window, WindowFn, flat_index
from .march_kernel import marching_kernel, occupied_window


def ray_box_intersection(origins: torch.Tensor, directions: torch.Tensor, box: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """origins, directions: [N, 3]; box: [2, 3] (min, max) -> (t_near, t_far) [N], t_near >= 0; t_far <= t_near
    where a ray misses the box."""
    safe = torch.where(directions.abs() < 1e-12, torch.full_like(directions, 1e-12), directions)
    t0, t1 = (box[0] - origins) / safe, (box[1] - origins) / safe
    near = torch.minimum(t0, t1).amax(-1).clamp_min(0)
    far = torch.maximum(t0, t1).amin(-1)
    return near, far


class OccupancyGrid(OccupancyEstimator):
    """A ``resolution``^3 occupancy grid over ``aabb`` [2, 3] (world units), sampled every ``step_size`` (world
    units along unit directions; default the box's diagonal / 1024, Instant-NGP's sqrt(3) / 1024 in its unit
    cube). An update weighs density by step_size.

    ``sample`` (:meth:`.estimator.OccupancyEstimator.sample`): intervals of length step_size centred on the points
    near + (k + offset) step_size, near where the ray enters the occupied box (or ``clip``'s near, if later);
    offset uniform in [0, 1) per ray with ``jitter``, else 0.5.
    """

    def __init__(self, aabb: torch.Tensor, resolution: int = 128, threshold: float = 0.01, decay: float = 0.95,
                 warmup_steps: int = 256, step_size: float | None = None) -> None:
        super().__init__(aabb, resolution, threshold, decay, warmup_steps)
        if step_size is None:
            step_size = float((self.aabb[1] - self.aabb[0]).norm()) / 1024
        if not (math.isfinite(step_size) and step_size > 0):
            raise ValueError(f"OccupancyGrid: step_size must be a positive number, got {step_size}")
        self.step_size = float(step_size)

    def step_size_at(self, points: torch.Tensor) -> float:
        """points: [P, 3] world -> ``step_size``, the step everywhere."""
        return self.step_size

    def _cell_points(self, cells: torch.Tensor, jitter: torch.Tensor) -> torch.Tensor:
        lo, hi = self.aabb[0], self.aabb[1]
        return lo + (self.cell_coordinates(cells) + jitter) / self.resolution * (hi - lo)

    def normalized_distance(self, t: torch.Tensor) -> torch.Tensor:
        """t [...] (distance along unit-direction rays) -> [...] t in units of the box's diagonal."""
        return t / (self.aabb[1] - self.aabb[0]).norm()

    def _cell_of(self, points: torch.Tensor) -> torch.Tensor:
        lo, hi = self.aabb[0], self.aabb[1]
        return torch.floor((points - lo) / (hi - lo) * self.resolution).long()

    def _coarse_range(self, origins: torch.Tensor, directions: torch.Tensor, near: torch.Tensor,
                      far: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each ray's [near, far] shrunk to where it can meet an occupied fine cell (empty where it cannot).

        The ray is sampled every h = half a coarse cell's smallest full side (in t: h / |d|). A point in an
        occupied fine cell has a coarse sample within h / 2 of it, which lies in a marked coarse cell (the marks
        are dilated by one coarse cell), so the range from the first marked sample - h to the last + h holds
        every such point.
        """
        lo, hi = self.aabb[0], self.aabb[1]
        n_coarse = math.ceil(self.resolution / COARSE)
        h = float(((hi - lo) / self.resolution * COARSE).min()) / 2 / directions.norm(dim=-1)  # [N], in t
        n_steps = int(torch.ceil((far - near) / h + 0.5).clamp_min(0).max()) if len(near) else 0
        if n_steps == 0:  # no ray meets the occupied box
            return near, near.clone()
        t = near[:, None] + (torch.arange(n_steps, device=near.device) + 0.5) * h[:, None]  # [N, K]
        points = origins[:, None] + t[..., None] * directions[:, None]
        ijk = self._cell_of(points).div(COARSE, rounding_mode="floor")
        ijk = ijk.clamp(0, n_coarse - 1)  # a point just outside maps to the boundary cell, a neighbour of its own
        marked = self.coarse_occupied[flat_index(ijk, n_coarse)]
        marked &= t < (far + h / 2)[:, None]
        hit = marked.any(1)
        first = marked.int().argmax(1)
        last = n_steps - 1 - marked.flip(1).int().argmax(1)
        rows = torch.arange(len(t), device=t.device)
        new_near = torch.maximum(near, t[rows, first] - h)
        new_far = torch.where(hit, torch.minimum(far, t[rows, last] + h), new_near)
        return new_near, new_far

    def _window(self, origins: torch.Tensor, directions: torch.Tensor, near: torch.Tensor, far: torch.Tensor,
                offset: torch.Tensor, first_steps: torch.Tensor, count: int) -> Window:
        """Steps first_steps .. first_steps + count - 1 of rays [A] (t = near + (step + offset) * step_size) -> the
        samples where t < far and the point is in an occupied cell (a :data:`.estimator.Window`: the intervals
        [t - step_size / 2, t + step_size / 2])."""
        step_size = self.step_size
        steps = first_steps[:, None] + torch.arange(count, device=near.device)
        t = near[:, None] + (steps + offset[:, None]) * step_size  # [A, W]
        points = origins[:, None] + t[..., None] * directions[:, None]
        keep = (t < far[:, None]) & self.occupied_at(points.reshape(-1, 3)).view(t.shape)
        rows, k = keep.nonzero(as_tuple=True)
        next_t = near + (first_steps + count + offset) * step_size
        lengths = torch.full((len(rows),), step_size, dtype=wide_dtype(t.device), device=t.device)  # exact in tau
        kept = t[rows, k]
        return rows, points[rows, k], lengths, (kept - step_size / 2, kept + step_size / 2), first_steps + count, \
            next_t < far

    def _marching(self, origins: torch.Tensor, directions: torch.Tensor, jitter: bool,
                  generator: torch.Generator | None, clip: tuple[torch.Tensor, torch.Tensor] | None
                  ) -> tuple[torch.Tensor, torch.Tensor, WindowFn]:
        """Each ray's steps from where it enters the occupied box (or clip's near), skipping at first what the
        coarse pass finds empty (:meth:`_coarse_range`), up to where it leaves the box (or clip's far)."""
        n, device = len(origins), origins.device
        near, far = ray_box_intersection(origins, directions, self.bounds)
        if clip is not None:
            near, far = torch.maximum(near, clip[0].reshape(-1)), torch.minimum(far, clip[1].reshape(-1))
        if jitter:
            offset = torch.rand(n, device=device, generator=generator)
        else:
            offset = torch.full((n,), 0.5, device=device)
        start, end = self._coarse_range(origins, directions, near, far) if n else (near, far)
        first_steps = torch.floor((start - near) / self.step_size).clamp_min(0).long()  # keeps near's grid points
        alive = (end > start).nonzero().squeeze(1)  # rays still marching, ascending
        kernel = marching_kernel(origins.device, origins.dtype)
        grid = {"bounds": origins.new_zeros(0), "step": self.step_size, "occupied": self.occupied,
                "resolution": self.resolution, "kind": "box", "a": self.aabb[0].tolist(), "b": self.aabb[1].tolist()}

        def window_of(alive: torch.Tensor, first: torch.Tensor, count: int) -> Window:
            if kernel is None:
                return self._window(origins[alive], directions[alive], near[alive], end[alive], offset[alive], first,
                                    count)
            rows, starts, ends, points, following, more = occupied_window(
                kernel, origins[alive], directions[alive], near[alive], end[alive], offset[alive], first, count, grid)
            lengths = torch.full((len(rows),), self.step_size, dtype=wide_dtype(origins.device))  # exact in tau
            return rows, points, lengths, (starts, ends), following, more

        return alive, first_steps, window_of
