"""Shifted basis embeddings (Zheng et al., ECCV 2022, "Trading Positional Complexity vs. Deepness in
Coordinate Networks"; osiriszjq/complex_encoding, utils.py ``encoding_func_1D`` / ``encoding_func_2D``)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config.checks import check_choice, check_float, check_int, config_error
from .base import Encoder
from .registry import register_encoder

BASES = ("gaussian", "triangle", "box", "impulse", "sinc")
AXES = ("separable", "diagonal")
# Default ``width`` in units of the centre spacing 1/K. Gaussian: the reference's 2D image setting is
# sigma = 0.006 at K = 128 per axis (2D_separable_points.py), 0.77 spacings. Triangle: d = 1/K, the reference's 1D
# default (hat functions, i.e. linear interpolation; its 2D scripts use 1/(4K)). Box: the triangle's support. Sinc: 1/K
# puts each copy's zeros on the other centres (Whittaker-Shannon interpolation).
DEFAULT_WIDTH = {"gaussian": 0.75, "triangle": 1.0, "box": 1.0, "sinc": 1.0}
MAX_BASES = 1 << 21  # max_axis_norm reads a grid of m K <= 2^22 points (m >= 2)
MIN_WIDTH, MAX_WIDTH = 1e-9, 1e3  # in coordinate units: (t - c) / width stays finite in float32
_SINC_SERIES = 0.01  # |u| below this: Taylor series, so that second derivatives stay finite at u = 0


def axis_range(basis: str, width: float | None, dtype: torch.dtype) -> tuple[float, float]:
    """[lo, hi] that axis coordinates are clamped to, so every finite input gives finite outputs and derivatives
    (no (t - c) / width overflowing to inf, nor 0 * inf in a gradient). Centres lie in [0, 1) and lo, hi are 1 + a
    margin beyond: gaussian 40 widths (exp(-800) is 0 even in float64), triangle and box one width, impulse
    none, so every copy is exactly 0 (impulse: the same end centre) at lo, hi and beyond, and the clamp changes
    no output. Sinc never reaches 0: its margin is 2^24 widths (float64: 2^53), where |sinc| < 2e-8 (float64:
    4e-17) and the float32 phase pi u has no fraction left; beyond it the values are those at lo, hi."""
    margin = {"gaussian": 40.0, "triangle": 1.0, "box": 1.0, "sinc": 2 / torch.finfo(dtype).eps}.get(basis, 0.0)
    margin *= width or 0.0
    return -1.0 - margin, 2.0 + margin


def _sinc(u: torch.Tensor) -> torch.Tensor:
    """sin(pi u) / (pi u); torch.sinc's second derivative is NaN at u = 0 (a sample on a centre)."""
    small = u.abs() < _SINC_SERIES
    z = math.pi * torch.where(small, torch.zeros_like(u), u)
    z_small = math.pi * torch.where(small, u, torch.zeros_like(u))
    z2 = z_small * z_small
    series = 1 - z2 / 6 * (1 - z2 / 20 * (1 - z2 / 42))
    return torch.where(small, series, torch.sin(z) / torch.where(small, torch.ones_like(z), z))


def _zero_graph(d: torch.Tensor) -> torch.Tensor:
    """Zeros whose derivatives of every order are zero but still depend on d, so a piecewise-constant basis
    supports double backward like the others (0 * d would leave a first derivative with no graph)."""
    return 0.0 * torch.sin(d)


def _profile(d: torch.Tensor, basis: str, width: float) -> torch.Tensor:
    """One copy of ``basis`` (not impulse) at offsets d = t - c from its centre."""
    if basis == "gaussian":
        return torch.exp(-0.5 * (d / width) ** 2)
    if basis == "triangle":
        return torch.relu(1 - d.abs() / width)
    if basis == "sinc":
        return _sinc(d / width)
    return ((d >= -width) & (d < width)).to(d.dtype) + _zero_graph(d)


