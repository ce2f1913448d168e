"""Cone-angle stepping and the occupancy grid over contracted space (inr_enc/nerf/unbounded.py)."""

import math

import pytest
import torch

from inr_enc.nerf.contraction import contract
from inr_enc.nerf.occupancy import OccupancyGrid
from inr_enc.nerf.unbounded import ContractedOccupancyGrid, cone_steps
from inr_enc.nerf.volume_rendering import render_weights

TYPICAL = (0.05, 1000.0, 1 / 256, math.sqrt(3) / 1024, 1e10)  # 2214 boundaries: 2213 steps from 0.05 to 1000
# (227 of min_step up to t = 0.443, then 1986 growing by 1/256 each)
DISPARITY = (*TYPICAL, math.sqrt(3) / 1024)  # the grid's default: 913 boundaries (the last 1 / (d t) from t = 2.3)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def loop_steps(near, far, cone_angle, min_step, max_step, disparity_step=0.0):
    """The recursion, one step at a time, with the disparity step written as 1 / t falling by d (the reference)."""
    t = [near]
    while t[-1] < far:
        x = t[-1]
        disparity = 0.0 if x == 0 else math.inf if disparity_step * x >= 1 else 1 / (1 / x - disparity_step) - x
        t.append(min(x + min(max(x * cone_angle, min_step, disparity), max_step), far))
    return torch.tensor(t, dtype=torch.float64)



def unit(v):
    return torch.nn.functional.normalize(v, dim=-1)


@pytest.mark.parametrize("settings", [TYPICAL, DISPARITY, (0.0, 10.305, 0.0, 0.01, 0.01),
                                      (0.1, 500.0, 1 / 128, 0.01, 1.0),
                                      (0.3, 40.7, 0.1, 0.05, 2.0), (2.0, 3.0, 0.5, 1e-3, 0.3),
                                      (0.1, 500.0, 1 / 128, 0.01, 1.0, 0.01), (0.3, 40.7, 0.1, 0.05, 2.0, 0.3),
                                      (0.0, 100.0, 0.0, 0.01, 5.0, 0.02), (0.5, 1e4, 0.01, 1e-3, 1e10, 1e-5)])
def test_cone_steps_follow_the_recursion(settings):
    near, far, cone, lo, hi = settings[:5]
    t, expected = cone_steps(*settings), loop_steps(*settings)
    assert t.dtype == torch.float64 and t.dim() == 1 and len(t) == len(expected)
    assert torch.allclose(t, expected, rtol=1e-10, atol=1e-12)
    assert t[0] == near and t[-2] < far == t[-1] and bool((t[1:] > t[:-1]).all())
    steps = t[1:-1] - t[:-2]  # the last step ends at far
    if len(settings) == 5:
        assert torch.allclose(steps, (t[:-2] * cone).clamp(lo, hi), rtol=1e-8)
    else:  # uniform in disparity where that step is the largest (and below max_step)
        d = settings[5]
        disparity = torch.where(d * t[:-2] < 1, t[:-2] ** 2 * d / (1 - d * t[:-2]), math.inf)
        rule = (disparity > (t[:-2] * cone).clamp_min(lo)) & (disparity <= hi)
        assert torch.allclose((1 / t[:-2] - 1 / t[1:-1])[rule], torch.tensor(d, dtype=torch.float64), rtol=1e-8)
    expected_lengths = {TYPICAL: 2214, DISPARITY: 913}
    if settings in expected_lengths:
        assert len(t) == expected_lengths[settings]


def test_disparity_steps_reach_infinity_in_about_one_over_d_t_steps():
    """From t = 1 with d = 0.01, 1 / t falls by d per step: 100 steps to infinity, so to far = 1e6 in 100."""
    t = cone_steps(1.0, 1e6, 0.0, 1e-6, 1e10, 0.01)
    assert len(t) == 101 and t[-1] == 1e6 and torch.allclose(1 / t[:-1], 1 - 0.01 * torch.arange(100.0, dtype=t.dtype))


