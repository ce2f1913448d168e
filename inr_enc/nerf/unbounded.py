"""Sampling unbounded scenes: Instant-NGP's cone-angle stepping (Müller et al. 2022, appendix E) and an occupancy
grid over mip-NeRF 360's contracted space (Barron et al. 2022), in plain torch.

Steps grow with distance: t_{k+1} = t_k + clamp(t_k * cone_angle, min_step, max_step), so a ray costs about
log(far / near) / cone_angle samples however far it reaches (:func:`cone_steps`). The step depends on t only, so
one sequence of boundaries serves every ray. :class:`ContractedOccupancyGrid` keeps Instant-NGP's occupancy rule
on a grid over the contracted cube [-2, 2]^3: the scene box keeps its resolution, and beyond it cells grow with
distance (a cell at distance r spans about 4 r^2 / resolution scene units radially), as the steps do.
"""

from __future__ import annotations

import math

import torch

from ..ops.precision import wide_dtype
from .contraction import NORMS, Norm, contract, uncontract
from .estimator import OccupancyEstimator, Window, WindowFn
from .march_kernel import marching_kernel, occupied_window

MAX_STEPS = 10**8  # refuse step sequences longer than this (they would not fit in memory anyway)


def _first(mask: torch.Tensor) -> int:
    """Index of the first True of a 1D bool tensor (which must hold one)."""
    if not bool(mask.any()):
        raise RuntimeError("cone_steps: internal error, no stopping point among the candidates")
    return int(mask.int().argmax())


def _count(span: float, step: float) -> int:
    n = math.ceil(span / step) + 2  # a margin of two candidates for rounding
    if n > MAX_STEPS:
        raise ValueError(f"cone_steps: more than {MAX_STEPS} steps; raise min_step or cone_angle, or lower far")
    return max(n, 2)


def disparity_steps(t: torch.Tensor, disparity_step: float) -> torch.Tensor:
    """t [...] >= 0 -> [...], the step after t where 1 / t falls by ``disparity_step`` = d (uniform in disparity,
    mip-NeRF 360's spacing): t^2 d / (1 - d t); infinite from t = 1 / d on (zero for d = 0)."""
    d = disparity_step
    return torch.where(d * t < 1, t * t * d / (1 - d * t).clamp_min(1e-30), math.inf)


def _disparity_step(t: float, disparity_step: float) -> float:
    return float(disparity_steps(torch.tensor(t, dtype=torch.float64), disparity_step))


def cone_steps(near: float, far: float, cone_angle: float, min_step: float, max_step: float,
               disparity_step: float = 0.0) -> torch.Tensor:
    """The boundaries t_0 = near < t_1 < ... < t_K = far, t_{k+1} = min(t_k + step(t_k), far) with
    step(t) = min(max(min_step, t * cone_angle, t^2 d / (1 - d t)), max_step), d = ``disparity_step``: a float64
    tensor [K + 1] (on the CPU).

    Near the start the steps are Instant-NGP's cone-angle steps (min_step, then growing by cone_angle); with d > 0
    they become uniform in disparity, 1 / t_{k+1} = 1 / t_k - d, once that is the larger step (mip-NeRF 360's
    spacing, which is uniform in its contracted space far away), and reach far (or infinity) in about
    1 / (d t) steps from t. Computed by phases, not by a loop: steps of min_step, the geometric stretch
    t_{k+1} = t_k (1 + cone_angle), the disparity stretch, then steps of max_step; each phase ends where the
    next one's step is the larger (the three are increasing in t, so the order is fixed).
    """
    values = (near, far, cone_angle, min_step, max_step, disparity_step)
    if not all(math.isfinite(v) for v in values) or not (0 <= near < far and cone_angle >= 0 and disparity_step >= 0
                                                         and 0 < min_step <= max_step):
        raise ValueError(f"cone_steps: need finite 0 <= near < far, cone_angle >= 0, disparity_step >= 0, "
                         f"0 < min_step <= max_step; got near={near}, far={far}, cone_angle={cone_angle}, "
                         f"min_step={min_step}, max_step={max_step}, disparity_step={disparity_step}")
    f64, d = torch.float64, disparity_step
    parts, t = [torch.tensor([near], dtype=f64)], near

    def disparity(ts: torch.Tensor) -> torch.Tensor:
        return disparity_steps(ts, d)

    def phase(ts: torch.Tensor, over: torch.Tensor) -> float:
        """Keep ts up to the first one where ``over`` (the next phase takes over) or ts >= far; -> that t."""
        stop = _first(over | (ts >= far))
        parts.append(ts[:stop + 1])
        return float(ts[stop])

    if min_step >= max(t * cone_angle, _disparity_step(t, d)):  # fixed steps of min_step
        end = min(far, min_step / cone_angle if cone_angle > 0 else far)
        if d > 0:  # where t^2 d / (1 - d t) = min_step
            end = min(end, (math.sqrt((min_step * d) ** 2 + 4 * d * min_step) - min_step * d) / (2 * d))
        ts = near + torch.arange(1, _count(end - near, min_step) + 1, dtype=f64) * min_step
        t = phase(ts, (ts * cone_angle >= min_step) | (disparity(ts) >= min_step))
    if t < far and t * cone_angle >= _disparity_step(t, d) and t * cone_angle <= max_step:  # geometric
        growth = math.log1p(cone_angle)
        n = _count(math.log(min(far, max_step / cone_angle) / t), growth)
        ts = t * torch.exp(torch.arange(1, n + 1, dtype=f64) * growth)
        t = phase(ts, (ts * cone_angle > max_step) | (disparity(ts) > ts * cone_angle))
    if t < far and d > 0 and _disparity_step(t, d) <= max_step:  # uniform in disparity, up to far or infinity
        s = 1 / t - d * torch.arange(1, _count(1 / t - 1 / far, d) + 1, dtype=f64)
        ts = torch.where(s > 1 / far, 1 / s.clamp_min(1e-300), math.inf)
        t = phase(ts, disparity(ts) > max_step)
    if t < far:  # fixed steps of max_step
        ts = t + torch.arange(1, _count(far - t, max_step) + 1, dtype=f64) * max_step
        parts.append(ts[:_first(ts >= far) + 1])
    steps = torch.cat(parts)
    return steps.clamp_max_(far)