def shifted_basis(t: torch.Tensor, n_bases: int, basis: str, width: float | None) -> torch.Tensor:
    """t: [...] -> [..., K], unnormalised: copy j of ``basis`` centred at c_j = j / K, j = 0 .. K-1
    (the reference's linspace(0, 1, K + 1)[:-1]).

    gaussian exp(-(t - c)^2 / (2 width^2)); triangle max(0, 1 - |t - c| / width) (both as in the reference);
    box 1 on c - width <= t < c + width (half-open, so a point on an edge counts once); impulse: one-hot of
    the nearest centre (ties go to the upper one); sinc sin(pi u) / (pi u) with u = (t - c) / width.
    Box and impulse are piecewise constant: every derivative is zero (see ``_zero_graph``).
    """
    k = n_bases
    d = t.unsqueeze(-1) - torch.arange(k, dtype=t.dtype, device=t.device) / k
    if basis != "impulse":
        return _profile(d, basis, width)
    nearest = torch.clamp(torch.floor(t * k + 0.5), 0, k - 1).long()
    return torch.nn.functional.one_hot(nearest, k).to(t.dtype) + _zero_graph(d)


def _lattice_max_norm2(k: int, m: int, basis: str, width: float, shift: float) -> float:
    """max of ||shifted_basis(t)||^2 over t_i = i / (m K) + shift, i = 0 .. m K, t_i in [0, 1] (0 if none).

    t_i - c_j = (i - m j) / (m K) + shift, so each norm^2 is a window sum of one sampled profile: O(m K)."""
    offsets = torch.arange(-(k - 1) * m, k * m + 1, dtype=torch.float64) / (m * k) + shift
    profile = torch.cat([_profile(offsets, basis, width) ** 2, torch.zeros(m - 1, dtype=torch.float64)])
    # row l, column r: offset index l m + r; the norm^2 at t_{q m + r} sums rows q .. q + K - 1 of column r
    rows = torch.cat([torch.zeros(1, m, dtype=torch.float64), profile.reshape(2 * k, m).cumsum(0)])
    norm2 = (rows[k:] - rows[: k + 1]).flatten()[: m * k + 1]
    t = torch.arange(m * k + 1, dtype=torch.float64) / (m * k) + shift
    inside = norm2[(t >= 0) & (t <= 1)]
    return inside.max().item() if inside.numel() else 0.0


