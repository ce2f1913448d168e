"""The separable ("complex", Kronecker) model of 2D signals and its closed-form fit (Zheng et al., ECCV 2022,
"Trading Positional Complexity vs. Deepness in Coordinate Networks"; osiriszjq/complex_encoding: MLPs.py
``Kron_MLP`` with depth 0 evaluates Phi W Phi^T instead of kron(Phi, Phi) vec(W); trainer.py
``train_closed_form_2D`` solves W = pinv(Phi) Y pinv(Phi)^T on the training grid)."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import nn

from ..config.checks import check_float, config_error
from ..encoders.base import Encoder, EncoderSpec
from .base import Network
from .registry import register_network

NAME = "Separable"
AXIS_SCALE = math.sqrt(2)  # undoes ShiftedBasis's division of each of its two axis blocks by sqrt(2)


def check_tensor(name: str, value: Any, shape: tuple[int | None, ...]) -> torch.Tensor:
    """ValueError unless ``value`` is a finite floating tensor of ``shape`` (None: any size)."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise ValueError(f"{NAME}: '{name}' must be a floating point torch.Tensor, got {type(value).__name__}")
    if value.dim() != len(shape) or any(s is not None and s != n for s, n in zip(shape, value.shape)):
        wanted = ", ".join("*" if s is None else str(s) for s in shape)
        raise ValueError(f"{NAME}: '{name}' must have shape [{wanted}], got {list(value.shape)}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{NAME}: '{name}' contains NaN or inf")
    return value


@register_network()
class Separable(Network):
    """``{"otype": "Separable"}``: f_c(x, y) = Phi_y W_c Phi_x^T for c < C = ``n_output_dims``, a linear layer on the
    Kronecker product kron(Phi_y, Phi_x) (K^2 features, never formed).

    The encoding must be a 2D ShiftedBasis with ``axes: "separable"`` (the default encoding here): its output
    [..., 2K] is the x block (K values, from the column coordinate) then the y block, as inr_enc's pixel coordinates
    are (x, y). ShiftedBasis divides both blocks by sqrt(2) so a whole row has norm <= 1; Phi_x and Phi_y are the
    blocks times sqrt(2), each the 1D embedding of the reference (row norm <= 1 per axis). W: [C, K, K]
    (``weight``), initialised to zero: the model is linear in W, so zero is a valid start for gradient descent and
    needs no seed. h: [..., 2K] -> [..., C]; float64 in, float64 out.
    """

    otype = NAME
    source = "Zheng et al. 2022 (Trading Positional Complexity vs. Deepness in Coordinate Networks)"
    defaults = {"otype": NAME}
    default_encoding = {"otype": "ShiftedBasis"}
    solves_closed_form = True

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        if encoder is None or encoder.cls.otype != "ShiftedBasis":
            got = "none" if encoder is None else repr(encoder.cls.otype)
            raise config_error(NAME, f"the encoding must be ShiftedBasis, got otype {got}")
        if encoder.n_input_dims != 2:
            raise config_error(NAME, f"fits 2D signals (images) only, not {encoder.n_input_dims}D")
        if encoder.config["axes"] != "separable":
            raise config_error(NAME, f"the encoding's 'axes' must be \"separable\", got {encoder.config['axes']!r}")
        return {"otype": NAME}

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None = None) -> int:
        return n_output_dims * (n_input_dims // 2) ** 2

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None = None) -> int:
        return n_output_dims * (n_input_dims // 2 + 1)  # the bilinear's [N, C, K] intermediate, the output

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        k = self.n_input_dims // 2
        self.weight = nn.Parameter(torch.zeros(self.n_output_dims, k, k))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: [..., 2K] (Phi_x then Phi_y) -> [..., C]. Memory: a [N, C, K] intermediate."""
        flat = h.reshape(-1, self.n_input_dims)
        phi_x, phi_y = (block * AXIS_SCALE for block in flat.chunk(2, dim=-1))
        # bilinear: out[n, c] = sum_ij phi_y[n, i] W[c, i, j] phi_x[n, j]
        out = nn.functional.bilinear(phi_y, phi_x, self.weight.to(flat.dtype))
        return out.reshape(*h.shape[:-1], self.n_output_dims)

    @staticmethod
    def axis_embeddings(encoder: Encoder, xs: torch.Tensor, ys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Phi_x(xs): [W', K] and Phi_y(ys): [H', K] from the encoder's two axis blocks (each reads its own axis)."""
        k = encoder.n_output_dims // 2
        phi_x = encoder(torch.stack([xs, torch.zeros_like(xs)], -1))[:, :k]
        phi_y = encoder(torch.stack([torch.zeros_like(ys), ys], -1))[:, k:]
        return phi_x * AXIS_SCALE, phi_y * AXIS_SCALE

    def reconstruct_grid(self, encoder: Encoder, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """f on the grid ys x xs, two matmuls: xs: [W'], ys: [H'] -> [H', W', C] (row i, column j = f(xs[j], ys[i]))."""
        phi_x, phi_y = self.axis_embeddings(encoder, check_tensor("xs", xs, (None,)), check_tensor("ys", ys, (None,)))
        return (phi_y @ self.weight.to(phi_x.dtype) @ phi_x.T).permute(1, 2, 0)

    @torch.no_grad()
    def solve(self, encoder: Encoder, xs: torch.Tensor, ys: torch.Tensor, values: torch.Tensor,
              ridge: float = 0.0) -> float:
        """Set W to argmin_W sum_c ||Phi_y W_c Phi_x^T - Y_c||_F^2 + ridge ||W||_F^2 for the grid samples
        Y_c = values[..., c] at (xs[j], ys[i]); xs: [W'], ys: [H'], values: [H', W', C]. Returns the seconds it took.

        With thin SVDs Phi_y = U_y diag(s) V_y^T and Phi_x = U_x diag(t) V_x^T the (K^2 x K^2) normal equations
        decouple entrywise: W_c = V_y [s_i t_j / (s_i^2 t_j^2 + ridge) * (U_y^T Y_c U_x)_ij] V_x^T. ridge = 0
        gives the minimum-norm least-squares solution pinv(Phi_y) Y_c pinv(Phi_x)^T (the reference's closed
        form), with products s_i t_j below eps * max(H', W', K) * max(s) max(t) treated as zero (pinv of the Kronecker
        matrix would use eps * max(H'W', K^2); the difference only matters for nearly rank-deficient bases).
        Computed in float64 on W's device, then stored in W's dtype.
        """
        check_tensor("xs", xs, (None,))
        check_tensor("ys", ys, (None,))
        check_tensor("values", values, (ys.shape[0], xs.shape[0], self.n_output_dims))
        ridge = check_float(NAME, "ridge", ridge, 0.0)
        device = self.weight.device
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        f64 = dict(dtype=torch.float64, device=device)
        phi_x, phi_y = self.axis_embeddings(encoder, xs.to(**f64), ys.to(**f64))
        u_y, s, vh_y = torch.linalg.svd(phi_y, full_matrices=False)
        u_x, t, vh_x = torch.linalg.svd(phi_x, full_matrices=False)
        p = s[:, None] * t[None, :]
        if ridge > 0:
            factor = p / (p * p + ridge)
        else:
            cutoff = torch.finfo(torch.float64).eps * max(*values.shape[:2], self.weight.shape[-1]) * p.max()
            factor = torch.where(p > cutoff, 1 / p.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(p))
        projected = u_y.T @ values.to(**f64).permute(2, 0, 1) @ u_x  # [C, r_y, r_x]
        self.weight.copy_(vh_y.T @ (factor * projected) @ vh_x)
        sync()
        return time.perf_counter() - start
