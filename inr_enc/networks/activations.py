"""Activations by tcnn-style name, including SIREN's sine and SPDER's damped sinusoids.

SIREN: Sitzmann et al. 2020. SPDER: Shah & Sitawarin, ICLR 2024 (katop1234/SPDER): y = sin(z) sqrt(|z|),
for audio y = sin(z) arctan(z); the network scales pre-activations by omega_0 before these.
"""

from __future__ import annotations

from typing import Callable

import torch

# sqrt(|z|) is evaluated as sqrt(max(|z|, SPDER_EPS)), as the SPDER reference guards it: the derivative of
# sin(z) sqrt(|z|) at 0 is then sqrt(SPDER_EPS) (1e-6; the exact value is 0) and the second derivative stays
# finite, where the unguarded sqrt gives 0 * inf = NaN.
SPDER_EPS = 1e-12


def spder(z: torch.Tensor) -> torch.Tensor:
    """sin(z) * sqrt(|z|): unbounded, ~ z^1.5 near 0."""
    return torch.sin(z) * torch.sqrt(torch.clamp(z.abs(), min=SPDER_EPS))


def spder_arctan(z: torch.Tensor) -> torch.Tensor:
    """sin(z) * arctan(z): SPDER's audio variant, in (-pi/2, pi/2)."""
    return torch.sin(z) * torch.atan(z)


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "None": lambda z: z,
    "ReLU": torch.relu,
    "LeakyReLU": lambda z: torch.nn.functional.leaky_relu(z, 0.01),
    "Sigmoid": torch.sigmoid,
    "Tanh": torch.tanh,
    "Softplus": torch.nn.functional.softplus,
    "Exponential": torch.exp,
    "Sine": torch.sin,
    "SPDER": spder,
}
PERIODIC = ("Sine", "SPDER")

# tiny-cuda-nn's activations (common_device.h warp_activation), for its FullyFusedMLP and CutlassMLP. Softplus and
# Squareplus are sharpened by K_ACT: softplus(10 z) / 10 and (10 z + sqrt((10 z)^2 + 4)) / 20.
K_ACT = 10.0
TCNN_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "None": lambda z: z,
    "ReLU": torch.relu,
    "LeakyReLU": lambda z: torch.nn.functional.leaky_relu(z, 0.01),
    "SiLU": torch.nn.functional.silu,
    "Exponential": torch.exp,
    "Sine": torch.sin,
    "Sigmoid": torch.sigmoid,
    "Squareplus": lambda z: (K_ACT * z + torch.sqrt((K_ACT * z) ** 2 + 4)) / (2 * K_ACT),
    "Softplus": lambda z: torch.nn.functional.softplus(z, beta=K_ACT),
    "Tanh": torch.tanh,
}  # activations that take omega_0-scaled pre-activations and SIREN's init
