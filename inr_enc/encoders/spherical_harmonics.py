"""tiny-cuda-nn's SphericalHarmonics encoding: real SH of degree < ``degree`` of a direction.

tcnn evaluates Sloan's polynomial form ("Stupid Spherical Harmonics Tricks", appendix A1): for band l
and order m, Y_l^m(x, y, z) = N_l^m * Ptilde_l^|m|(z) * {C_m(x, y) if m > 0, S_|m|(x, y) if m < 0, 1 if m = 0},
with C_m + i S_m = (x + i y)^m, Ptilde_l^m(z) = P_l^m(z) / (1 - z^2)^(m/2) (a polynomial in z, Condon-Shortley
phase included) and N_l^m = sqrt((2l+1)/(4 pi) (l-|m|)!/(l+|m|)!) * (sqrt(2) if m != 0). The polynomials are
evaluated as they are, without renormalising (x, y, z), exactly like tcnn's generated code.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_int, config_error
from ..ops.phase import max_exponent
from .base import Encoder, EncoderSpec
from .registry import register_encoder

MAX_DEGREE = 8  # tcnn's sh_enc stops at 64 outputs.


def max_component(dtype: torch.dtype) -> float:
    """V = 2^((max exponent - 64) // 7): 512 in float32, 2^137 in float64. With |2x - 1| <= V every polynomial
    (degree <= 7, coefficients and Legendre factors < 2^24) and its derivatives stay below 2^-40 of the
    largest float, so outputs and gradients are finite."""
    return 2.0 ** ((max_exponent(dtype) - 64) // (MAX_DEGREE - 1))


def _normalisation(ell: int, m: int) -> float:
    k = math.sqrt((2 * ell + 1) / (4 * math.pi) * math.factorial(ell - abs(m)) / math.factorial(ell + abs(m)))
    return k * math.sqrt(2.0) if m != 0 else k


def spherical_harmonics_encoding(x: torch.Tensor, degree: int) -> torch.Tensor:
    """x: [N, 3] in [0, 1]^3 (a unit direction v stored as (v + 1) / 2) -> [N, degree^2].

    Output l^2 + l + m holds Y_l^m for l < degree, m = -l..l (tcnn's order and signs). Values in
    [-N_l^m, N_l^m]-ish for unit directions; inputs are mapped by 2x - 1 and not renormalised.
    """
    v = x * 2.0 - 1.0
    px, py, pz = v.unbind(-1)
    one = torch.ones_like(pz)
    # (x + iy)^m = C_m + i S_m
    cos_terms, sin_terms = [one], [torch.zeros_like(pz)]
    for _ in range(1, degree):
        c, s = cos_terms[-1], sin_terms[-1]
        cos_terms.append(px * c - py * s)
        sin_terms.append(px * s + py * c)
    # Ptilde_l^m(z): Ptilde_m^m = (-1)^m (2m-1)!!, Ptilde_{m+1}^m = (2m+1) z Ptilde_m^m,
    # Ptilde_l^m = ((2l-1) z Ptilde_{l-1}^m - (l+m-1) Ptilde_{l-2}^m) / (l-m).
    legendre: dict[tuple[int, int], torch.Tensor] = {}
    for m in range(degree):
        legendre[(m, m)] = one * float((-1) ** m * math.prod(range(1, 2 * m, 2)))
        if m + 1 < degree:
            legendre[(m + 1, m)] = (2 * m + 1) * pz * legendre[(m, m)]
        for ell in range(m + 2, degree):
            legendre[(ell, m)] = ((2 * ell - 1) * pz * legendre[(ell - 1, m)]
                                  - (ell + m - 1) * legendre[(ell - 2, m)]) / (ell - m)
    outputs = []
    for ell in range(degree):
        for m in range(-ell, ell + 1):
            xy_term = cos_terms[m] if m > 0 else sin_terms[-m] if m < 0 else one
            outputs.append(_normalisation(ell, m) * legendre[(ell, abs(m))] * xy_term)
    return torch.stack(outputs, dim=-1)


@register_encoder()
class SphericalHarmonics(Encoder):
    """``{"otype": "SphericalHarmonics", "degree": 4}``: x: [..., 3] -> [..., degree^2], degree in 1..8.

    Meant for x in [0, 1]^3 (a unit direction v as (v + 1) / 2), evaluated as tcnn does for any x. Any finite
    x: each component saturates at |2x - 1| <= V (``max_component``: 512 in float32, 2^137 in float64, far
    outside the directions it encodes; ``guard_input``, every backend), so outputs and derivatives stay
    finite; beyond it, outputs are those at the bound and the gradient along that component is 0.
    """

    otype = "SphericalHarmonics"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/spherical_harmonics.h (Sloan 2013)"
    supported_backends = frozenset({"torch", "tcnn"})
    defaults = {"degree": 4}

    @classmethod
    def tcnn_columns(cls, spec: EncoderSpec, width: int | None = None) -> list[float | None]:
        """tcnn's SH kernel writes its padded dims (1) first, then the degree^2 values
        (encodings/spherical_harmonics.h kernel_sh)."""
        n = spec.n_output_dims
        return [cls.tcnn_pad_value] * ((width or n) - n) + [None] * n

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        if n_input_dims != 3:
            raise config_error(cls.otype, f"encodes 3D directions only; n_input_dims must be 3, got {n_input_dims}")
        return {"degree": check_int(cls.otype, "degree", config["degree"], 1, MAX_DEGREE)}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["degree"] ** 2

    def _build(self, config: dict[str, Any]) -> None:
        self.degree = config["degree"]

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        v = max_component(x.dtype)
        return x.clamp((1 - v) / 2, (1 + v) / 2)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return spherical_harmonics_encoding(x, self.degree)
