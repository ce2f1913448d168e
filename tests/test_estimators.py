"""The occupancy grids' one interface (inr_enc/nerf/estimator.py): both grids are refreshed and sampled through the
same calls, and give the samples and weights they gave before the interface (commit 8e693f1), checked two ways:
against fingerprints recorded from that commit, and against a slow per-ray loop in float64 that marches each ray
step by step through the grid's occupancy."""

import inspect
import math

import pytest
import torch
from test_unbounded import loop_steps

from inr_enc.nerf.contraction import contract
from inr_enc.nerf.estimator import OccupancyEstimator
from inr_enc.nerf.occupancy import OccupancyGrid
from inr_enc.nerf.unbounded import ContractedOccupancyGrid
from inr_enc.nerf.volume_rendering import render_weights

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

N_RAYS, STEP = 48, 0.03
CASES = {  # sample's options (generator seed 2 for the jitter)
    "render": {},
    "train": {"jitter": True, "early_stop_eps": 1e-3, "alpha_threshold": 1e-3, "window": 3, "clip": True},
    "occupied": {"jitter": True, "density": False},
}
# Recorded at commit 8e693f1 (OccupancyGrid.update took opacity = density * STEP, sample took STEP after the
# directions): (samples, sum of ray index^2, sum of t_starts, of t_ends, of weights, of weight * midpoint).
RECORDED = {
    ("box", "render"): (151, 139740, 369.91924726963043, 374.4492770433426, 13.910799669890366, 33.544773137236376),
    ("box", "train"): (117, 107503, 279.0475664138794, 282.55758929252625, 12.906691396125098, 30.790401795120516),
    ("box", "occupied"): (252, 239895, 645.2564661502838, 652.8165173530579, 13.90205310935971, 33.54358028348862),
    ("contracted", "render"): (185, 169535, 812.3011091798544, 971.2131400629878, 39.231808754622534,
                               270.7919471789083),
    ("contracted", "train"): (85, 72985, 344.1285504847765, 395.8709491342306, 18.097859128567507,
                              81.06447525022949),
    ("contracted", "occupied"): (417, 342277, 27719.05081588775, 88455.21155724674, 37.270327030424525,
                                 248.5556016058543),
}


def density(points):
    """Piecewise constant (so float32 and float64 marching see the same values): an opaque ball, a shell 6 to 9
    units out, and faint fog where x > 0."""
    r = (points - torch.tensor([0.2, -0.1, 0.3], dtype=points.dtype)).norm(dim=-1)
    return (torch.where(r < 0.4, 30.0, 0.0) + torch.where((r > 6) & (r < 9), 5.0, 0.0)
            + 0.05 * (points[:, 0] > 0)).to(points.dtype)


def trained_grid(kind):
    """A grid after five updates (two of warm-up, three of random cells) with fixed seeds."""
    if kind == "box":
        grid = OccupancyGrid(torch.tensor([[-1.0, -1.2, -0.9], [1.1, 1.0, 1.0]]), 16, warmup_steps=2, step_size=STEP)
    else:
        grid = ContractedOccupancyGrid((0.1, 0.0, -0.1), 1.1, 16, "linf", warmup_steps=2, min_step=STEP)
    g = torch.Generator().manual_seed(0)
    for step in range(5):
        grid.update(step, density, generator=g)
    return grid


def rays():
    g = torch.Generator().manual_seed(1)
    origins = torch.nn.functional.normalize(torch.randn(N_RAYS, 3, generator=g), dim=-1) * 2.5
    towards = 0.6 * (torch.rand(N_RAYS, 3, generator=g) - 0.5) - origins / 2.5  # mostly at the ball
    directions = torch.nn.functional.normalize(towards, dim=-1)
    clip = (torch.rand(N_RAYS, generator=g), 2 + 10 * torch.rand(N_RAYS, generator=g))
    return origins, directions, clip


def sampled(grid, case):
    """grid.sample for a case -> (ray_indices, t_starts, t_ends, weights) and the per-ray offsets it drew."""
    origins, directions, clip = rays()
    options = dict(CASES[case])
    marched = options.pop("density", True)
    options["clip"] = clip if options.get("clip") else None
    rays_, starts, ends = grid.sample(origins, directions, density if marched else None,
                                      generator=torch.Generator().manual_seed(2), **options)
    mid = origins[rays_] + ((starts + ends) / 2)[:, None] * directions[rays_]
    weights, _ = render_weights(density(mid), ends - starts, rays_, N_RAYS)
    offsets = torch.rand(N_RAYS, generator=torch.Generator().manual_seed(2)).double()  # the same draw
    return (rays_, starts, ends, weights), offsets if options.get("jitter") else None


def box_intervals(grid, origin, direction, near, far, offset):
    """The box grid's steps of one ray (float64): t = near + (k + offset) step from where the ray enters the
    occupied box, each [t - step / 2, t + step / 2], while t < far; with the cell of each midpoint."""
    box = grid.bounds.double()
    with torch.no_grad():
        t0, t1 = (box[0] - origin) / direction, (box[1] - origin) / direction
    enter, leave = max(float(torch.minimum(t0, t1).max()), 0.0, near), min(float(torch.maximum(t0, t1).min()), far)
    lo, hi, r = grid.aabb[0].double(), grid.aabb[1].double(), grid.resolution
    k = 0
    while (t := enter + (k + (0.5 if offset is None else offset)) * grid.step_size) < leave:
        cell = torch.floor((origin + t * direction - lo) / (hi - lo) * r).long()
        yield t - grid.step_size / 2, t + grid.step_size / 2, cell
        k += 1