def test_cone_steps_reject_bad_settings():
    for bad in [(1.0, 1.0, 0.0, 0.1, 0.1), (-1.0, 1.0, 0.0, 0.1, 0.1), (0.0, 1.0, -0.1, 0.1, 0.1),
                (0.0, 1.0, 0.0, 0.0, 0.1), (0.0, 1.0, 0.0, 0.2, 0.1), (0.0, math.inf, 0.0, 0.1, 0.1),
                (0.0, 1e12, 0.0, 1e-3, 1e-3), (0.0, 1.0, 0.0, 0.1, 0.1, -0.1), (0.0, 1.0, 0.0, 0.1, 0.1, math.nan)
                ]:  # (0, 1e12, ...): 1e15 steps
        with pytest.raises(ValueError):
            cone_steps(*bad)


def test_the_grid_maps_the_scene_box_and_the_far_field():
    grid = ContractedOccupancyGrid(center=(1.0, 2.0, 3.0), scale=2.0, resolution=16)
    corners = torch.tensor([[1.0, 2.0, 3.0]]) + 2.0 * torch.tensor([[-1.0, -1, -1], [1, 1, 1], [1, -1, 0.5]])
    assert torch.allclose(grid.to_grid(corners), (corners - torch.tensor([1.0, 2, 3])) / 2)
    far = torch.tensor([[1.0, 2.0, 3.0]]) + unit(torch.randn(100, 3, generator=torch.Generator().manual_seed(0))) * 200
    y = grid.to_grid(far)
    assert bool((y.abs().amax(-1) > 1.98).all() & (y.abs().amax(-1) < 2).all())  # distance 100 scales: 2 - 1/100
    huge = torch.tensor([[1e6, 0, 0], [0, -1e12, 0], [3e38, 3e38, -3e38], [1.0, 2.0, 3.0]])
    cells = grid._cell_of(huge)
    assert bool(((cells >= 0) & (cells < 16)).all())
    assert grid.occupied_at(huge).tolist() == [True] * 4  # all occupied until the first update
    grid.occupied.zero_()
    grid.occupied[(cells[0] * 16 + cells[0, 1]) * 16 + cells[0, 2]] = True
    assert grid.occupied_at(huge).tolist() == [True, False, False, False]


def test_cells_agree_with_contract_and_update_points_land_in_their_cells():
    g = torch.Generator().manual_seed(1)
    for norm in ("l2", "linf"):
        grid = ContractedOccupancyGrid(center=(0.5, 0.0, -0.5), scale=3.0, resolution=32, norm=norm)
        x = torch.randn(20000, 3, generator=g) * torch.logspace(-1, 3, 20000)[:, None]
        via_contract = torch.floor((contract((x - grid.center) / 3.0, norm) + 2) / 4 * 32).long()
        assert (grid._cell_of(x) == via_contract).all(-1).float().mean() > 0.999  # up to rounding at cell edges
        cells = torch.randint(32**3, (20000,), generator=g)
        if norm == "l2":  # cells that meet the contracted ball
            centre = (grid.cell_coordinates(cells) + 0.5) / 32 * 4 - 2
            cells = cells[centre.norm(dim=-1) < 2 - 4 / 32 * math.sqrt(3) / 2]
        points = grid._cell_points(cells, torch.rand(len(cells), 3, generator=g))
        assert bool(torch.isfinite(points).all())
        assert (grid._cell_of(points) == grid.cell_coordinates(cells)).all(-1).float().mean() > 0.999


