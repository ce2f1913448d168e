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

from ..kernels import grid_kernel
from .base import Encoder, check_choice, check_float, check_int, seeded_generator
from .grid import HASH_PRIMES, INTERPOLATIONS, check_level_keys, init_table
from .grid_functional import GridLevels, grid_encoding, sparse_accumulator
from .grid_layout import GridLevel, grid_levels

# Sigma points use chol(cov + (REL_JITTER * trace / d + ABS_JITTER) I): rank-deficient or float32-rounded
# PSD covariances still factor; the shift is far below any grid cell.
REL_JITTER, ABS_JITTER = 1e-6, 1e-12


def frustum_gaussian(
    origins: torch.Tensor, directions: torch.Tensor, t_starts: torch.Tensor, t_ends: torch.Tensor,
    radii: torch.Tensor, shape: str = "cone",
) -> tuple[torch.Tensor, torch.Tensor]:
    """mip-NeRF's Gaussian of the ray interval [t_starts, t_ends] of the cone o + t d (radius ``radii * t``).

    origins, directions: [..., d] (directions need not be unit); t_starts, t_ends, radii: [...]; mip-NeRF sets
    radii to the pixel width at t = 1 times 2 / sqrt(12). With t_mu = (t0 + t1) / 2, t_delta = (t1 - t0) / 2:
      "cone" (mip-NeRF eq. 7, its numerically stable form of the frustum's exact moments):
        mu_t = t_mu + 2 t_mu t_delta^2 / (3 t_mu^2 + t_delta^2),
        sigma_t^2 = t_delta^2 / 3 - 4 t_delta^4 (12 t_mu^2 - t_delta^2) / (15 (3 t_mu^2 + t_delta^2)^2),
        sigma_r^2 = r^2 (t_mu^2 / 4 + 5 t_delta^2 / 12 - 4 t_delta^4 / (15 (3 t_mu^2 + t_delta^2)));
      "cylinder": mu_t = t_mu, sigma_t^2 = (t1 - t0)^2 / 12 (a uniform interval), sigma_r^2 = r^2 / 4.
    Returns mean [..., d] = o + mu_t d and cov [..., d, d] = sigma_t^2 d d^T + sigma_r^2 (I - d d^T / |d|^2)
    (eq. 8). Hybrid wants both in [0, 1] coordinates: for x = (p - lo) / (hi - lo) divide cov[i, j] by
    (hi - lo)_i (hi - lo)_j.
    """
    t_mu, t_delta = (t_starts + t_ends) / 2, (t_ends - t_starts) / 2
    if shape == "cone":
        mu2, delta2 = t_mu**2, t_delta**2
        denom = 3 * mu2 + delta2
        mean_t = t_mu + 2 * t_mu * delta2 / denom
        var_t = delta2 / 3 - 4 * delta2**2 * (12 * mu2 - delta2) / (15 * denom**2)
        var_r = radii**2 * (mu2 / 4 + 5 * delta2 / 12 - 4 * delta2**2 / (15 * denom))
    elif shape == "cylinder":
        mean_t, var_t, var_r = t_mu, (t_ends - t_starts) ** 2 / 12, radii**2 / 4
    else:
        raise ValueError(f"frustum_gaussian: shape must be 'cone' or 'cylinder', got {shape!r}")
    mean = origins + mean_t[..., None] * directions
    outer = directions[..., :, None] * directions[..., None, :]
    eye = torch.eye(directions.shape[-1], dtype=directions.dtype, device=directions.device)
    norm2 = (directions**2).sum(-1).clamp_min(1e-10)[..., None, None]
    cov = var_t[..., None, None] * outer + var_r[..., None, None] * (eye - outer / norm2)
    return mean, cov


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


