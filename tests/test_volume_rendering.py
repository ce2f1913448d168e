"""Packed volume rendering and the occupancy grid (inr_enc/nerf) against slow per-ray loops in float64."""

import math

import pytest
import torch

from inr_enc.nerf.occupancy import OccupancyGrid, ray_box_intersection
from inr_enc.nerf.volume_rendering import accumulate, distortion, render_weights, sum_before


def packed_example(seed=0, n_rays=7):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 6, (n_rays,), generator=g)
    counts[2] = 0  # a ray without samples
    ray_indices = torch.repeat_interleave(torch.arange(n_rays), counts)
    sigmas = torch.rand(len(ray_indices), generator=g, dtype=torch.float64) * 5
    deltas = torch.rand(len(ray_indices), generator=g, dtype=torch.float64) * 0.3 + 0.01
    return ray_indices, sigmas, deltas, n_rays


def test_weights_match_a_per_ray_loop():
    ray_indices, sigmas, deltas, n = packed_example()
    weights, transmittance = render_weights(sigmas, deltas, ray_indices, n)
    for ray in range(n):
        optical_depth = 0.0
        for i in (ray_indices == ray).nonzero().flatten().tolist():
            expected_t = math.exp(-optical_depth)
            assert transmittance[i].item() == pytest.approx(expected_t, rel=1e-12)
            alpha = 1 - math.exp(-sigmas[i].item() * deltas[i].item())
            assert weights[i].item() == pytest.approx(expected_t * alpha, rel=1e-12, abs=1e-15)
            optical_depth += sigmas[i].item() * deltas[i].item()
    totals = accumulate(weights[:, None], ray_indices, n)[:, 0]
    assert totals[2] == 0 and bool((totals <= 1 + 1e-12).all())


def test_distortion_matches_the_double_sum():
    ray_indices, sigmas, deltas, n = packed_example(seed=3)
    weights, _ = render_weights(sigmas, deltas, ray_indices, n)
    starts = torch.zeros_like(deltas)
    for ray in range(n):  # each ray's intervals back to back from a random start, as a sampler gives them
        rows = (ray_indices == ray).nonzero().flatten()
        starts[rows] = 0.1 * ray + torch.cumsum(deltas[rows], 0) - deltas[rows]
    ends = starts + deltas
    loss = distortion(weights, starts, ends, ray_indices, n)
    for ray in range(n):
        rows = (ray_indices == ray).nonzero().flatten().tolist()
        w = [weights[i].item() for i in rows]
        m = [(starts[i].item() + ends[i].item()) / 2 for i in rows]
        expected = sum(w[a] * w[b] * abs(m[a] - m[b]) for a in range(len(rows)) for b in range(len(rows)))
        expected += sum(w[a] ** 2 * deltas[i].item() / 3 for a, i in enumerate(rows))
        assert loss[ray].item() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert loss[2] == 0
    # weight in one interval is the least distortion a ray of that weight can have; spread out, it grows
    one = distortion(torch.tensor([0.0, 1.0, 0.0]), torch.tensor([0.0, 0.1, 0.2]), torch.tensor([0.1, 0.2, 0.3]),
                     torch.zeros(3, dtype=torch.int64), 1)
    spread = distortion(torch.full((3,), 1 / 3), torch.tensor([0.0, 0.1, 0.2]), torch.tensor([0.1, 0.2, 0.3]),
                        torch.zeros(3, dtype=torch.int64), 1)
    assert one.item() == pytest.approx(0.1 / 3) and spread.item() > one.item()


def test_optical_depth_stays_exact_after_long_lists():
    # a million earlier samples with large tau: float32 cumulative sums would lose the small per-ray values
    tau = torch.cat([torch.full((1_000_000,), 50.0), torch.tensor([1e-3, 2e-3, 4e-3])])
    ray_indices = torch.cat([torch.arange(1_000_000), torch.full((3,), 1_000_000)])
    before = sum_before(tau, ray_indices, 1_000_001)
    assert before[-3:].tolist() == pytest.approx([0.0, 1e-3, 3e-3], abs=1e-7)  # float32 sums: off by ~4