def test_all_occupied_grid_gives_the_cone_steps_intervals():
    grid = ContractedOccupancyGrid(resolution=8)  # all occupied before any update
    g = torch.Generator().manual_seed(2)
    origins, directions = torch.randn(5, 3, generator=g), unit(torch.randn(5, 3, generator=g))
    reference = loop_steps(*DISPARITY).float()
    rays, starts, ends = grid.sample(origins, directions)
    assert rays.dtype == torch.int64 and bool((rays[1:] >= rays[:-1]).all())
    assert torch.bincount(rays, minlength=5).tolist() == [len(reference) - 1] * 5
    for ray in range(5):
        assert torch.allclose(starts[rays == ray], reference[:-1], rtol=1e-6)
        assert torch.allclose(ends[rays == ray], reference[1:], rtol=1e-6)
    assert torch.allclose(ends - starts, (reference[1:] - reference[:-1]).repeat(5), rtol=1e-3, atol=1e-6)
    again = grid.sample(origins, directions, window=7)
    assert all(torch.equal(a, b) for a, b in zip(again, (rays, starts, ends)))
    # per-ray clips select the intervals starting in [near, far)
    near, far = torch.tensor([1.0, 0.0, 5.0, 0.3, 2.0]), torch.tensor([5.0, 0.5, 1e9, 0.2, 2.5])
    rays, starts, ends = grid.sample(origins, directions, clip=(near, far))
    for ray in range(5):
        lo, hi = max(float(near[ray]), 0.05), min(float(far[ray]), 1000.0)
        inside = (reference[:-1] >= lo) & (reference[:-1] < hi)
        assert torch.equal(starts[rays == ray], reference[:-1][inside])
    # jitter: shifted intervals, contiguous, in [near, far)
    rays, starts, ends = grid.sample(origins, directions, jitter=True, generator=g)
    for ray in range(5):
        s, e = starts[rays == ray], ends[rays == ray]
        assert torch.allclose(s[1:], e[:-1]) and s[0] >= 0.05 and s[-1] < 1000 and len(s) >= len(reference) - 2
        assert bool((e > s).all())
    assert not torch.allclose(starts[rays == 0][:50], reference[:50])


def solid_sphere_and_sky(points):
    """An opaque ball of radius 0.5 and an opaque sky 50 to 60 units out. The sky's cells in a 32^3 grid span
    r = 8 to infinity, and a random point in one falls in the shell with probability 3 to 5 % per update; the
    sky's opacity (about 200) keeps a cell marked for about 200 updates of decay 0.95, so all are (a sky of
    density 10 lasts only 100 updates and some 8 % of its cells are unmarked at any time)."""
    r = points.norm(dim=-1)
    return torch.where(r < 0.5, 1000.0, 0.0) + torch.where((r > 50) & (r < 60), 1000.0, 0.0)


def sphere_entry(origins, directions, radius=0.5):
    b = (origins * directions).sum(-1)
    return -b - torch.sqrt(b * b - (origins.square().sum(-1) - radius**2))


def test_a_sphere_and_a_sky():
    grid = ContractedOccupancyGrid(resolution=32, warmup_steps=10**6)
    g = torch.Generator().manual_seed(3)
    for step in range(200):
        grid.update(step, solid_sphere_and_sky, generator=g)
    n = 64
    at = unit(torch.randn(n, 3, generator=g)) * 3.0  # cameras 3 units out, looking at the sphere
    towards = unit(-at + 0.04 * at.norm(dim=-1, keepdim=True) * torch.randn(n, 3, generator=g))
    away = unit(at)  # and looking out to the sky
    origins, directions = torch.cat([at, at]), torch.cat([towards, away])
    rays, starts, ends = grid.sample(origins, directions, solid_sphere_and_sky)
    mid = (starts + ends) / 2
    sigma = solid_sphere_and_sky(origins[rays] + mid[:, None] * directions[rays])
    weights, _ = render_weights(sigma, ends - starts, rays, 2 * n)
    total = torch.zeros(2 * n).index_add_(0, rays, weights)
    assert bool((total > 0.99).all())
    entry = sphere_entry(at, towards)
    assert bool(torch.isfinite(entry).all())  # every such ray meets the sphere
    for ray in range(n):
        heavy = (rays == ray) & (weights > 1e-2)
        first = heavy.nonzero()[0, 0]
        assert abs(float(mid[first] - entry[ray])) <= float(ends[first] - starts[first])
    sky = rays >= n
    assert float(weights[sky & (mid > 47) & (mid < 58)].sum()) > 0.99 * n  # the shell is 47 .. 57 units away
    counts = torch.bincount(rays, minlength=2 * n).float()
    occupied = torch.bincount(grid.sample(origins, directions)[0], minlength=2 * n).float()  # no early stop
    # 1 sample per ray with early termination (each is opaque); without, about 1200 in occupied cells (of 2213
    # cone steps): the sky's cells reach from r = 8 to infinity, so all steps past r = 8 in its directions count
    print(f"samples per ray: sphere {counts[:n].mean():.1f} ({occupied[:n].mean():.0f} occupied), "
          f"sky {counts[n:].mean():.1f} ({occupied[n:].mean():.0f} occupied)")
    assert counts.max() < 10 and occupied.max() < 1400
    empty = ContractedOccupancyGrid(resolution=32)
    empty.update(0, lambda x: torch.zeros(len(x)))
    assert len(empty.sample(origins, directions, solid_sphere_and_sky)[0]) == 0
    assert len(empty.sample(origins, directions)[0]) == 0


