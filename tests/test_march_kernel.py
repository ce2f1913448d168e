"""The compiled marching kernel (inr_enc/nerf/march_cpu.cpp) against the torch windows it replaces on CPU: the
same samples (rays, starts, ends), and the same kept samples and features under early ray termination, for the
box grid and both contracted grids, with and without jitter and clipping."""

import pytest
import torch

from inr_enc.nerf import occupancy, unbounded
from inr_enc.nerf.march_kernel import marching_kernel, occupied_window
from inr_enc.nerf.occupancy import OccupancyGrid
from inr_enc.nerf.unbounded import ContractedOccupancyGrid

pytestmark = pytest.mark.skipif(marching_kernel(torch.device("cpu"), torch.float32) is None,
                                reason="the CPU marching kernel did not build here")


def sparse_grid(kind: str) -> OccupancyGrid | ContractedOccupancyGrid:
    """A grid with a random, clustered occupancy (a few percent of the cells), as a trained one has."""
    generator = torch.Generator().manual_seed(3)
    if kind == "box":
        grid = OccupancyGrid(torch.tensor([[-1.0, -0.5, -1.5], [1.0, 1.5, 0.5]]), 32, step_size=0.011)
    else:
        grid = ContractedOccupancyGrid(center=(0.2, -0.1, 0.3), scale=1.5, resolution=32, norm=kind, far=300.0)
    coarse = torch.rand(1, 1, 8, 8, 8, generator=generator) < 0.08
    fine = torch.nn.functional.interpolate(coarse.float(), size=(32, 32, 32)).bool().reshape(-1)
    fine &= torch.rand(fine.shape, generator=generator) < 0.7
    grid.set_opacity(fine.float())
    return grid


def rays(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    origins = torch.randn(n, 3, generator=generator) * 1.5
    directions = torch.nn.functional.normalize(torch.randn(n, 3, generator=generator), dim=-1)
    return origins, directions


def both_paths(monkeypatch, grid, *args, **kwargs):
    """grid.sample(*args, **kwargs) with the kernel, then with the torch windows (same generator seed)."""
    seed = kwargs.pop("seed", 0)
    module = occupancy if isinstance(grid, OccupancyGrid) else unbounded
    calls = []
    with monkeypatch.context() as patch:  # count the kernel's windows: the first run must take them
        patch.setattr(module, "occupied_window", lambda *a: calls.append(1) or occupied_window(*a))
        compiled = grid.sample(*args, generator=torch.Generator().manual_seed(seed), **kwargs)
    assert calls
    with monkeypatch.context() as patch:
        patch.setattr(module, "marching_kernel", lambda device, dtype: None)
        reference = grid.sample(*args, generator=torch.Generator().manual_seed(seed), **kwargs)
    return compiled, reference


def assert_same_samples(compiled, reference):
    assert len(compiled[0]) == len(reference[0]) > 500
    assert torch.equal(compiled[0], reference[0])
    for mine, theirs in zip(compiled[1:], reference[1:]):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["box", "linf", "l2"])
@pytest.mark.parametrize("jitter", [False, True])
def test_every_occupied_step_as_the_torch_windows_give_it(monkeypatch, kind, jitter):
    grid = sparse_grid(kind)
    origins, directions = rays(3000, seed=1)
    compiled, reference = both_paths(monkeypatch, grid, origins, directions, jitter=jitter, window=4)
    assert_same_samples(compiled, reference)
    assert torch.all(compiled[2] > compiled[1])


@pytest.mark.parametrize("kind", ["box", "linf", "l2"])
def test_early_termination_keeps_the_same_samples_and_features(monkeypatch, kind):
    grid = sparse_grid(kind)
    origins, directions = rays(2000, seed=2)

    def density_and_features(points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        density = 40 * torch.exp(-4 * (points - 0.3).square().sum(-1))
        return density, torch.cat([density[:, None], torch.sin(7 * points)], -1)

    compiled, reference = both_paths(monkeypatch, grid, origins, directions, density_and_features,
                                     early_stop_eps=1e-2, alpha_threshold=0.005, features=True, window=16)
    assert_same_samples(compiled, reference)
    stopped = torch.bincount(compiled[0], minlength=len(origins))
    assert stopped.max() < torch.bincount(grid.sample(origins, directions)[0], minlength=len(origins)).max()


@pytest.mark.parametrize("kind", ["box", "linf"])
def test_clipped_rays_keep_to_their_limits(monkeypatch, kind):
    grid = sparse_grid(kind)
    origins, directions = rays(1500, seed=4)
    near = torch.rand(len(origins), generator=torch.Generator().manual_seed(5))
    far = near + 2 * torch.rand(len(origins), generator=torch.Generator().manual_seed(6))
    compiled, reference = both_paths(monkeypatch, grid, origins, directions, clip=(near, far), seed=7, jitter=True)
    assert_same_samples(compiled, reference)
    ray_near, ray_far = near[compiled[0]], far[compiled[0]]
    half_step = grid.step_size / 2 if isinstance(grid, OccupancyGrid) else 0.0  # box: intervals centred on t
    assert torch.all(compiled[1] >= ray_near - half_step - 1e-6) and torch.all(compiled[1] + half_step < ray_far)
