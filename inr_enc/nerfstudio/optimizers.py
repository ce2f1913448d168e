"""nerfstudio optimizer and scheduler configs for our methods.

Both keep numpy out of checkpoints: nerfstudio's ExponentialDecayScheduler computes its factor with numpy, so the
learning rates it writes into the optimizer (and its own state) are numpy scalars, which torch.load's default
weights_only=True (torch >= 2.6) refuses when ns-eval, ns-render or --load-dir read the checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Tuple, Type

import torch
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.engine.schedulers import Scheduler, SchedulerConfig
from torch.optim import lr_scheduler

from ..optim import GridAdam
from ..optim.schedule import lr_factor


def lazy_adam(params: Iterable[torch.nn.Parameter], lr: float, eps: float = 1e-15, weight_decay: float = 0.0,
              lazy: bool = True, betas: Tuple[float, float] = (0.9, 0.999)) -> GridAdam:
    """Adam over ``params`` in one group; ``lazy``: tiny-cuda-nn's update for grid tables (entries without a
    gradient keep their moments and step count); ``weight_decay``: coupled (tcnn's l2_reg), dense groups only."""
    return GridAdam([{"params": list(params), "lazy": lazy}], lr=lr, eps=eps, weight_decay=weight_decay,
                    betas=tuple(betas))


@dataclass
class LazyAdamOptimizerConfig(AdamOptimizerConfig):
    """AdamOptimizerConfig for grid tables, with tiny-cuda-nn's lazy update (``lazy`` False: torch's Adam update)."""

    _target: Callable[..., GridAdam] = field(default_factory=lambda: lazy_adam)  # a function: not a Type (tyro warns)
    lazy: bool = True
    betas: Tuple[float, float] = (0.9, 0.999)


@dataclass
class LogLinearDecaySchedulerConfig(SchedulerConfig):
    """The learning rate falls from its initial value to ``lr_final`` at ``max_steps``, linearly in log space
    (nerfstudio's ExponentialDecayScheduler without warm-up), then stays there."""

    _target: Type = field(default_factory=lambda: LogLinearDecayScheduler)
    lr_final: float = 1e-3
    max_steps: int = 1000


class LogLinearDecayScheduler(Scheduler):
    config: LogLinearDecaySchedulerConfig

    def get_scheduler(self, optimizer: torch.optim.Optimizer, lr_init: float) -> lr_scheduler.LRScheduler:
        if lr_init <= 0 or self.config.lr_final <= 0 or self.config.max_steps < 1:
            raise ValueError(f"LogLinearDecayScheduler: need lr_init, lr_final > 0 and max_steps >= 1, got "
                             f"{lr_init}, {self.config.lr_final}, {self.config.max_steps}")
        log_ratio = math.log(self.config.lr_final / lr_init)

        def factor(step: int) -> float:  # a Python float: no numpy in the optimizer or scheduler state
            return math.exp(log_ratio * min(step / self.config.max_steps, 1.0))

        return lr_scheduler.LambdaLR(optimizer, lr_lambda=factor)


@dataclass
class ExponentialDecaySchedulerConfig(SchedulerConfig):
    """tcnn's ExponentialDecay: the rate is multiplied by ``decay_base`` at ``decay_start`` and every
    ``decay_interval`` steps after, up to ``decay_end`` (optim/schedule.py ``lr_factor``)."""

    _target: Type = field(default_factory=lambda: ExponentialDecayScheduler)
    decay_start: int = 10000
    decay_interval: int = 10000
    decay_base: float = 0.1
    decay_end: int = 10000000


class ExponentialDecayScheduler(Scheduler):
    config: ExponentialDecaySchedulerConfig

    def get_scheduler(self, optimizer: torch.optim.Optimizer, lr_init: float) -> lr_scheduler.LRScheduler:
        keys = ("decay_start", "decay_interval", "decay_base", "decay_end")
        return lr_scheduler.LambdaLR(optimizer, lr_factor({"schedule": "exponential", "steps": 0,
                                                           **{key: getattr(self.config, key) for key in keys}}))


def tcnn_optimizers(training: Dict[str, Any], camera: Any) -> Dict[str, Any]:
    """nerfstudio's optimizers from tcnn's Adam (wrapped in ExponentialDecay, perhaps) as training keys
    (field/tcnn_sections.py): "fields" get l2_reg (tcnn adds it to its weight matrices' gradients), "grids" tcnn's
    lazy Adam without it (tcnn's non_matrix_l2_reg 0); ``camera``: the "camera_opt" entry, kept as it is."""
    adam = {"lr": training["lr"], "eps": training["eps"], "betas": tuple(training["betas"])}
    scheduler = None
    if training.get("schedule") == "exponential":
        scheduler = ExponentialDecaySchedulerConfig(**{key: training[key] for key in
                                                       ("decay_start", "decay_interval", "decay_base", "decay_end")})
    return {"fields": {"optimizer": LazyAdamOptimizerConfig(**adam, weight_decay=training["l2_reg"], lazy=False),
                       "scheduler": scheduler},
            "grids": {"optimizer": LazyAdamOptimizerConfig(**adam), "scheduler": scheduler},
            **({} if camera is None else {"camera_opt": camera})}