@pytest.mark.parametrize("huge", [float("inf"), 1e38])
def test_an_overflowing_density_is_an_opaque_sample_and_leaves_other_rays_alone(huge):
    # ray 0: tau 0.5, then an overflowing density (exp of a network output past 88 is inf in float32), then more;
    # rays 1 and 2 come after it in the packed list
    sigmas = torch.tensor([5.0, huge, 3.0, 2.0, 4.0, 1.0], dtype=torch.float32)
    deltas = torch.full((6,), 0.1)
    ray_indices = torch.tensor([0, 0, 0, 1, 1, 2])
    weights, transmittance = render_weights(sigmas, deltas, ray_indices, 3)
    t1 = math.exp(-0.5)  # by hand: Max's quadrature, the huge sample fully opaque
    expected = [1 - t1, t1, 0.0, 1 - math.exp(-0.2), math.exp(-0.2) * (1 - math.exp(-0.4)), 1 - math.exp(-0.1)]
    assert weights.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-30)
    assert bool(torch.isfinite(transmittance).all())
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=4, step_size=0.02)
    origins, directions = axis_rays(n=3)
    clean = grid.sample(origins, directions, lambda p: torch.full((len(p),), 0.5), early_stop_eps=1e-4)

    def with_an_overflow(points):  # the first ray's points past x = 0 overflow; the others see fog
        return torch.where(((points[:, 1] - origins[0, 1]).abs() < 1e-6) & (points[:, 0] > 0), huge, 0.5)

    rays, starts, _ = grid.sample(origins, directions, with_an_overflow, early_stop_eps=1e-4)
    for ray in (1, 2):  # marching the other rays is unchanged
        assert torch.equal(starts[rays == ray], clean[1][clean[0] == ray])
    assert float(starts[rays == 0].max()) < 2.02  # the first ray stops at its opaque sample (x = 0: t = 2)


def test_unsorted_ray_indices_are_rejected():
    with pytest.raises(ValueError, match="sorted"):
        render_weights(torch.ones(3), torch.ones(3), torch.tensor([0, 2, 1]), 3)


def test_ray_box_intersection():
    box = torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
    origins = torch.tensor([[-3.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-3.0, 5.0, 0.0]])
    directions = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    near, far = ray_box_intersection(origins, directions, box)
    assert near[:2].tolist() == [2.0, 0.0] and far[:2].tolist() == [4.0, 1.0]
    assert far[2] <= near[2]  # misses


def axis_rays(n=16, seed=1):
    """Rays from x = -2 along +x at random (y, z) inside the unit box [-1, 1]^3."""
    g = torch.Generator().manual_seed(seed)
    yz = torch.rand(n, 2, generator=g) * 1.8 - 0.9
    origins = torch.cat([torch.full((n, 1), -2.0), yz], 1)
    return origins, torch.tensor([[1.0, 0.0, 0.0]]).expand(n, 3).contiguous()


def oblique_rays(n=24, seed=2):
    """Rays from outside the box [-1, 1]^3 towards random points inside it."""
    g = torch.Generator().manual_seed(seed)
    origins = torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=-1) * 2.5
    targets = torch.rand(n, 3, generator=g) * 1.6 - 0.8
    return origins, torch.nn.functional.normalize(targets - origins, dim=-1)


@pytest.mark.parametrize("resolution, rays", [(8, axis_rays), (64, axis_rays), (64, oblique_rays)])
def test_sample_keeps_exactly_the_points_in_occupied_cells(resolution, rays):
    step = 0.05 if resolution == 8 else 0.02
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=resolution, step_size=step)
    origins, directions = rays()
    g = torch.Generator().manual_seed(3)
    if resolution == 8:
        grid.occupied.copy_(torch.rand(8**3, generator=g) < 0.3)
    else:  # sparse: one cell on most rays' paths, a few elsewhere, so the coarse pass has empty space to skip
        grid.occupied.zero_()
        points = origins + (torch.rand(len(origins), 1, generator=g) * 1.6 + 1.2) * directions
        ijk = torch.floor((points + 1) / 2 * resolution).long().clamp(0, resolution - 1)
        grid.occupied[(ijk[:, 0] * resolution + ijk[:, 1]) * resolution + ijk[:, 2]] = True
        grid.occupied[torch.randint(resolution**3, (20,), generator=g)] = True
    grid._update_bounds()
    rays_, starts, ends = grid.sample(origins, directions, window=5)
    near, far = ray_box_intersection(origins, directions, grid.bounds)
    found = 0
    for ray in range(len(origins)):  # brute force: every step point of the ray, kept where its cell is occupied
        expected = []
        k = 0
        while (t := near[ray].item() + (k + 0.5) * step) < far[ray].item():
            point = origins[ray] + t * directions[ray]
            cell = torch.floor((point + 1) / 2 * resolution).long()
            flat = (cell[0] * resolution + cell[1]) * resolution + cell[2]
            if bool(((cell >= 0) & (cell < resolution)).all()) and bool(grid.occupied[flat]):
                expected.append(t)
            k += 1
        got = ((starts + ends) / 2)[rays_ == ray].tolist()
        assert got == pytest.approx(expected, abs=1e-5)
        found += len(expected)
    assert found > len(origins) / 4
    assert torch.allclose(ends - starts, torch.full_like(starts, step))