def test_early_termination_and_alpha_threshold_match_a_front_to_back_loop():
    grid = ContractedOccupancyGrid(resolution=4, far=30.0)  # all occupied

    def density(points):  # an opaque slab at 1 < x < 1.5, thin fog elsewhere
        return torch.where((points[:, 0] > 1) & (points[:, 0] < 1.5), 40.0, 0.2)

    origins = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0], [-3.0, 0.0, 0.0]])
    directions = unit(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.1, 0.0], [-1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    all_rays, all_starts, all_ends = grid.sample(origins, directions)
    for eps, threshold in ((1e-3, 0.0), (1e-4, 0.01)):
        rays, starts, ends = grid.sample(origins, directions, density, early_stop_eps=eps,
                                         alpha_threshold=threshold, window=5)
        for ray in range(4):
            s, e = all_starts[all_rays == ray].double(), all_ends[all_rays == ray].double()
            tau = density(origins[ray].double() + ((s + e) / 2)[:, None] * directions[ray].double()) * (e - s)
            before = torch.cumsum(tau, 0) - tau
            keep = (torch.exp(-before) > eps) & (1 - torch.exp(-tau) > threshold)
            assert torch.allclose(starts[rays == ray].double(), s[keep], rtol=1e-6)
        kept, every = torch.bincount(rays, minlength=4), torch.bincount(all_rays, minlength=4)
        assert bool((kept[[0, 1, 3]] < every[[0, 1, 3]] - 100).all())  # the rays that meet the slab stop there
    # behind the slab: nothing for rays that cross it; the ray pointing away marches through the fog to far
    assert float(ends[rays == 0].max()) < 1.6 and float(ends[rays == 3].max()) < 4.6
    assert float(ends[rays == 2].max()) > 29


def test_state_dict_round_trip_and_bad_settings():
    grid = ContractedOccupancyGrid(center=(0.0, 1.0, 0.0), scale=2.0, resolution=16)
    grid.update(0, solid_sphere_and_sky, generator=torch.Generator().manual_seed(4))
    other = ContractedOccupancyGrid(scale=2.0, resolution=16)
    other.load_state_dict(grid.state_dict())
    assert torch.equal(other.center, grid.center) and torch.equal(other.occupied, grid.occupied)
    origins, directions = torch.zeros(3, 3), unit(torch.randn(3, 3, generator=torch.Generator().manual_seed(5)))
    assert all(torch.equal(a, b) for a, b in zip(grid.sample(origins, directions), other.sample(origins, directions)))
    with pytest.raises(ValueError):
        ContractedOccupancyGrid(norm="l1")
    with pytest.raises(ValueError):
        ContractedOccupancyGrid(scale=0.0)
    with pytest.raises(ValueError):
        ContractedOccupancyGrid(near=2.0, far=1.0)
    for kwargs in ({"window": 0}, {"early_stop_eps": 0.0}, {"alpha_threshold": 1.0}):
        with pytest.raises(ValueError):
            grid.sample(origins, directions, **kwargs)


@pytest.mark.parametrize("grid", [OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), 8, step_size=0.1),
                                  ContractedOccupancyGrid(resolution=8)])
def test_both_grids_refuse_bad_sample_arguments(grid):
    rays = torch.zeros(4, 3), torch.tensor([[1.0, 0.0, 0.0]] * 4)
    for kwargs, message in (({"early_stop_eps": 0.0}, "0 < early_stop_eps < 1"),
                            ({"alpha_threshold": 1.0}, "alpha_threshold < 1"),
                            ({"window": 0}, "window >= 1")):
        with pytest.raises(ValueError, match=message):
            grid.sample(*rays, **kwargs)
    with pytest.raises(ValueError, match=r"must both be \[N, 3\]"):
        grid.sample(torch.zeros(4, 3), torch.zeros(4, 2))


