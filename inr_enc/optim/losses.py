"""The training losses, one registry for inr-fit (``training.loss``), tcnn's ``loss`` section and the ns-train
plugin (``rgb_loss``): name -> :class:`Loss` (the function of each element, and the tcnn/Instant-NGP otypes read
as it).

As tiny-cuda-nn computes them (include/tiny-cuda-nn/losses/*.h): a denominator that holds the prediction is not
differentiated (tcnn's gradient treats it as a constant); 0.01 keeps it away from 0. Huber as Instant-NGP uses it
(include/neural-graphics-primitives/nerf_device.cuh, also named SmoothL1): delta 0.1, divided by 5 so that it
equals L2 near zero, i.e. 2 x torch's huber_loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..config.checks import check_choice

Elementwise = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (prediction, target) [...] -> loss [...]


@dataclass(frozen=True)
class Loss:
    """A training loss: ``name`` (what training.loss and rgb_loss hold), ``function`` (prediction, target ->
    the loss of each element, shaped like prediction; the step's loss is their mean) and ``tcnn`` (the otypes of
    tcnn's and Instant-NGP's loss sections read as this loss, matched case-insensitively)."""

    name: str
    function: Elementwise
    tcnn: tuple[str, ...]


LOSSES: dict[str, Loss] = {}


def register_loss(name: str, *tcnn: str) -> Callable[[Elementwise], Elementwise]:
    """Function decorator: the loss ``name``, read from tcnn's sections under the otypes ``tcnn``."""
    def add(function: Elementwise) -> Elementwise:
        LOSSES[name] = Loss(name, function, tcnn)
        return function

    return add


@register_loss("MSE", "L2")
def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(p - t)^2 (tcnn l2.h)."""
    return (prediction - target) ** 2


@register_loss("L1", "L1")
def l1(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """|p - t| (tcnn l1.h)."""
    return (prediction - target).abs()


@register_loss("RelativeL1", "RelativeL1")
def relative_l1(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """|p - t| / (|p| + 0.01), the denominator constant (tcnn relative_l1.h)."""
    return (prediction - target).abs() / (prediction.detach().abs() + 0.01)


@register_loss("RelativeL2", "RelativeL2")
def relative_l2(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(p - t)^2 / (p^2 + 0.01), the denominator constant (tcnn relative_l2.h)."""
    return (prediction - target) ** 2 / (prediction.detach() ** 2 + 0.01)


@register_loss("MAPE", "MAPE")
def mape(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """|p - t| / (|t| + 0.01) (tcnn mape.h)."""
    return (prediction - target).abs() / (target.abs() + 0.01)


@register_loss("SMAPE", "SMAPE")
def smape(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """|p - t| / ((|t| + |p|) / 2 + 0.01), the denominator constant (tcnn smape.h)."""
    return (prediction - target).abs() / (0.5 * (target.abs() + prediction.detach().abs()) + 0.01)


@register_loss("Huber", "Huber", "SmoothL1")
def huber(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """d = |p - t|: d^2 / (2 x 0.1) / 5 up to 0.1, then (d - 0.05) / 5 (Instant-NGP nerf_device.cuh)."""
    return 2 * torch.nn.functional.huber_loss(prediction, target, reduction="none", delta=0.1)


TCNN_LOSSES = {otype: loss.name for loss in LOSSES.values() for otype in loss.tcnn}  # tcnn otype -> loss name


def check_loss(section: str, key: str, value: Any) -> str:
    """A loss name (case-insensitive), or a tcnn otype read as one ("L2" is MSE), -> the loss's name; ValueError
    naming ``section``, ``key`` and the losses."""
    name = check_choice(section, key, value, [*LOSSES, *sorted(set(TCNN_LOSSES) - set(LOSSES))])
    return TCNN_LOSSES.get(name, name)


def elementwise_loss(name: str, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The loss ``name`` (a checked name) of each element, shaped like ``prediction``."""
    return LOSSES[name].function(prediction, target)