def contracted_intervals(grid, origin, direction, near, far, offset):
    """The contracted grid's intervals of one ray (float64), on the cone-angle/disparity boundaries of the
    one-step-at-a-time recursion (one more step of the last length after far), shifted by offset of their length,
    whose start lies in [near, far); with the cell of each midpoint through contract."""
    t = loop_steps(grid.near, grid.far, grid.cone_angle, grid.min_step, grid.max_step, grid.disparity_step)
    t = torch.cat([t, 2 * t[-1:] - t[-2:-1]]).tolist()
    near, far, u = max(near, grid.near), min(far, grid.far), 0.0 if offset is None else offset
    for k in range(len(t) - 2):
        start, end = t[k] + u * (t[k + 1] - t[k]), t[k + 1] + u * (t[k + 2] - t[k + 1])
        if near <= start < far:
            y = contract((origin + (start + end) / 2 * direction - grid.center.double()) / float(grid.scale),
                         grid.norm)
            yield start, end, torch.floor((y + 2) / 4 * grid.resolution).long().clamp(0, grid.resolution - 1)


def loop_reference(grid, kind, case, offsets):
    """Every ray marched front to back one step at a time (float64) -> per ray [(t_start, t_end, weight)]."""
    origins, directions, clip = rays()
    options = CASES[case]
    eps, threshold = options.get("early_stop_eps", 1e-4), options.get("alpha_threshold", 0.0)
    marched = options.get("density", True)  # else every step in an occupied cell is kept
    max_depth = -math.log(eps) if marched else math.inf
    intervals = box_intervals if kind == "box" else contracted_intervals
    r, out = grid.resolution, []
    for ray in range(N_RAYS):
        o, d = origins[ray].double(), directions[ray].double()
        near, far = (float(clip[0][ray]), float(clip[1][ray])) if options.get("clip") else (0.0, math.inf)
        depth, kept = 0.0, []
        for start, end, cell in intervals(grid, o, d, near, far, None if offsets is None else float(offsets[ray])):
            inside = bool(((cell >= 0) & (cell < r)).all())
            if not inside or not bool(grid.occupied[(cell[0] * r + cell[1]) * r + cell[2]]):
                continue
            tau = float(density(o[None] + (start + end) / 2 * d[None])[0]) * (end - start)
            if not marched or depth < max_depth and 1 - math.exp(-tau) > threshold:
                kept.append((start, end, tau))
            depth += tau
            if depth >= max_depth:
                break
        before, rendered = 0.0, []
        for start, end, tau in kept:  # weights over the kept samples, as the renderer sees them
            rendered.append((start, end, math.exp(-before) * (1 - math.exp(-tau))))
            before += tau
        out.append(rendered)
    return out


@pytest.mark.parametrize("kind", ["box", "contracted"])
@pytest.mark.parametrize("case", list(CASES))
def test_samples_and_weights_are_those_of_8e693f1_and_of_a_step_by_step_loop(kind, case):
    grid = trained_grid(kind)
    (rays_, starts, ends, weights), offsets = sampled(grid, case)
    got = (len(rays_), int((rays_ ** 2).sum()), float(starts.double().sum()), float(ends.double().sum()),
           float(weights.double().sum()), float((weights.double() * (starts + ends).double() / 2).sum()))
    recorded = RECORDED[kind, case]
    assert got[:2] == recorded[:2]
    assert got[2:] == pytest.approx(recorded[2:], rel=1e-6)
    expected = loop_reference(grid, kind, case, offsets)
    assert torch.bincount(rays_, minlength=N_RAYS).tolist() == [len(e) for e in expected]
    flat = torch.tensor([sample for e in expected for sample in e], dtype=torch.float64).reshape(-1, 3)
    torch.testing.assert_close(torch.stack([starts, ends, weights], -1).double(), flat, rtol=1e-5, atol=1e-5)


def test_both_grids_share_update_and_sample_without_overrides():
    """One signature each for update and sample (nerfacc's estimators share one sampling signature): both grids
    inherit them from OccupancyEstimator, and an update weighs density by the grid's own step."""
    for cls in (OccupancyGrid, ContractedOccupancyGrid):
        assert issubclass(cls, OccupancyEstimator)
        assert cls.update is OccupancyEstimator.update and cls.sample is OccupancyEstimator.sample
    parameters = list(inspect.signature(OccupancyEstimator.sample).parameters)
    assert parameters[:4] == ["self", "origins", "directions", "density_fn"]
    box = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), 4, warmup_steps=1, step_size=0.25)
    box.update(0, lambda x: torch.full((len(x), 1), 2.0))
    assert box.opacity.tolist() == [0.5] * 64  # density 2 * step 0.25 in every cell
    assert OccupancyGrid(torch.tensor([[0.0] * 3, [2.0, 2.0, 1.0]])).step_size == pytest.approx(3 / 1024)
