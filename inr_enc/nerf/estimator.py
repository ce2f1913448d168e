"""One interface for the occupancy grids, as nerfacc's estimators share one sampling signature
(nerfacc/estimators/occ_grid.py): :class:`OccupancyEstimator` keeps Instant-NGP's occupancy rule (Müller et al.
2022, "Instant Neural Graphics Primitives", §5.1 and appendix E.2) and gives every grid the same ``update`` and
``sample``; a grid says only where its cells lie and how its rays step (:class:`.occupancy.OccupancyGrid`: a box,
fixed steps; :class:`.unbounded.ContractedOccupancyGrid`: contracted space, steps that grow with distance).

The grid keeps, per cell, a decayed maximum of the field's opacity (density * the step a ray takes there): every
update multiplies it by ``decay`` (0.95) and raises it to fresh samples at a random point of chosen cells (all
cells for the first ``warmup_steps`` steps, then a quarter of the cells drawn at random plus as many occupied
ones). A cell is occupied while its value exceeds min(threshold, mean over cells) (``threshold`` 0.01, as in
nerfacc's OccGridEstimator). Rays are marched front to back; samples in empty cells are dropped, and so are
samples behind an opaque stretch (early ray termination).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ..ops.precision import wide_dtype
from ..ops.ranks import max_over_ranks
from .volume_rendering import optical_depth, sum_before

CHUNK = 1 << 18  # points per density evaluation during an update
COARSE = 8  # fine cells per coarse cell along each axis (the box grid's coarse pass that skips empty space)
MAX_WINDOW_GROWTH = 16  # marching windows grow up to this many times the first as rays finish (see march)
# One window of marching (see march): (row into the A marching rays [S], sorted; points [S, 3]; interval lengths
# [S]; the payload (t_starts [S], t_ends [S]) returned with the samples; [A] int64, each ray's step after the
# window; [A] bool, whether the ray has steps after it).
Window = tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]
# window_of(alive [A], first_steps [A], count) -> the Window of the next steps from first_steps: count steps in
# torch, or the next count steps in occupied cells with the compiled kernel (march_kernel.py)
WindowFn = Callable[[torch.Tensor, torch.Tensor, int], Window]
DensityFn = Callable[[torch.Tensor], "torch.Tensor | tuple[torch.Tensor, torch.Tensor]"]


def check_sample_arguments(origins: torch.Tensor, directions: torch.Tensor, early_stop_eps: float,
                           alpha_threshold: float, window: int) -> None:
    """ValueError unless origins and directions are both [N, 3], 0 < early_stop_eps < 1, 0 <= alpha_threshold < 1
    and window >= 1."""
    if not 0 < early_stop_eps < 1 or not 0 <= alpha_threshold < 1 or window < 1:
        raise ValueError(f"sample: need 0 < early_stop_eps < 1, 0 <= alpha_threshold < 1, window >= 1; got "
                         f"{early_stop_eps}, {alpha_threshold}, {window}")
    if origins.shape != directions.shape or origins.dim() != 2 or origins.shape[-1] != 3:
        raise ValueError(f"sample: origins and directions must both be [N, 3], got {list(origins.shape)} and "
                         f"{list(directions.shape)}")


def flat_index(ijk: torch.Tensor, resolution: int) -> torch.Tensor:
    """[..., 3] cell coordinates in [0, resolution) -> [...] flat index, x slowest (the grids' layout)."""
    return (ijk[..., 0] * resolution + ijk[..., 1]) * resolution + ijk[..., 2]


class OccupancyEstimator(nn.Module, ABC):
    """A ``resolution``^3 occupancy grid over ``aabb`` [2, 3] (its grid space), with :meth:`update` and
    :meth:`sample`, the same for every grid.

    A grid implements :meth:`step_size_at` (what an update weighs density by), :meth:`normalized_distance`,
    ``_cell_points`` and ``_cell_of`` (world points <-> cells) and ``_marching`` (where each ray's steps start and
    how a window of them is taken). The state (per-cell opacity, occupancy, the occupied bounding box and a coarse
    grid) is in buffers, so a saved model renders as it was trained.
    """

    def __init__(self, aabb: torch.Tensor, resolution: int, threshold: float, decay: float, warmup_steps: int
                 ) -> None:
        super().__init__()
        if resolution < 1 or not 0 < decay <= 1 or threshold < 0:
            raise ValueError(f"{type(self).__name__}: need resolution >= 1, 0 < decay <= 1, threshold >= 0; got "
                             f"{resolution}, {decay}, {threshold}")
        self.resolution, self.threshold, self.decay, self.warmup_steps = resolution, threshold, decay, warmup_steps
        aabb = torch.as_tensor(aabb, dtype=torch.float32).reshape(2, 3)
        self.register_buffer("aabb", aabb.clone())
        self.register_buffer("opacity", torch.zeros(resolution**3))
        self.register_buffer("occupied", torch.ones(resolution**3, dtype=torch.bool))  # all, until the first update
        self.register_buffer("bounds", aabb.clone())  # [2, 3], the occupied cells' bounding box
        coarse = math.ceil(resolution / COARSE)
        self.register_buffer("coarse_occupied", torch.ones(coarse**3, dtype=torch.bool))  # see _update_bounds

    @abstractmethod
    def step_size_at(self, points: torch.Tensor) -> torch.Tensor | float:
        """points: [P, 3] world -> the step a ray takes there: [P], or one number for every point."""

    @abstractmethod
    def normalized_distance(self, t: torch.Tensor) -> torch.Tensor:
        """t [...] (distance along unit-direction rays) -> [...] s, in which the grid's steps are evenly spaced
        (the distortion loss's s, :func:`.volume_rendering.distortion`)."""

    @abstractmethod
    def _cell_points(self, cells: torch.Tensor, jitter: torch.Tensor) -> torch.Tensor:
        """cells [M] flat indices, jitter [M, 3] in [0, 1) -> [M, 3] world points at that place in each cell."""

    @abstractmethod
    def _cell_of(self, points: torch.Tensor) -> torch.Tensor:
        """points: [..., 3] world -> [..., 3] integer cell coordinates (outside [0, resolution) off the grid)."""

    @abstractmethod
    def _marching(self, origins: torch.Tensor, directions: torch.Tensor, jitter: bool,
                  generator: torch.Generator | None, clip: tuple[torch.Tensor, torch.Tensor] | None
                  ) -> tuple[torch.Tensor, torch.Tensor, WindowFn]:
        """Rays [N] -> (alive: the rays with steps to take, ascending; first_steps [N] int64: each ray's first;
        window_of: a window of steps), for :func:`march`."""

    def cell_coordinates(self, cells: torch.Tensor) -> torch.Tensor:
        """cells: [M] flat indices -> [M, 3] integer (x, y, z) cell coordinates, x slowest."""
        r = self.resolution
        return torch.stack([cells // (r * r), (cells // r) % r, cells % r], -1)

    @torch.no_grad()
    def update(self, step: int, density_fn: Callable[[torch.Tensor], torch.Tensor],
               generator: torch.Generator | None = None) -> None:
        """Refresh the grid; density_fn: world points [P, 3] -> density [P] or [P, 1]. A cell's opacity is
        density * :meth:`step_size_at` a random point in it.

        In a torch.distributed group of several ranks (DDP training) every rank must call this at the same steps
        (the training callbacks do): each draws its own cells and points, and the per-cell maxima are reduced
        over the ranks, so all of them hold the same grid, which reflects every rank's draws."""
        n, device = self.resolution**3, self.opacity.device
        if step < self.warmup_steps:
            cells = torch.arange(n, device=device)
        else:
            drawn = torch.randint(n, (n // 4,), device=device, generator=generator)
            occupied = self.occupied.nonzero().squeeze(1)
            if len(occupied) > n // 4:
                occupied = occupied[torch.randint(len(occupied), (n // 4,), device=device, generator=generator)]
            cells = torch.cat([drawn, occupied])
        jitter = torch.rand(len(cells), 3, device=device, generator=generator)
        points = self._cell_points(cells, jitter)
        values = torch.cat([density_fn(x).reshape(-1) * self.step_size_at(x)
                            for x in (points[i:i + CHUNK] for i in range(0, len(points), CHUNK))])
        self.opacity.mul_(self.decay).scatter_reduce_(0, cells, values.to(self.opacity.dtype), "amax")
        max_over_ranks(self.opacity)
        self.set_opacity(self.opacity)

    @torch.no_grad()
    def set_opacity(self, opacity: torch.Tensor) -> None:
        """Replace every cell's value (flat [resolution^3], x slowest; e.g. a loaded snapshot's) and the
        occupancy that follows from it, as an update leaves them."""
        self.opacity.copy_(opacity.reshape(-1))
        self.occupied.copy_(self.opacity > min(self.threshold, self._mean_opacity()))
        self._update_bounds()

    def _mean_opacity(self) -> float:
        """The mean the occupancy threshold is capped by: over every cell."""
        return float(self.opacity.mean())

    def _update_bounds(self) -> None:
        """Refresh what marching reads besides ``occupied``: the occupied bounding box, and the coarse grid (a
        coarse cell is marked when it or one of its 26 neighbours holds an occupied fine cell)."""
        r = self.resolution
        fine = self.occupied.view(1, 1, r, r, r).float()
        coarse = F.max_pool3d(F.max_pool3d(fine, COARSE, COARSE, ceil_mode=True), 3, 1, padding=1)
        self.coarse_occupied.copy_(coarse.reshape(-1) > 0)
        occupied = self.occupied.nonzero().squeeze(1)
        lo, hi = self.aabb[0], self.aabb[1]
        if len(occupied) == 0:
            self.bounds.copy_(torch.stack([lo, lo]))
            return
        ijk = self.cell_coordinates(occupied)
        cell = (hi - lo) / self.resolution
        self.bounds.copy_(torch.stack([lo + ijk.amin(0) * cell, lo + (ijk.amax(0) + 1) * cell]))

    def opacity_at(self, points: torch.Tensor) -> torch.Tensor:
        """points: [P, 3] world -> [P] the value of the cell each lies in, 0 outside the grid."""
        ijk = self._cell_of(points)
        inside = ((ijk >= 0) & (ijk < self.resolution)).all(-1)
        values = self.opacity[flat_index(ijk.clamp(0, self.resolution - 1), self.resolution)]
        return torch.where(inside, values, torch.zeros_like(values))

    def occupied_at(self, points: torch.Tensor) -> torch.Tensor:
        """points: [P, 3] world -> [P] bool, False outside the grid."""
        ijk = self._cell_of(points)
        inside = ((ijk >= 0) & (ijk < self.resolution)).all(-1)
        return inside & self.occupied[flat_index(ijk.clamp(0, self.resolution - 1), self.resolution)]

    @torch.no_grad()
    def sample(self, origins: torch.Tensor, directions: torch.Tensor, density_fn: DensityFn | None = None,
               early_stop_eps: float = 1e-4, alpha_threshold: float = 0.0, jitter: bool = False, window: int = 16,
               generator: torch.Generator | None = None, clip: tuple[torch.Tensor, torch.Tensor] | None = None,
               features: bool = False) -> tuple[torch.Tensor, ...]:
        """Samples along each ray on the grid's steps, in occupied cells.

        origins, directions: [N, 3] (unit directions make t metric; none may be zero) -> packed (ray_indices [M]
        int64, sorted, each ray's samples in order of t; t_starts [M]; t_ends [M]). ``jitter``: each ray's steps
        shifted by a uniform random fraction of a step (training; drawn from ``generator``). With ``density_fn``
        (world points [P, 3] -> density [P] or [P, 1]) rays are marched front to back, ``window`` steps at a time
        at first (:func:`march`), and a sample is kept only while the transmittance before it exceeds
        ``early_stop_eps`` and its opacity 1 - exp(-density * (t_end - t_start)) exceeds ``alpha_threshold``; a
        ray stops once its transmittance falls below early_stop_eps (Instant-NGP's early ray termination).
        ``clip``: (near [N], far [N]) limits on t besides the grid's own (e.g. a crop box). ``features``:
        density_fn returns (density, features [P, C]) and the kept samples' features [M, C] come fourth (a
        renderer's reuse).
        """
        check_sample_arguments(origins, directions, early_stop_eps, alpha_threshold, window)
        alive, first_steps, window_of = self._marching(origins, directions, jitter, generator, clip)
        rays, payload = march(len(origins), alive, first_steps, window, window_of, density_fn, early_stop_eps,
                              alpha_threshold, origins.new_zeros(0), features)
        return (rays, *payload)


def march(n: int, alive: torch.Tensor, first_steps: torch.Tensor, window: int, window_of: WindowFn,
          density_fn: DensityFn | None, early_stop_eps: float, alpha_threshold: float, empty: torch.Tensor,
          features: bool = False) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Front-to-back marching of n rays with early ray termination (:meth:`OccupancyEstimator.sample`'s), a window
    of steps at a time (the next steps in occupied cells, with the compiled kernel): ``window`` steps while all
    rays march, then window * (rays at the start / rays still marching), at most MAX_WINDOW_GROWTH times that,
    so the work per pass stays about even and a ray that stops early wastes few density evaluations beyond its
    end (Instant-NGP's rule for steps between compactions).
    alive: the marching rays, ascending; first_steps [n] int64: each ray's next step (advanced in place);
    window_of(alive, first_steps[alive], steps) -> a :data:`Window`. With density_fn, a sample is kept only
    while the optical depth before it is below -log(early_stop_eps) and its opacity 1 - exp(-density * length)
    exceeds alpha_threshold; a ray stops once its optical depth reaches -log(early_stop_eps). ``features``:
    density_fn returns (density, features [P, C]), and the kept samples' features are one more payload (so a
    renderer need not evaluate them again; [0] when no sample is kept).
    -> (ray_indices [M] int64 sorted, each ray's samples in order; (t_starts [M], t_ends [M][, features]),
    ``empty`` when none)."""
    device = first_steps.device
    max_depth = -math.log(early_stop_eps) if density_fn is not None else math.inf
    depth = torch.zeros(n, dtype=wide_dtype(device), device=device)  # optical depth so far, per ray
    found_rays: list[torch.Tensor] = []
    found: list[tuple[torch.Tensor, ...]] = []
    n_start = max(len(alive), 1)
    while len(alive):
        count = window * min(max(n_start // len(alive), 1), MAX_WINDOW_GROWTH)
        rows, points, lengths, payload, following, more = window_of(alive, first_steps[alive], count)
        rays = alive[rows]
        if density_fn is not None:
            density = density_fn(points)
            if features:
                density, point_features = density
                payload = (*payload, point_features)
            tau = optical_depth(density.reshape(-1).to(depth.dtype), lengths.to(depth.dtype))
            before = depth[rays] + sum_before(tau, rays, n)
            keep = (before < max_depth) & (1 - torch.exp(-tau) > alpha_threshold)
            depth.index_add_(0, rays, tau)
            rays, payload = rays[keep], tuple(p[keep] for p in payload)
        found_rays.append(rays)
        found.append(payload)
        first_steps[alive] = following
        alive = alive[more & (depth[alive] < max_depth)]
    if not found_rays:
        return empty.long(), (empty,) * (2 + features)
    rays, order = torch.sort(torch.cat(found_rays), stable=True)  # windows come in order of t: stays per ray
    return rays, tuple(torch.cat(parts)[order] for parts in zip(*found))
