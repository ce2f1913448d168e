"""Scene contraction for unbounded scenes: all of R^3 into a ball (or cube) of radius 2, and Gaussians through it.

mip-NeRF 360 (Barron et al. 2022, eq. 10): contract(x) = x where ||x|| <= 1, else (2 - 1/||x||) x / ||x||. Space
within the unit ball keeps its scale; beyond, distance is disparity-like (2 - 1/r), so the far field down to the
horizon fits in the shell 1 <= ||y|| < 2. nerfstudio's nerfacto offers the same map with the L-infinity norm
(``SceneContraction(order=inf)``), which fills the cube [-2, 2]^3 (a grid wastes no corners on it).

A Gaussian (mean mu, covariance S) is pushed through by linearising at its mean, as mip-NeRF 360 does for its
conical frustums (§2): contract(mu), J S J^T with J the Jacobian of ``contract`` at mu. Closed forms, for
r = ||x|| > 1 and g(r) = 2/r - 1/r^2 (so contract(x) = g(r) x), g'(r) = 2/r^3 - 2/r^2:

- L2: J = g I + g'(r) / r x x^T  (grad r = x / r);
- L-inf: J = g I + g'(r) sign(x_k) x e_k^T, k the axis of the largest |x_k| (grad r = sign(x_k) e_k; on a tie,
  one of the tied axes: the map is continuous there, its derivative is not).

Inside the unit ball (cube) the map is the identity and J = I.
"""

from __future__ import annotations

from typing import Literal

import torch

Norm = Literal["l2", "linf"]
NORMS = ("l2", "linf")
RADIUS = 2.0  # contracted points lie in the open ball (cube) of this radius


def _outside(x: torch.Tensor, norm: Norm) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., 3] -> (norm > 1 [..., 1] bool, the norm where > 1 else 1 [..., 1]). The L2 norm is taken as the square
    root of the squared norm only where it exceeds 1, so no derivative of any order meets sqrt at 0."""
    if norm == "l2":
        squared = x.square().sum(-1, keepdim=True)
        outside = squared > 1
        return outside, torch.where(outside, squared, torch.ones_like(squared)).sqrt()
    if norm == "linf":
        r = x.abs().amax(dim=-1, keepdim=True)
        outside = r > 1
        return outside, torch.where(outside, r, torch.ones_like(r))
    raise ValueError(f"contraction norm must be one of {', '.join(NORMS)}, got {norm!r}")


def contract(x: torch.Tensor, norm: Norm = "l2") -> torch.Tensor:
    """x: [..., 3] world points (scene units, the unit ball the detailed region) -> [..., 3] with norm < 2 (in
    float32 the norm rounds to 2 beyond r of about 1e7). Differentiable (first and second derivatives through
    autograd), finite for every finite x."""
    outside, r = _outside(x, norm)
    return torch.where(outside, (2 - 1 / r) * (x / r), x)


def uncontract(y: torch.Tensor, norm: Norm = "l2") -> torch.Tensor:
    """The inverse of :func:`contract`: y: [..., 3] with norm < 2 -> world points; ValueError for norm >= 2."""
    outside, s = _outside(y, norm)
    if bool((s >= RADIUS).any()):
        raise ValueError(f"uncontract: points must have {norm} norm < {RADIUS}, got up to {float(s.max())}")
    return torch.where(outside, y / s / (2 - s), y)  # s = 2 - 1/r: r = 1 / (2 - s)


def contraction_jacobian(x: torch.Tensor, norm: Norm = "l2") -> torch.Tensor:
    """d contract / dx at x: [..., 3] -> [..., 3, 3] (closed form, see the module doc)."""
    outside, r = _outside(x, norm)
    r = r[..., None]  # [..., 1, 1]
    g = 2 / r - 1 / r**2
    dg = 2 / r**3 - 2 / r**2
    eye = torch.eye(3, dtype=x.dtype, device=x.device).expand(*x.shape[:-1], 3, 3)
    if norm == "l2":
        grad_r = x[..., None, :] / r  # [..., 1, 3]
    else:
        axis = x.abs().argmax(dim=-1, keepdim=True)
        grad_r = torch.zeros_like(x).scatter(-1, axis, torch.sign(x.gather(-1, axis)))[..., None, :]
    jacobian = g * eye + dg * x[..., :, None] * grad_r
    return torch.where(outside[..., None], jacobian, eye)


def contract_gaussians(mean: torch.Tensor, cov: torch.Tensor, norm: Norm = "l2") -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussians mean [..., 3], cov [..., 3, 3] (world) -> (contract(mean), J cov J^T) in contracted space,
    linearised at the mean (mip-NeRF 360 §2). Far away (L2), J scales a footprint by 1/r^2 along the radial
    direction and by 2/r - 1/r^2 across it."""
    jacobian = contraction_jacobian(mean, norm)
    return contract(mean, norm), jacobian @ cov @ jacobian.transpose(-1, -2)
