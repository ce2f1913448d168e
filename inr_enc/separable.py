"""The separable ("complex", Kronecker) encoding of 2D signals and its closed-form fit (Zheng et al., ECCV 2022,
"Trading Positional Complexity vs. Deepness in Coordinate Networks"; osiriszjq/complex_encoding: MLPs.py
``Kron_MLP`` with depth 0 evaluates Phi W Phi^T instead of kron(Phi, Phi) vec(W); trainer.py
``train_closed_form_2D`` solves W = pinv(Phi) Y pinv(Phi)^T on the training grid)."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from .encoders.base import check_float, check_int, compute_dtype
from .encoders.shifted_basis import ShiftedBasis

NAME = "Separable"


def _check_tensor(name: str, value: Any, shape: tuple[int | None, ...], batched: bool = False) -> torch.Tensor:
    """ValueError unless ``value`` is a finite floating tensor of ``shape`` (None: any size), after any
    leading batch dims if ``batched``."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise ValueError(f"{NAME}: '{name}' must be a floating point torch.Tensor, got {type(value).__name__}")
    wanted = ("..., " if batched else "") + ", ".join("*" if s is None else str(s) for s in shape)
    if batched and value.dim() >= len(shape):
        shape = (None,) * (value.dim() - len(shape)) + shape
    if value.dim() != len(shape) or any(s is not None and s != n for s, n in zip(shape, value.shape)):
        raise ValueError(f"{NAME}: '{name}' must have shape [{wanted}], got {list(value.shape)}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{NAME}: '{name}' contains NaN or inf")
    return value


class SeparableField(nn.Module):
    """f_c(x, y) = Phi(y) W_c Phi(x)^T for c < C = ``n_output_dims``: a linear layer on the Kronecker product
    kron(Phi(y), Phi(x)) (K^2 features, never formed), Phi the one-axis ShiftedBasis embedding [K] built from
    ``encoding_config`` ("axes" must stay "separable") and W: [C, K, K] (``weight``, initialised to zero: the
    model is linear in W, so zero is a valid start for gradient descent and needs no seed).
    x is the column coordinate and y the row, as in inr_enc's pixel_coords. xy: [..., 2] in [0, 1] -> [..., C].
    """

    def __init__(self, n_output_dims: int, encoding_config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(encoding_config or {"otype": "ShiftedBasis"})
        otype = config.get("otype", "ShiftedBasis")
        if not isinstance(otype, str) or otype.lower() != "shiftedbasis":
            raise ValueError(f"{NAME}: the encoding must be ShiftedBasis, got otype {otype!r}")
        if str(config.get("axes", "separable")).lower() != "separable":
            raise ValueError(f"{NAME}: the 1D embedding's 'axes' must be \"separable\", got {config['axes']!r}")
        self.embedding = ShiftedBasis(1, config)
        self.n_input_dims = 2
        self.n_output_dims = check_int(NAME, "n_output_dims", n_output_dims, 1)
        k = self.embedding.n_bases
        self.weight = nn.Parameter(torch.zeros(self.n_output_dims, k, k))

    @property
    def config(self) -> dict[str, Any]:
        return {"encoding": self.embedding.config, "network": {"otype": NAME}}

    def _phi(self, t: torch.Tensor) -> torch.Tensor:
        """t: [n] -> Phi(t): [n, K] in t's compute dtype."""
        return self.embedding.encode(t.to(compute_dtype(t)).reshape(-1, 1))

    def forward(self, xy: torch.Tensor) -> torch.Tensor:
        """xy: [..., 2] -> [..., C]; float64 in, float64 out, float32 otherwise. Memory: a [N, C, K] intermediate."""
        _check_tensor("xy", xy, (2,), batched=True)
        flat = xy.reshape(-1, 2)
        phi_x, phi_y = self._phi(flat[:, 0]), self._phi(flat[:, 1])
        # bilinear: out[n, c] = sum_ij phi_y[n, i] W[c, i, j] phi_x[n, j]
        out = nn.functional.bilinear(phi_y, phi_x, self.weight.to(phi_x.dtype))
        return out.reshape(*xy.shape[:-1], self.n_output_dims)

    def reconstruct_grid(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """f on the grid ys x xs, two matmuls: xs: [W'], ys: [H'] -> [H', W', C] (row i, column j = f(xs[j], ys[i]))."""
        _check_tensor("xs", xs, (None,))
        _check_tensor("ys", ys, (None,))
        phi_x, phi_y = self._phi(xs), self._phi(ys)
        return (phi_y @ self.weight.to(phi_x.dtype) @ phi_x.T).permute(1, 2, 0)

    @torch.no_grad()
    def solve(self, xs: torch.Tensor, ys: torch.Tensor, values: torch.Tensor, ridge: float = 0.0) -> float:
        """Set W to argmin_W sum_c ||Phi_y W_c Phi_x^T - Y_c||_F^2 + ridge ||W||_F^2 for the grid samples
        Y_c = values[..., c] at (xs[j], ys[i]); xs: [W'], ys: [H'], values: [H', W', C]. Returns the seconds it took.

        With thin SVDs Phi_y = U_y diag(s) V_y^T and Phi_x = U_x diag(t) V_x^T the (K^2 x K^2) normal equations
        decouple entrywise: W_c = V_y [s_i t_j / (s_i^2 t_j^2 + ridge) * (U_y^T Y_c U_x)_ij] V_x^T. ridge = 0
        gives the minimum-norm least-squares solution pinv(Phi_y) Y_c pinv(Phi_x)^T (the reference's closed
        form), with products s_i t_j below eps * max(H', W', K) * max(s) max(t) treated as zero (pinv of the Kronecker matrix would use
        eps * max(H'W', K^2); the difference only matters for nearly rank-deficient bases).
        Computed in float64 on W's device, then stored in W's dtype.
        """
        _check_tensor("xs", xs, (None,))
        _check_tensor("ys", ys, (None,))
        _check_tensor("values", values, (ys.shape[0], xs.shape[0], self.n_output_dims))
        ridge = check_float(NAME, "ridge", ridge, 0.0)
        device = self.weight.device
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        f64 = dict(dtype=torch.float64, device=device)
        u_y, s, vh_y = torch.linalg.svd(self._phi(ys.to(**f64)), full_matrices=False)
        u_x, t, vh_x = torch.linalg.svd(self._phi(xs.to(**f64)), full_matrices=False)
        p = s[:, None] * t[None, :]
        if ridge > 0:
            factor = p / (p * p + ridge)
        else:
            cutoff = torch.finfo(torch.float64).eps * max(*values.shape[:2], self.embedding.n_bases) * p.max()
            factor = torch.where(p > cutoff, 1 / p.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(p))
        projected = u_y.T @ values.to(**f64).permute(2, 0, 1) @ u_x  # [C, r_y, r_x]
        self.weight.copy_(vh_y.T @ (factor * projected) @ vh_x)
        sync()
        return time.perf_counter() - start
