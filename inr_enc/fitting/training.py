"""The training section's parts shared by one fit and a batched group (loop.py, batched.py): the loss per
element, the learning-rate schedule, the optimiser with its weight moving average, and the step's samples.

Losses as tiny-cuda-nn computes them (include/tiny-cuda-nn/losses/*.h): a denominator that holds the prediction is
not differentiated (tcnn's gradient treats it as a constant); 0.01 keeps it away from 0. Huber as Instant-NGP
uses it (nerf_device.cuh): delta 0.1, divided by 5 so that it equals L2 near zero, i.e. 2 x torch's huber_loss.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..optim import GridAdam, Lion, enable_sparse_gradients
from ..optim.ema import WeightEma


def elementwise_loss(kind: str, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The training loss of each output element (the step's loss is their mean), shaped like ``prediction``."""
    difference = prediction - target
    if kind == "MSE":
        return difference**2
    if kind == "L1":
        return difference.abs()
    if kind == "RelativeL2":  # (p - t)^2 / (p^2 + 0.01)
        return difference**2 / (prediction.detach() ** 2 + 0.01)
    if kind == "RelativeL1":  # |p - t| / (|p| + 0.01)
        return difference.abs() / (prediction.detach().abs() + 0.01)
    if kind == "MAPE":  # |p - t| / (|t| + 0.01)
        return difference.abs() / (target.abs() + 0.01)
    if kind == "SMAPE":  # |p - t| / ((|t| + |p|) / 2 + 0.01)
        return difference.abs() / (0.5 * (target.abs() + prediction.detach().abs()) + 0.01)
    if kind == "Huber":
        return 2 * torch.nn.functional.huber_loss(prediction, target, reduction="none", delta=0.1)
    raise ValueError(f"unknown loss {kind!r}")


def lr_factor(training: dict[str, Any]) -> Callable[[int], float]:
    """The learning-rate schedule: steps taken -> factor of the initial rate."""
    kind, steps = training["schedule"], training["steps"]
    if kind == "cosine":  # from lr down to lr / 100 at the last step
        return lambda step: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(step, steps) / max(steps, 1)))
    if kind == "exponential":  # tcnn's ExponentialDecay: x decay_base at start, start + interval, ... up to end
        base, start, interval, end = (training[k] for k in ("decay_base", "decay_start", "decay_interval", "decay_end"))
        return lambda step: base ** ((min(step, end) - start) // interval + 1) if start <= step and start <= end else 1.0
    return lambda step: 1.0


def make_optimizer(model: torch.nn.Module, training: dict[str, Any]) -> tuple[torch.optim.Optimizer, Any]:
    """The optimiser and learning-rate schedule of a resolved ``training`` section. Adam: grid tables get tcnn's lazy
    Adam on sparse gradients (optim/) where ``lazy_tables``, everything else torch.optim.Adam; with ``l2_reg``, the
    network's weight matrices (``model.matrix_parameters()``: those of its nn.Linear layers) get it as Adam's
    (coupled) weight decay, as tcnn's Adam adds l2_reg * w to their gradients. Lion: every parameter, dense."""
    if training["solver"] == "lion":
        enable_sparse_gradients(model, False)
        optimizer = Lion(model.parameters(), lr=training["lr"], betas=tuple(training["betas"]),
                         weight_decay=training["weight_decay"])
    else:
        optimizer = GridAdam.for_model(model, lr=training["lr"], lazy=training["lazy_tables"],
                                       l2_reg=training["l2_reg"], betas=tuple(training["betas"]), eps=training["eps"])
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(training))


def make_average(model: torch.nn.Module, training: dict[str, Any]) -> WeightEma | None:
    """tcnn's Ema: the moving average of ``model``'s parameters that evaluation and the saved model use; None
    without ``ema_decay``."""
    return None if training["ema_decay"] is None else WeightEma(list(model.parameters()), training["ema_decay"])


def batch_index(n: int, batch_size: int | None, generator: torch.Generator, device: torch.device) -> torch.Tensor | None:
    """A step's random sample indices [batch_size] into n samples, drawn from ``generator``; None for every sample."""
    if batch_size is None or batch_size >= n:
        return None
    return torch.randint(n, (batch_size,), generator=generator).to(device)