def test_the_occupancy_threshold_reads_the_box_not_the_far_field():
    """An untrained field: density about 1 everywhere (here 1 +- 0.3 in a pattern). Far out a cell's opacity is
    density * a step of up to far, so the mean over every cell is in the thousands and min(0.01, that mean) would
    empty the scene box (opacity about 0.007 there) at the first update; the mean over the box's cells keeps its
    denser half, as a bounded grid would."""
    grid = ContractedOccupancyGrid(resolution=16, min_step=2 * math.sqrt(3) / 512)  # the plugin's step in the box

    def untrained(points):
        return 1 + 0.3 * torch.sin(7 * points).prod(-1).sign()

    grid.update(0, untrained, generator=torch.Generator().manual_seed(4))
    centres = (torch.arange(16) + 0.5) / 16 * 4 - 2
    inside = centres.abs() < 1
    occupied = grid.occupied.view(16, 16, 16)
    box = occupied[inside][:, inside][:, :, inside].float().mean()
    assert 0.3 < float(box) < 0.7, float(box)
    assert float(grid.opacity.mean()) > 100 * 0.01  # the mean over every cell: the box would have been emptied
    assert bool(occupied[~inside][:, ~inside][:, :, ~inside].all())  # far out: all of it


@pytest.mark.parametrize("contracted", [False, True])
def test_sampled_features_are_the_density_pass_at_the_kept_samples(contracted):
    """sample(..., features=True): the same samples, and density_fn's features of exactly the kept ones (what
    the plugin renders from without evaluating the field again)."""
    g = torch.Generator().manual_seed(5)
    box = torch.tensor([[-2.0] * 3, [2.0] * 3])
    grid = ContractedOccupancyGrid(resolution=16) if contracted else OccupancyGrid(box, 16, step_size=0.02)
    grid.update(0, lambda x: solid_sphere_and_sky(x) * 0.01, generator=g)
    origins = unit(torch.randn(32, 3, generator=g)) * 1.5
    directions = unit(-origins + 0.5 * torch.randn(32, 3, generator=g))

    def with_features(points):
        density = solid_sphere_and_sky(points) + 0.3
        return density, torch.stack([density, points.sum(-1)], -1)

    plain = grid.sample(origins, directions, lambda x: with_features(x)[0], alpha_threshold=0.001)
    rays, starts, ends, features = grid.sample(origins, directions, with_features, alpha_threshold=0.001,
                                               features=True)
    assert all(torch.equal(a, b) for a, b in zip(plain, (rays, starts, ends))) and len(rays) > 30
    points = origins[rays] + ((starts + ends) / 2)[:, None] * directions[rays]
    assert features.shape == (len(rays), 2)
    assert torch.allclose(features, with_features(points)[1], atol=1e-4)
    none = grid.sample(origins, -directions * 0 + torch.tensor([0.0, 0.0, 1.0]), with_features,
                       features=True, clip=(torch.zeros(32), torch.zeros(32)))
    assert len(none) == 4 and len(none[0]) == 0 and none[3].numel() == 0


def test_normalized_distance_spaces_the_steps_evenly():
    grid = ContractedOccupancyGrid(scale=2.0, resolution=8)
    bounds = grid.steps()
    k = len(bounds) - 1
    s = grid.normalized_distance(bounds)
    torch.testing.assert_close(s, torch.arange(k + 1, dtype=torch.float64) / k, rtol=0, atol=1e-12)
    middles = grid.normalized_distance((bounds[:-1] + bounds[1:]) / 2)  # halfway through each step
    torch.testing.assert_close(middles, (torch.arange(k, dtype=torch.float64) + 0.5) / k, rtol=0, atol=1e-12)
    far_beyond = grid.normalized_distance(torch.tensor([0.0, 1e12]))  # before near, beyond the last boundary
    assert far_beyond.tolist() == [0.0, 1.0]
    box = OccupancyGrid(torch.tensor([[-1.0, -2.0, -2.0], [1.0, 2.0, 2.0]]))  # diagonal 6
    assert box.normalized_distance(torch.tensor(3.0)).item() == pytest.approx(0.5)
