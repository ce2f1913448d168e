"""What a resolved training section (field/schema.py) builds for a fit, one model or a batched group
(fitting/loop.py, fitting/batched.py): the optimiser with its learning-rate schedule, tcnn's weight moving average,
and each step's samples."""

from __future__ import annotations

from typing import Any

import torch

from .ema import WeightEma
from .grid_adam import GridAdam, enable_sparse_gradients
from .lion import Lion
from .schedule import lr_factor


def make_optimizer(model: torch.nn.Module, training: dict[str, Any]) -> tuple[torch.optim.Optimizer, Any]:
    """The optimiser and learning-rate schedule of a resolved ``training`` section. Adam: grid tables get tcnn's lazy
    Adam on sparse gradients (grid_adam.py) where ``lazy_tables``, everything else torch.optim.Adam; with ``l2_reg``,
    the network's weight matrices (``model.matrix_parameters()``: those of its nn.Linear layers) get it as Adam's
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


def batch_index(n: int, batch_size: int | None, generator: torch.Generator,
                device: torch.device) -> torch.Tensor | None:
    """A step's random sample indices [batch_size] into n samples, drawn from ``generator``; None for every sample."""
    if batch_size is None or batch_size >= n:
        return None
    return torch.randint(n, (batch_size,), generator=generator).to(device)