class ContractedOccupancyGrid(OccupancyEstimator):
    """An occupancy grid of ``resolution``^3 cells over the contracted cube [-2, 2]^3, for unbounded scenes.

    World points x map to grid space by y = contract((x - center) / scale, norm): ``center`` [3] and ``scale`` (half
    the scene box's extent) put the scene box at [-1, 1]^3, and contraction fits everything beyond it in the shell
    up to norm 2 (L-inf fills the cube; L2 the ball inside it). The state (as every
    :class:`.estimator.OccupancyEstimator`'s, plus ``center`` and ``scale``) is in buffers, so a saved model renders
    as trained. An update weighs density by :meth:`step_size_at`.

    Rays are sampled on the :func:`cone_steps` boundaries from ``near`` to ``far`` (t in world units along unit
    directions; defaults 0.05 scale and 1e3 scale); ``min_step`` defaults to sqrt(3) / 1024 scale (Instant-NGP's
    1024 steps across a unit cube's diagonal), ``cone_angle`` to 1/256, ``max_step`` to no limit (1e10) and
    ``disparity_step`` to min_step / scale^2: far out, a step then spans about min_step / scale of contracted space,
    as min_step does inside the box (contraction maps distance r to 2 - scale / r), so about scale / min_step
    steps reach from the box to infinity (cone-angle steps would take 1 / cone_angle per factor e of distance).
    """

    def __init__(self, center: torch.Tensor | tuple[float, float, float] = (0.0, 0.0, 0.0), scale: float = 1.0,
                 resolution: int = 128, norm: Norm = "linf", threshold: float = 0.01, decay: float = 0.95,
                 warmup_steps: int = 256, cone_angle: float = 1 / 256, min_step: float | None = None,
                 max_step: float = 1e10, near: float | None = None, far: float | None = None,
                 disparity_step: float | None = None) -> None:
        if norm not in NORMS:
            raise ValueError(f"ContractedOccupancyGrid: norm must be one of {', '.join(NORMS)}, got {norm!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"ContractedOccupancyGrid: scale must be a positive number, got {scale}")
        super().__init__(torch.tensor([[-2.0] * 3, [2.0] * 3]), resolution, threshold, decay, warmup_steps)
        self.norm = norm
        self.register_buffer("center", torch.as_tensor(center, dtype=torch.float32).reshape(3).clone())
        self.register_buffer("scale", torch.tensor(float(scale)))
        self.cone_angle, self.max_step = float(cone_angle), float(max_step)
        self.min_step = math.sqrt(3) / 1024 * scale if min_step is None else float(min_step)
        self.near = 0.05 * scale if near is None else float(near)
        self.far = 1e3 * scale if far is None else float(far)
        self.disparity_step = self.min_step / scale**2 if disparity_step is None else float(disparity_step)
        self.steps()  # checks the settings

    def steps(self) -> torch.Tensor:
        """The shared boundaries: :func:`cone_steps` over [near, far], then one more step of the last length
        (which only ends a jittered ray's last interval; float64)."""
        t = cone_steps(self.near, self.far, self.cone_angle, self.min_step, self.max_step, self.disparity_step)
        return torch.cat([t, 2 * t[-1:] - t[-2:-1]])

    def normalized_distance(self, t: torch.Tensor) -> torch.Tensor:
        """t [...] (distance along unit-direction rays) -> [...] s in [0, 1]: the position among the :meth:`steps`
        boundaries, linear within each step (boundary k at k / K), so every step spans the same s, as mip-NeRF
        360's s spaces its samples (the distortion loss's s)."""
        bounds = self.steps().to(t.device, wide_dtype(t.device))
        wide = t.to(bounds.dtype)
        k = (torch.searchsorted(bounds, wide.reshape(-1), right=True) - 1).clamp(0, len(bounds) - 2).view(t.shape)
        within = (wide - bounds[k]) / (bounds[k + 1] - bounds[k])
        return ((k + within.clamp(0, 1)) / (len(bounds) - 1)).to(t.dtype)

    def to_grid(self, points: torch.Tensor) -> torch.Tensor:
        """points: [..., 3] world -> [..., 3] contracted points (norm < 2)."""
        return contract((points - self.center) / self.scale, self.norm)

    def step_size_at(self, points: torch.Tensor) -> torch.Tensor:
        """points: [P, 3] world -> [P], the step a ray takes there (:func:`cone_steps`' rule, with the distance
        from ``center`` for t), at most ``far`` (the last interval ends there)."""
        t = (points - self.center).norm(dim=-1)
        step = torch.maximum((t * self.cone_angle).clamp_min(self.min_step), disparity_steps(t, self.disparity_step))
        return step.clamp_max(min(self.max_step, self.far))

    def _cell_points(self, cells: torch.Tensor, jitter: torch.Tensor) -> torch.Tensor:
        y = -2 + (self.cell_coordinates(cells) + jitter) / self.resolution * 4
        r = y.norm(dim=-1, keepdim=True) if self.norm == "l2" else y.abs().amax(-1, keepdim=True)
        y = y * ((2 - 1e-6) / r).clamp(max=1)  # strictly inside the contracted ball (cube) of radius 2
        return uncontract(y.double(), self.norm).to(y.dtype) * self.scale + self.center

    def _mean_opacity(self) -> float:
        """Over the cells of the scene box only (|y| < 1), as Instant-NGP takes the mean over its first cascade:
        beyond the box a cell's opacity is density * a step that grows with distance, so a mean over every cell
        sits far above the box's (an untrained field: density about 1, so 0.007 in the box, thousands far out)
        and the threshold min(0.01, mean) would empty the whole box at the first update."""
        r = self.resolution
        centres = (torch.arange(r, device=self.opacity.device) + 0.5) / r * 4 - 2  # contracted cell centres
        inside = centres.abs() < 1
        box = self.opacity.view(r, r, r)[inside][:, inside][:, :, inside]
        return float(box.mean()) if box.numel() else float(self.opacity.mean())

    def _cell_of(self, points: torch.Tensor) -> torch.Tensor:
        """points: [..., 3] world -> [..., 3] cell coordinates of their contracted points (:func:`contract`, fused:
        it runs on every sample). Points beyond float32's reach of norm 2 go to the outermost cells, so every
        finite point has a cell."""
        x = (points - self.center) / self.scale
        r = x.norm(dim=-1, keepdim=True) if self.norm == "l2" else x.abs().amax(-1, keepdim=True)
        r = r.clamp_min(1)
        y = x * ((2 - 1 / r) / r)  # contract: x where r <= 1, else (2 - 1/r) x / r
        return ((y + 2) * (self.resolution / 4)).long().clamp_(0, self.resolution - 1)  # y + 2 >= 0: long = floor

    def occupied_at(self, points: torch.Tensor) -> torch.Tensor:
        """points: [P, 3] world -> [P] bool (every point of space has a cell)."""
        r = self.resolution
        ijk = self._cell_of(points)
        return self.occupied[(ijk * ijk.new_tensor([r * r, r, 1])).sum(-1)]

    def _window(self, origins: torch.Tensor, directions: torch.Tensor, near: torch.Tensor, far: torch.Tensor,
                offset: torch.Tensor | None, first: torch.Tensor, count: int, bounds: torch.Tensor
                ) -> Window:
        """Intervals first .. first + count - 1 of rays [A]: [T(k + offset), T(k + 1 + offset)], T the piecewise
        linear map through ``bounds`` (offset None: 0), kept where the start is in [near, far) and the midpoint in
        an occupied cell; payload (starts, ends)."""
        k = first[:, None] + torch.arange(count, device=first.device)  # [A, W]
        n_intervals = len(bounds) - 2  # the last boundary only ends the intervals of jittered rays
        k_safe = k.clamp_max(n_intervals - 1)
        starts, ends = bounds[k_safe], bounds[k_safe + 1]
        if offset is not None:
            lengths = bounds[1:] - bounds[:-1]
            starts = starts + offset[:, None] * lengths[k_safe]
            ends = ends + offset[:, None] * lengths[k_safe + 1]
        points = origins[:, None] + ((starts + ends) / 2)[..., None] * directions[:, None]
        keep = (k < n_intervals) & (starts >= near[:, None]) & (starts < far[:, None])
        keep &= self.occupied_at(points.reshape(-1, 3)).view(k.shape)
        rows, j = keep.nonzero(as_tuple=True)
        starts, ends = starts[rows, j], ends[rows, j]
        following = (first + count).clamp_max(n_intervals - 1)
        next_start = bounds[following] + (0 if offset is None else offset * (bounds[following + 1] - bounds[following]))
        more = (first + count < n_intervals) & (next_start < far)
        return rows, points[rows, j], ends - starts, (starts, ends), first + count, more

    def _marching(self, origins: torch.Tensor, directions: torch.Tensor, jitter: bool,
                  generator: torch.Generator | None, clip: tuple[torch.Tensor, torch.Tensor] | None
                  ) -> tuple[torch.Tensor, torch.Tensor, WindowFn]:
        """Each ray's intervals on the :func:`cone_steps` boundaries whose start lies in [near, far) (clip's, if
        tighter): [t_k, t_{k+1}], or with ``jitter`` shifted by a uniform fraction u in [0, 1) of their length
        (training), [t_k + u (t_{k+1} - t_k), t_{k+1} + u (t_{k+2} - t_{k+1})], still contiguous; an interval is
        kept where its midpoint lies in an occupied cell."""
        n, device, dtype = len(origins), origins.device, origins.dtype
        wide = self.steps().to(device, wide_dtype(device))
        bounds = wide.to(dtype)  # t in the rays' type (float32 keeps a relative 6e-8, steps grow by cone_angle)
        near = torch.full((n,), self.near, dtype=wide.dtype, device=device)
        far = torch.full((n,), self.far, dtype=wide.dtype, device=device)
        if clip is not None:
            near = torch.maximum(near, clip[0].reshape(-1).to(near))
            far = torch.minimum(far, clip[1].reshape(-1).to(far))
        first = (torch.searchsorted(wide, near, right=True) - 1).clamp_min(0)
        near, far = near.to(dtype), far.to(dtype)
        offset = torch.rand(n, device=device, dtype=dtype, generator=generator) if jitter else None
        alive = (far > near).nonzero().squeeze(1)
        kernel = marching_kernel(device, dtype)
        grid = {"bounds": bounds, "step": 0.0, "occupied": self.occupied, "resolution": self.resolution,
                "kind": self.norm, "a": self.center.tolist(), "b": [float(self.scale)] * 3}

        def window_of(alive: torch.Tensor, first: torch.Tensor, count: int) -> Window:
            if kernel is None:
                return self._window(origins[alive], directions[alive], near[alive], far[alive],
                                    None if offset is None else offset[alive], first, count, bounds)
            rows, starts, ends, points, following, more = occupied_window(
                kernel, origins[alive], directions[alive], near[alive], far[alive],
                near.new_zeros(len(alive)) if offset is None else offset[alive], first, count, grid)
            return rows, points, ends - starts, (starts, ends), following, more

        return alive, first, window_of