class Hybrid(Encoder):
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
    grid_kernels = True
    max_input_dims = 7
    defaults = {
        "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16,
        "per_level_scale": 2.0, "split_level": 4, "coarse": "Fourier", "n_frequencies": 16, "fine_cov": "Mean",
        "interpolation": "Linear", "hash": "CoherentPrime", "seed": 1337,
    }

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        name, d = self.otype, self.n_input_dims
        n_levels, n_features, log2_size, base = check_level_keys(name, config)
        scale = check_float(name, "per_level_scale", config["per_level_scale"], 1.0)
        split = check_int(name, "split_level", config["split_level"], 0, n_levels)
        self.coarse = check_choice(name, "coarse", config["coarse"], ("Fourier", "Dense"))
        n_freq = check_int(name, "n_frequencies", config["n_frequencies"], 1)
        self.fine_cov = check_choice(name, "fine_cov", config["fine_cov"], ("Mean", "Erf"))
        self.interpolation = check_choice(name, "interpolation", config["interpolation"], INTERPOLATIONS)
        hash_name = check_choice(name, "hash", config["hash"], HASH_PRIMES)
        seed = check_int(name, "seed", config["seed"], 0)

        primes, gen = HASH_PRIMES[hash_name], seeded_generator(seed)
        all_levels = grid_levels(d, "Hash", n_levels, log2_size, base, scale)
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
            coarse = grid_levels(d, "Dense", split, log2_size, base, scale)
            self.coarse_levels = GridLevels(coarse, primes)
            self.coarse_params = init_table(name, coarse, n_features, gen)
        if split < n_levels:
            fine = _rebased(all_levels[split:])
            self.fine_levels = GridLevels(fine, primes)
            self.params = init_table(name, fine, n_features, gen)
        self.n_output_dims = n_levels * n_features
        return {
            "n_levels": n_levels, "n_features_per_level": n_features, "log2_hashmap_size": log2_size,
            "base_resolution": base, "per_level_scale": scale, "split_level": split, "coarse": self.coarse,
            "n_frequencies": n_freq, "fine_cov": self.fine_cov, "interpolation": self.interpolation,
            "hash": hash_name, "seed": seed,
        }

    def table_parameters(self) -> list[nn.Parameter]:
        return [p for p in (self.coarse_params, self.params) if p is not None]

    def output_bands(self) -> torch.Tensor:
        """Output j belongs to level j // n_features_per_level (level-major, coarse first)."""
        return torch.arange(self.n_output_dims) // self.n_features_per_level

    def memory_bytes(self, bytes_per_param: int = 4) -> dict[str, int]:
        """Parameter memory: "coarse", "fine", "total", and "hashgrid" (a HashGrid with the same keys)."""
        coarse = sum(p.numel() for p in (self.frequencies, self.weight, self.bias, self.coarse_params) if p is not None)
        fine = self.params.numel() if self.params is not None else 0
        sizes = {"coarse": coarse, "fine": fine, "total": coarse + fine,
                 "hashgrid": self.hashgrid_entries * self.n_features_per_level}
        return {key: value * bytes_per_param for key, value in sizes.items()}

    def forward(self, x: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [..., d] in [0, 1]; cov: None or [..., d, d] (x's batch shape), a Gaussian's covariance in x's units."""
        if cov is None:
            return super().forward(x)
        batch_shape = x.shape[:-1] if isinstance(x, torch.Tensor) and x.dim() > 0 else ()
        flat = self.check_input(x)
        d = self.n_input_dims
        if not isinstance(cov, torch.Tensor) or not cov.is_floating_point():
            kind = f"dtype {cov.dtype}" if isinstance(cov, torch.Tensor) else type(cov).__name__
            raise ValueError(f"{self.otype}: cov must be a floating point torch.Tensor, got {kind}")
        if tuple(cov.shape) != (*batch_shape, d, d):
            expected = [*batch_shape, d, d]
            raise ValueError(f"{self.otype}: cov must have shape {expected} (the input's batch shape + [d, d]), "
                             f"got {list(cov.shape)}")
        if not bool(torch.isfinite(cov).all()):
            raise ValueError(f"{self.otype}: cov contains NaN or inf")
        out = self.encode(flat, cov.reshape(-1, d, d).to(flat.dtype))
        return out.reshape(*batch_shape, self.n_output_dims)

    def encode(self, x: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [N, d], cov: [N, d, d] | None -> [N, n_levels * F]."""
        parts = []
        if self.frequencies is not None:
            parts.append(self._fourier(x, cov))
        if self.coarse_params is not None:
            parts.append(self._dense(x, cov))
        if self.params is not None:
            parts.append(self._fine(x, cov))
        return torch.cat(parts, dim=-1)

    def _fourier(self, x: torch.Tensor, cov: torch.Tensor | None) -> torch.Tensor:
        frequencies = self.frequencies.to(x.dtype)  # [Lc, M, d]
        projected = 2 * math.pi * torch.einsum("nd,lmd->lnm", x, frequencies)
        cos, sin = torch.cos(projected), torch.sin(projected)
        if cov is not None:  # mip-NeRF's IPE: Var(2 pi b.x) = 4 pi^2 b^T cov b, damping exp(-Var / 2)
            variance = torch.einsum("lmd,nde,lme->lnm", frequencies, cov, frequencies)
            damping = torch.exp(-2 * math.pi**2 * variance)
            cos, sin = cos * damping, sin * damping
        features = torch.cat([cos, sin], dim=-1)  # [Lc, N, 2M]
        out = torch.einsum("lnk,lfk->nlf", features, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        return out.reshape(x.shape[0], out.shape[1] * out.shape[2])

    def _dense(self, x: torch.Tensor, cov: torch.Tensor | None) -> torch.Tensor:
        F = self.n_features_per_level
        if cov is None:
            return grid_encoding(x, self.coarse_params, self.coarse_levels, F, self.interpolation, grid_kernel(self.backend))
        n, d = x.shape
        wide = torch.float32 if x.device.type == "mps" else torch.float64  # MPS has no float64
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
                                 grid_kernel(self.backend))
        return features.reshape(n, 2 * d, features.shape[-1]).mean(dim=1)

    def _fine(self, x: torch.Tensor, cov: torch.Tensor | None) -> torch.Tensor:
        F = self.n_features_per_level
        out = grid_encoding(x, self.params, self.fine_levels, F, self.interpolation, grid_kernel(self.backend),
                            sparse_accumulator(self, self.params))
        if cov is None or self.fine_cov == "Mean":
            return out
        variance = cov.diagonal(dim1=-2, dim2=-1).mean(-1)[:, None]  # [N, 1]
        positive = variance > 0
        safe = torch.where(positive, variance, torch.ones_like(variance))  # keeps gradients finite at zero cov
        scales = self.fine_levels.scale.to(x.dtype)
        weights = torch.where(positive, torch.erf(torch.rsqrt(8 * safe * scales**2)), torch.ones_like(safe))
        return (out.reshape(x.shape[0], scales.shape[0], F) * weights[..., None]).reshape(out.shape)
