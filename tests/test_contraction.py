"""Scene contraction (inr_enc/nerf/contraction.py) against mip-NeRF 360's formula evaluated in float64 with numpy,
its Jacobian against autograd, and the pushed-through Gaussians against Monte Carlo samples."""

import numpy as np
import pytest
import torch

from inr_enc.nerf.contraction import contract, contract_gaussians, contraction_jacobian, uncontract
from inr_enc.nerf.space import gaussians_to_unit, to_unit

NORMS = ["l2", "linf"]


def reference(x: np.ndarray, norm: str) -> np.ndarray:
    """mip-NeRF 360 eq. 10, point by point in float64 (nerfacto's L-inf variant with norm "linf")."""
    out = np.empty_like(x)
    for i, point in enumerate(x):
        r = np.linalg.norm(point) if norm == "l2" else np.abs(point).max()
        out[i] = point if r <= 1 else (2 - 1 / r) * point / r
    return out


def points(seed: int, n: int = 400) -> torch.Tensor:
    """Directions times radii from 0 to 1e6, log-spread, in float64 (no ties between the largest coordinates)."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.nn.functional.normalize(torch.randn(n, 3, generator=g, dtype=torch.float64), dim=-1)
    radii = 10 ** torch.empty(n, 1, dtype=torch.float64).uniform_(-3, 6, generator=g)
    return directions * radii


@pytest.mark.parametrize("norm", NORMS)
def test_contract_matches_the_formula_and_fills_the_radius_2_ball(norm):
    x = points(0)
    y = contract(x, norm)
    np.testing.assert_allclose(y.numpy(), reference(x.numpy(), norm), rtol=1e-13, atol=1e-15)
    size = y.norm(dim=-1) if norm == "l2" else y.abs().amax(-1)
    assert (size < 2).all()
    inside = (x.norm(dim=-1) if norm == "l2" else x.abs().amax(-1)) <= 1
    assert inside.any() and torch.equal(y[inside], x[inside])  # the unit ball keeps its scale, bit for bit
    huge = contract(torch.tensor([[3e38, -1e30, 0.0]]), norm)  # float32 extremes stay finite
    assert torch.isfinite(huge).all()


@pytest.mark.parametrize("norm", NORMS)
def test_uncontract_inverts_contract(norm):
    x = points(1)
    np.testing.assert_allclose(uncontract(contract(x, norm), norm).numpy(), x.numpy(), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="norm < 2"):
        uncontract(torch.tensor([[2.0, 0.0, 0.0]]), norm)


@pytest.mark.parametrize("norm", NORMS)
def test_jacobian_matches_autograd(norm):
    x = points(2, 100)
    closed = contraction_jacobian(x, norm)
    autograd = torch.stack([torch.autograd.functional.jacobian(lambda p: contract(p, norm), p) for p in x])
    np.testing.assert_allclose(closed.numpy(), autograd.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("norm", NORMS)
def test_contract_is_continuous_with_finite_derivatives_at_the_boundary_and_origin(norm):
    edge = torch.tensor([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]], dtype=torch.float64)
    for scale in (1 - 1e-9, 1 + 1e-9):
        np.testing.assert_allclose(contract(edge * scale, norm).numpy(), (edge * scale).numpy(), atol=1e-8)
    x = torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.2, 0.1], [5.0, -3.0, 1.0], [1e30, 2e29, -1e29]],
                     dtype=torch.float32, requires_grad=True)
    (grad,) = torch.autograd.grad(contract(x, norm).square().sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), x)
    assert torch.isfinite(grad).all() and torch.isfinite(second).all()


@pytest.mark.parametrize("norm", NORMS)
def test_gaussians_pushed_through_match_monte_carlo(norm):
    """Small Gaussians far out: the contracted samples' mean and covariance are contract(mu) and J S J^T."""
    g = torch.Generator().manual_seed(3)
    for mean in ([3.0, 1.0, -0.5], [0.4, 0.2, 0.1], [-20.0, 5.0, 2.0]):
        mu = torch.tensor(mean, dtype=torch.float64)
        r = float(mu.norm())
        a = torch.randn(3, 3, generator=g, dtype=torch.float64) * 1e-3 * r
        cov = a @ a.T + 1e-8 * torch.eye(3, dtype=torch.float64)
        samples = mu + torch.randn(200_000, 3, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(cov).T
        contracted = contract(samples, norm)
        mean_c, cov_c = contract_gaussians(mu, cov, norm)
        empirical = torch.cov(contracted.T)
        footprint = float(cov_c.diagonal().sqrt().max())
        np.testing.assert_allclose(contracted.mean(0).numpy(), mean_c.numpy(), atol=0.05 * footprint)
        np.testing.assert_allclose(empirical.numpy(), cov_c.numpy(), rtol=0.05,
                                   atol=0.02 * float(cov_c.diagonal().max()))


@pytest.mark.parametrize("norm", [None, *NORMS])
def test_unit_space_of_a_scene_box_and_its_gaussians(norm):
    """World -> unit coordinates (nerf/space.py) for a box [-1, 3] x [0, 2] x [-2, 2]: bounded, the box is [0, 1]^3;
    contracted, the box (scaled by its largest half extent) is inside the middle half and everything else the shell;
    Gaussians follow the whole map's
    Jacobian (autograd of to_unit, an independent derivation of the same linearisation)."""
    aabb = torch.tensor([[-1.0, 0.0, -2.0], [3.0, 2.0, 2.0]], dtype=torch.float64)
    centre, corner = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64), aabb[1:]
    x, inside = to_unit(torch.cat([centre, corner, torch.tensor([[1e6, 1.0, 0.0]], dtype=torch.float64)]), aabb, norm)
    np.testing.assert_allclose(x[0].numpy(), 0.5)
    # contracted, the box is scaled by its largest half extent (2): the corner (3, 2, 2) is (1, 0.5, 1), on the
    # L-inf unit cube, outside the L2 unit ball (norm 1.5: scaled by (2 - 1/1.5) / 1.5)
    box = torch.tensor([1.0, 0.5, 1.0], dtype=torch.float64)
    corner_unit = {None: torch.ones(3, dtype=torch.float64), "linf": (box + 2) / 4,
                   "l2": (box * (2 - 1 / 1.5) / 1.5 + 2) / 4}[norm]
    np.testing.assert_allclose(x[1].numpy(), corner_unit.numpy())
    if norm is None:
        assert inside[:, 0].tolist() == [True, True, False]
    else:
        assert inside.all() and x[2, 0] > 0.999 and (x >= 0).all() and (x <= 1).all()
    g = torch.Generator().manual_seed(4)
    mean = torch.tensor([[0.5, 1.5, 1.0], [9.0, -4.0, 3.0]], dtype=torch.float64)
    a = torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    cov = a @ a.transpose(-1, -2)
    unit_mean, unit_cov, _ = gaussians_to_unit(mean, cov, aabb, norm)
    for i in range(2):
        jacobian = torch.autograd.functional.jacobian(lambda p: to_unit(p, aabb, norm)[0], mean[i])
        np.testing.assert_allclose(unit_mean[i].numpy(), to_unit(mean[i], aabb, norm)[0].numpy())
        np.testing.assert_allclose(unit_cov[i].numpy(), (jacobian @ cov[i] @ jacobian.T).numpy(), rtol=1e-10,
                                   atol=1e-14)