def max_axis_norm(n_bases: int, basis: str, width: float | None) -> float:
    """max over t in [0, 1] of ||shifted_basis(t)||, in float64.

    impulse: 1. box: exact, the count of boxes holding t only rises at t = 0 or at a box's left edge, so it is
    read there with two searchsorted. gaussian, triangle, sinc: the maximum over the grid i / (m K),
    i = 0 .. m K, which holds every centre and midpoint (m even, at least 8 and 8 points per width, m K <= 2^22,
    see ``_lattice_max_norm2``). Triangle also reads the grid shifted by +- width, which holds every kink c_j +- width:
    exact, as its squared norm is convex between kinks. Gaussian and sinc: low by O(step^2), ~1e-6 relative.
    """
    k = n_bases
    if basis == "impulse":
        return 1.0
    if basis == "box":
        starts = torch.arange(k, dtype=torch.float64) / k - width
        ends = starts + 2 * width
        t = torch.cat([torch.zeros(1, dtype=torch.float64), starts[(starts > 0) & (starts <= 1)]])
        count = torch.searchsorted(starts, t, right=True) - torch.searchsorted(ends, t, right=True)
        return math.sqrt(count.max().item())
    m = 2 * max(1, min(max(4, math.ceil(4 / (k * width))), (1 << 21) // k))
    shifts = (0.0, width, -width) if basis == "triangle" else (0.0,)
    return math.sqrt(max(_lattice_max_norm2(k, m, basis, width, s) for s in shifts))


@register_encoder()
class ShiftedBasis(Encoder):
    """``{"otype": "ShiftedBasis", "n_bases": 128, "basis": "gaussian", "width": null, "axes": "separable"}``.

    Each axis coordinate t gets K = ``n_bases`` shifted copies of one basis function (see ``shifted_basis``);
    ``width`` is the gaussian sigma / triangle or box half-width / sinc scale, null for the per-basis default
    (``DEFAULT_WIDTH`` spacings of 1/K) and must stay null for impulse. ``axes``: "separable" encodes each
    input dim on its own; "diagonal" (2 inputs only) also encodes (x + y) / 2 and (x - y + 1) / 2, 4 axes
    in the order x, y, (x + y) / 2, (x - y + 1) / 2 as in the reference. Default K = 128: the reference's
    2D images use 512 features, 128 per axis on the 4 diagonal axes.

    The reference divides each embedding by the largest row norm in the batch, so a sample's code depends
    on the rest of the batch. Here the divisor is fixed at construction: sqrt(n_axes) * max_axis_norm, so
    row norms are <= 1 on [0, 1]^d (up to the grid's O(step^2) for gaussian/sinc), with equality where every
    axis sits at the per-axis maximum (reached for "separable", nearly for "diagonal").
    x: [..., d] in [0, 1] -> [..., n_axes * K] (axis-major), values in [0, 1] (sinc: [-1, 1]). Any finite x:
    axis coordinates are clamped to ``axis_range`` (outputs unchanged: every copy is already 0 there; sinc:
    saturates beyond 2^24 widths), so outputs and derivatives stay finite.
    """

    otype = "ShiftedBasis"
    source = "Zheng et al. 2022 (Trading Positional Complexity vs. Deepness in Coordinate Networks)"
    defaults = {"n_bases": 128, "basis": "gaussian", "width": None, "axes": "separable"}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        k = check_int(cls.otype, "n_bases", config["n_bases"], 1)
        if k > MAX_BASES:
            raise config_error(cls.otype, f"'n_bases' must be at most {MAX_BASES} (2^21), got {k}")
        basis = check_choice(cls.otype, "basis", config["basis"], BASES)
        width = config["width"]
        if basis == "impulse":
            if width is not None:
                raise config_error(cls.otype, f"'width' is not used by basis 'impulse'; leave it null, got {width!r}")
        elif width is None:
            width = DEFAULT_WIDTH[basis] / k
        else:
            width = check_float(cls.otype, "width", width, 0.0, low_inclusive=False, high=MAX_WIDTH)
            if width < MIN_WIDTH:
                raise config_error(cls.otype,
                                   f"'width' must be at least {MIN_WIDTH:g} (float32 coordinates), got {width:g}")
        axes = check_choice(cls.otype, "axes", config["axes"], AXES)
        if axes == "diagonal" and n_input_dims != 2:
            raise config_error(cls.otype, f"'axes' \"diagonal\" needs exactly 2 input dims, got {n_input_dims}")
        return {"n_bases": k, "basis": basis, "width": width, "axes": axes}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return (4 if config["axes"] == "diagonal" else n_input_dims) * config["n_bases"]

    def _build(self, config: dict[str, Any]) -> None:
        self.n_bases, self.basis, self.width, self.axes = (config[k] for k in ("n_bases", "basis", "width", "axes"))
        self.n_axes = self.n_output_dims // self.n_bases
        self.scale = 1.0 / (math.sqrt(self.n_axes) * max_axis_norm(self.n_bases, self.basis, self.width))

    def axis_coords(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, d] -> [N, n_axes]: the inputs, then for "diagonal" (x + y) / 2 and (x - y + 1) / 2 (in [0, 1])."""
        if self.axes == "separable":
            return x
        u, v = x[:, 0:1], x[:, 1:2]
        return torch.cat([u, v, (u + v) / 2, (u - v + 1) / 2], dim=1)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        t = self.axis_coords(x).clamp(*axis_range(self.basis, self.width, x.dtype))  # diagonal may overflow to +-inf
        phi = shifted_basis(t, self.n_bases, self.basis, self.width)
        return (phi * self.scale).reshape(x.shape[0], self.n_output_dims)
