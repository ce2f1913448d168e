"""Hyb-NeRF's multiresolution hybrid encoding (Wang, Gong, Zeng, "Hyb-NeRF: A Multiresolution Hybrid Encoding
for Neural Radiance Fields", WACV 2024; no public code) with cone-traced features after mip-NeRF (Barron et al.
2021, "Mip-NeRF: A Multiscale Representation for Anti-Aliasing Neural Radiance Fields", eq. 7-14).

The paper keeps one multiresolution schedule: coarse levels use memory-light learnable positional features,
fine levels Instant-NGP's hash grid, and the positional features are cone traced (mip-NeRF's integrated
encoding). Sizes, initialisation and the handling of covariances outside the Fourier part are our choices,
listed in ``Hybrid``'s docstring.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn

from ..config.backends import KERNELS
from ..config.checks import check_choice, check_float, check_int, check_seed
from ..ops.grid import HASH_PRIMES, INTERPOLATIONS, GridLevel, GridLevels, grid_encoding, sparse_accumulator
from ..ops.phase import max_row_l1, saturate
from ..ops.precision import wide_dtype
from .base import seeded_generator
from .grid import (
    Multiresolution,
    check_finest_scale,
    check_level_keys,
    check_table_size,
    init_table,
    levels_buffer_count,
)
from .registry import register_encoder

# Sigma points use chol(cov + (REL_JITTER * trace / d + ABS_JITTER) I): rank-deficient or float32-rounded
# PSD covariances still factor; the shift is far below any grid cell.
REL_JITTER, ABS_JITTER = 1e-6, 1e-12


def _cholesky(a: torch.Tensor) -> torch.Tensor | None:
    """Lower Cholesky factor of [N, d, d] symmetric matrices, column by column in elementwise batched ops
    (LAPACK's one call per matrix is slow for millions of 3x3 ones); None where a pivot is not positive."""
    d = a.shape[-1]
    factor = [[torch.zeros_like(a[:, 0, 0]) for _ in range(d)] for _ in range(d)]
    for j in range(d):
        pivot = a[:, j, j] - sum(factor[j][k] ** 2 for k in range(j))
        if bool((pivot <= 0).any()):
            return None
        factor[j][j] = torch.sqrt(pivot)
        for i in range(j + 1, d):
            factor[i][j] = (a[:, i, j] - sum(factor[i][k] * factor[j][k] for k in range(j))) / factor[j][j]
    return torch.stack([torch.stack(row, dim=-1) for row in factor], dim=-2)


def _rebased(levels: list[GridLevel]) -> list[GridLevel]:
    """The levels with offsets counted from the first of them (a table holding only these levels)."""
    start = levels[0].offset
    return [dataclasses.replace(level, offset=level.offset - start) for level in levels]


@register_encoder()
class Hybrid(Multiresolution):
    """``{"otype": "Hybrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19,
    "base_resolution": 16, "per_level_scale": 2.0, "split_level": 4, "coarse": "Fourier" | "Dense",
    "n_frequencies": 16, "fine_cov": "Mean" | "Erf", "interpolation": "Linear", "hash": "CoherentPrime",
    "seed": 1337}``.

    One multiresolution schedule as in HashGrid (tcnn's level scales s_l = b^l N_min - 1, in float32): levels
    l < split_level are coarse, levels l >= split_level are hash-grid levels. forward(x: [..., d] in [0, 1],
    cov: [..., d, d] | None) -> [..., n_levels * F], level-major (level 0's F features first).

    Fine levels: exactly HashGrid's levels split_level.. for the same keys; ``params`` is that suffix of a
    HashGrid's flat table (tcnn layout), so weights move between the two.
    Coarse "Fourier" (our form of the paper's learnable positional features): per level l, a trainable
    B_l [M, d] in cycles per unit, drawn N(0, (s_l / 4)^2) so ~95% of the frequencies lie below the level's
    Nyquist limit s_l / 2, features [cos(2 pi x B_l^T), sin(2 pi x B_l^T)], then a trainable linear map
    [2M] -> [F] (torch.nn.Linear's init). With cov this is mip-NeRF's integrated encoding, the exact expectation
    for x ~ N(mean, cov): E[cos(2 pi b.x)] = cos(2 pi b.mean) exp(-2 pi^2 b^T cov b), same for sin.
    Any finite x: the Fourier levels read x saturated at +-P / (2 pi max ||b||_1) (as RandomFourier; P = 2^64 in
    float32, 2^512 in float64), the grid levels wrap as HashGrid's do: finite outputs and derivatives.
    Coarse "Dense" (our alternative): DenseGrid levels 0..split_level-1 (same scales), table ``coarse_params``.
    With cov: the unscented transform (2d sigma points mean +- sqrt(d) L_i, L = chol(cov), weights 1/(2d),
    points clamped to [0, 1]); exact for features linear along each L_i, e.g. zero cov or a cov within one cell.
    Fine levels with cov: fine_cov "Mean" (default, the paper cone-traces the positional features only) reads
    the grid at the mean; "Erf" also scales level l's features by Zip-NeRF's erf(1 / sqrt(8 sigma^2 s_l^2)),
    sigma^2 = trace(cov) / d (Barron et al. 2023), so levels finer than the footprint fade out.
    cov must be symmetric PSD (not checked; "Dense" raises ValueError where the Cholesky factor fails).
    Init draws, in order from ``seed``: B, linear weights, biases (or the dense table), then the hash table
    (uniform in [-1e-4, 1e-4] like tcnn).
    """

    otype = "Hybrid"
    source = "Wang et al. 2024 (Hyb-NeRF); Barron et al. 2021 (mip-NeRF) for the cone-traced features"
    supported_backends = frozenset(KERNELS)
    auto_backends = ("cpp", "triton", "torch")
    uses_cov = True
    max_input_dims = 7
    defaults = {
        "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16,
        "per_level_scale": 2.0, "split_level": 4, "coarse": "Fourier", "n_frequencies": 16, "fine_cov": "Mean",
        "interpolation": "Linear", "hash": "CoherentPrime", "seed": 1337,
    }

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        name = cls.otype
        n_levels, n_features, log2_size, base = check_level_keys(name, config)
        scale = check_float(name, "per_level_scale", config["per_level_scale"], 1.0)
        check_finest_scale(name, n_levels, base, scale)
        resolved = {
            "n_levels": n_levels, "n_features_per_level": n_features, "log2_hashmap_size": log2_size,
            "base_resolution": base, "per_level_scale": scale,
            "split_level": check_int(name, "split_level", config["split_level"], 0, n_levels),
            "coarse": check_choice(name, "coarse", config["coarse"], ("Fourier", "Dense")),
            "n_frequencies": check_int(name, "n_frequencies", config["n_frequencies"], 1),
            "fine_cov": check_choice(name, "fine_cov", config["fine_cov"], ("Mean", "Erf")),
            "interpolation": check_choice(name, "interpolation", config["interpolation"], INTERPOLATIONS),
            "hash": check_choice(name, "hash", config["hash"], HASH_PRIMES),
            "seed": check_seed(name, config["seed"]),
        }
        check_table_size(name, cls._levels(n_input_dims, resolved, "Hash"))
        if resolved["coarse"] == "Dense" and resolved["split_level"]:
            check_table_size(name, cls._levels(n_input_dims, resolved, "Dense", resolved["split_level"]))
        return resolved

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        d, split, n_levels, F = n_input_dims, config["split_level"], config["n_levels"], config["n_features_per_level"]
        levels, count = cls._levels(d, config, "Hash"), 0
        if split and config["coarse"] == "Fourier":
            count += split * (config["n_frequencies"] * (d + 2 * F) + F)  # frequencies, weight, bias
        elif split:
            coarse = cls._levels(d, config, "Dense", split)
            count += (coarse[-1].offset + coarse[-1].size) * F + levels_buffer_count(coarse)
        if split < n_levels:
            count += ((levels[-1].offset + levels[-1].size - levels[split].offset) * F
                      + levels_buffer_count(levels[split:]))
        return count

    def _build(self, config: dict[str, Any]) -> None:
        d, split, n_levels = self.n_input_dims, config["split_level"], config["n_levels"]
        n_features, n_freq = config["n_features_per_level"], config["n_frequencies"]
        self.coarse, self.fine_cov, self.interpolation = config["coarse"], config["fine_cov"], config["interpolation"]
        primes, gen = HASH_PRIMES[config["hash"]], seeded_generator(config["seed"])
        all_levels = self._levels(d, config, "Hash")
        self.hashgrid_entries = all_levels[-1].offset + all_levels[-1].size
        self.split_level, self.n_features_per_level = split, n_features
        for param in ("frequencies", "weight", "bias", "coarse_params", "params"):
            self.register_parameter(param, None)
        if split and self.coarse == "Fourier":
            std = torch.tensor([level.scale / 4 for level in all_levels[:split]])[:, None, None]
            self.frequencies = nn.Parameter(torch.randn(split, n_freq, d, generator=gen) * std)
            bound = 1 / math.sqrt(2 * n_freq)
            self.weight = nn.Parameter((torch.rand(split, n_features, 2 * n_freq, generator=gen) * 2 - 1) * bound)
            self.bias = nn.Parameter((torch.rand(split, n_features, generator=gen) * 2 - 1) * bound)
        elif split:
            coarse = self._levels(d, config, "Dense", split)
            self.coarse_levels = GridLevels(coarse, primes)
            self.coarse_params = init_table(coarse, n_features, gen)
        if split < n_levels:
            fine = _rebased(all_levels[split:])
            self.fine_levels = GridLevels(fine, primes)
            self.params = init_table(fine, n_features, gen)

    def table_parameters(self) -> list[nn.Parameter]:
        return [p for p in (self.coarse_params, self.params) if p is not None]

    def memory_bytes(self, bytes_per_param: int = 4) -> dict[str, int]:
        """Parameter memory: "coarse", "fine", "total", and "hashgrid" (a HashGrid with the same keys)."""
        coarse = sum(p.numel() for p in (self.frequencies, self.weight, self.bias, self.coarse_params) if p is not None)
        fine = self.params.numel() if self.params is not None else 0
        sizes = {"coarse": coarse, "fine": fine, "total": coarse + fine,
                 "hashgrid": self.hashgrid_entries * self.n_features_per_level}
        return {key: value * bytes_per_param for key, value in sizes.items()}

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [N, d], cov: [N, d, d] | None -> [N, n_levels * F]; ``backend`` runs the grid levels."""
        parts = []
        if self.frequencies is not None:
            parts.append(self._fourier(x, cov))
        if self.coarse_params is not None:
            parts.append(self._dense(x, cov, backend))
        if self.params is not None:
            parts.append(self._fine(x, cov, backend))
        return torch.cat(parts, dim=-1)

    def _fourier(self, x: torch.Tensor, cov: torch.Tensor | None) -> torch.Tensor:
        frequencies = self.frequencies.to(x.dtype)  # [Lc, M, d]
        x = saturate(x, 2 * math.pi * max_row_l1(frequencies))  # phases stay finite (ops/phase.py)
        projected = 2 * math.pi * torch.einsum("nd,lmd->lnm", x, frequencies)
        cos, sin = torch.cos(projected), torch.sin(projected)
        if cov is not None:  # mip-NeRF's IPE: Var(2 pi b.x) = 4 pi^2 b^T cov b, damping exp(-Var / 2)
            variance = torch.einsum("lmd,nde,lme->lnm", frequencies, cov, frequencies)
            damping = torch.exp(-2 * math.pi**2 * variance)
            cos, sin = cos * damping, sin * damping
        features = torch.cat([cos, sin], dim=-1)  # [Lc, N, 2M]
        out = torch.einsum("lnk,lfk->nlf", features, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        return out.reshape(x.shape[0], out.shape[1] * out.shape[2])

    def _dense(self, x: torch.Tensor, cov: torch.Tensor | None, backend: str) -> torch.Tensor:
        F = self.n_features_per_level
        if cov is None:
            return grid_encoding(x, self.coarse_params, self.coarse_levels, F, self.interpolation, backend)
        n, d = x.shape
        wide = wide_dtype(x.device)
        cov64 = (cov + cov.transpose(1, 2)).to(wide) / 2  # Cholesky reads one triangle; use both, as b^T cov b does
        jitter = REL_JITTER * cov64.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(0) + ABS_JITTER
        eye = torch.eye(d, dtype=wide, device=x.device)
        chol = _cholesky(cov64 + jitter[:, None, None] * eye)
        if chol is None:
            raise ValueError(f"{self.otype}: coarse 'Dense' needs a positive semi-definite cov (Cholesky failed)")
        zero = (cov64 == 0).flatten(1).all(1)[:, None, None]
        chol = torch.where(zero, torch.zeros_like(chol), chol).to(x.dtype)
        offsets = math.sqrt(d) * chol.transpose(1, 2)  # row i: sqrt(d) times column i of L
        points = torch.cat([x[:, None] + offsets, x[:, None] - offsets], dim=1).clamp(0, 1)  # [N, 2d, d]
        features = grid_encoding(points.reshape(-1, d), self.coarse_params, self.coarse_levels, F, self.interpolation,
                                 backend)
        return features.reshape(n, 2 * d, features.shape[-1]).mean(dim=1)

    def _fine(self, x: torch.Tensor, cov: torch.Tensor | None, backend: str) -> torch.Tensor:
        F = self.n_features_per_level
        out = grid_encoding(x, self.params, self.fine_levels, F, self.interpolation, backend,
                            sparse_accumulator(self, self.params))
        if cov is None or self.fine_cov == "Mean":
            return out
        variance = cov.diagonal(dim1=-2, dim2=-1).mean(-1)[:, None]  # [N, 1]
        positive = variance > 0
        safe = torch.where(positive, variance, torch.ones_like(variance))  # keeps gradients finite at zero cov
        scales = self.fine_levels.scale.to(x.dtype)
        weights = torch.where(positive, torch.erf(torch.rsqrt(8 * safe * scales**2)), torch.ones_like(safe))
        return (out.reshape(x.shape[0], scales.shape[0], F) * weights[..., None]).reshape(out.shape)