def test_early_termination_matches_a_front_to_back_loop():
    step, eps = 0.02, 1e-3
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=4, step_size=step)  # all cells occupied

    def density(points):  # an opaque slab at 0 < x < 0.5, thin fog elsewhere
        return torch.where((points[:, 0] > 0) & (points[:, 0] < 0.5), 40.0, 0.2)

    origins, directions = axis_rays(n=5)
    all_rays, all_starts, all_ends = grid.sample(origins, directions)
    rays, starts, ends = grid.sample(origins, directions, density, early_stop_eps=eps, window=7)
    for ray in range(len(origins)):
        t_all = ((all_starts + all_ends) / 2)[all_rays == ray].double()
        tau = density(origins[ray].double() + t_all[:, None] * directions[ray].double()) * step
        before = torch.cumsum(tau, 0) - tau
        expected = t_all[torch.exp(-before) > eps]
        got = ((starts + ends) / 2)[rays == ray].double()
        assert torch.allclose(got, expected, atol=1e-5)
        assert got.max() < 2.5  # nothing behind the slab (x < 0.5, t = x + 2)


def test_update_marks_the_matter_and_decays():
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=16, warmup_steps=4, step_size=0.05)
    ball = lambda p: ((p - 0.3).norm(dim=-1) < 0.25).float() * 100.0  # noqa: E731  density inside a ball
    g = torch.Generator().manual_seed(0)
    for step in range(3):
        grid.update(step, ball, generator=g)
    centres = grid.aabb[0] + (grid.cell_coordinates(torch.arange(16**3)) + 0.5) / 16 * 2
    half_diagonal = math.sqrt(3) * (2 / 16) / 2
    distance = (centres - 0.3).norm(dim=-1)
    assert bool(grid.occupied[distance < 0.25 - half_diagonal].all())  # cells wholly inside
    assert not bool(grid.occupied[distance > 0.25 + half_diagonal].any())  # cells wholly outside
    assert bool((grid.bounds[0] >= 0.3 - 0.25 - 2 / 16).all()) and bool((grid.bounds[1] <= 0.3 + 0.25 + 2 / 16).all())
    before = grid.opacity.clone()
    grid.update(10, lambda p: torch.zeros(len(p)), generator=g)  # after warm-up: decay only
    assert torch.allclose(grid.opacity, before * 0.95)


def test_rays_that_meet_nothing_give_no_samples():
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=16, step_size=0.05)
    origins, directions = axis_rays(n=4)
    grid.occupied.zero_()
    grid._update_bounds()  # empty grid: empty bounds
    rays, starts, ends = grid.sample(origins, directions, lambda p: torch.ones(len(p)))
    assert len(rays) == len(starts) == len(ends) == 0
    grid.occupied.fill_(True)
    grid._update_bounds()
    away = grid.sample(origins, -directions)[0]  # rays pointing away from the box
    assert len(away) == 0


def test_sample_rejects_bad_settings():
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=4, step_size=0.1)
    origins, directions = axis_rays(n=2)
    for kwargs in ({"window": 0}, {"early_stop_eps": 0.0}, {"alpha_threshold": 1.0}):
        with pytest.raises(ValueError):
            grid.sample(origins, directions, **kwargs)
    for step in (0.0, -0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="step_size must be a positive number"):
            OccupancyGrid(grid.aabb, resolution=4, step_size=step)


def test_clip_limits_the_samples():
    grid = OccupancyGrid(torch.tensor([[-1.0] * 3, [1.0] * 3]), resolution=8, step_size=0.05)  # all occupied
    origins, directions = axis_rays(n=3)  # t in [1, 3] inside the box
    near, far = torch.tensor([1.5, 0.0, 2.0]), torch.tensor([2.0, 9.0, 1.0])
    rays, starts, ends = grid.sample(origins, directions, clip=(near, far))
    mid = (starts + ends) / 2
    for ray, (lo, hi) in enumerate(zip([1.5, 1.0, None], [2.0, 3.0, None])):
        t = mid[rays == ray]
        if lo is None:
            assert len(t) == 0  # near > far: nothing
        else:
            assert len(t) == round((hi - lo) / 0.05) and t.min() > lo and t.max() < hi
