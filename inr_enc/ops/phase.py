"""Keeping sinusoidal encodings finite for every finite input, without changing them on ordinary inputs.

Two tools, both cheap elementwise ops with no host sync:

- ``reduce_period(x, period)``: x mod period, exactly. IEEE fmod is exact (x - n * period is representable, no
  rounding), so a function with that period gets an argument it takes the very same value at. For |x| < period
  it returns x itself, bit for bit. sin(2^k pi x) for integers k >= 0 has period 2 in x (2^k pi * 2 is a multiple
  of 2 pi), so Frequency, TriangleWave and NeRF's "pi" / "2pi" scales read x mod 2: the true value of the formula
  for the float x at any magnitude (a float32 |x| >= 2^24 is an even integer: sin = 0, cos = 1), instead of the
  inf - inf = NaN of an overflowing phase.
- ``saturate(x, rate)``: where the frequencies are arbitrary reals (random or learnt Fourier features, LatentGrid's
  exp-spaced ones, NeRF's scale "1") no exact reduction exists, so x is clamped to +-L with
  L = min(P / rate, P), P = ``phase_limit(dtype)`` = 2^64 (float32) or 2^512 (float64), ``rate`` the largest
  phase per unit of x. Phases then stay below P: finite, and so are their derivatives (a phase times anything
  below P is still far from overflow). Beyond L the encoding is constant (its value at +-L) with zero gradient.
  P is far past where the phase has any precision left (float32 keeps no fraction of a phase above 2^24), so
  an input the clamp moves had only rounding noise for an output; below L nothing changes, bit for bit.
"""

from __future__ import annotations

import math

import torch


def reduce_period(x: torch.Tensor, period: float) -> torch.Tensor:
    """x mod ``period`` (sign of x, |result| < period), exact; x itself where |x| < period. Gradient 1."""
    return torch.fmod(x, period)


def max_exponent(dtype: torch.dtype) -> int:
    """e with the largest finite float of ``dtype`` just below 2^e: 128 for float32, 1024 for float64."""
    return math.frexp(torch.finfo(dtype).max)[1]


def phase_limit(dtype: torch.dtype) -> float:
    """P = 2^(max exponent / 2): 2^64 for float32, 2^512 for float64; P^2 is still below the largest float."""
    return 2.0 ** (max_exponent(dtype) // 2)


def saturate(x: torch.Tensor, rate: float | torch.Tensor) -> torch.Tensor:
    """x clamped to +-min(P / rate, P) (see the module doc); ``rate`` >= 0, a float or a 0-dim tensor (detached)
    on x's device, e.g. computed from trainable frequencies; no host sync either way."""
    limit = phase_limit(x.dtype)
    if isinstance(rate, torch.Tensor):
        bound = (limit / rate.detach().to(x.dtype)).clamp(max=limit)  # rate 0: inf -> P
        return torch.clamp(x, -bound, bound)
    bound = min(limit / rate, limit) if rate > 0 else limit
    return x.clamp(-bound, bound)


def max_row_l1(frequencies: torch.Tensor) -> torch.Tensor:
    """max over rows of sum_i |B_i| of ``frequencies`` [..., d] (detached, 0-dim): |x . b| <= max|x_i| * this."""
    return frequencies.detach().abs().sum(-1).amax() if frequencies.numel() else frequencies.new_zeros(())
