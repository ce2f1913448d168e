"""What a task hands the fit loop (loop.py) and what the loop keeps and reports: the training and evaluation
points (:class:`Problem`), each model's progress (:class:`FitState`), the observer of steps and evaluations, and
the chunked prediction that evaluation and the tasks' reconstructions share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from .stops import Interrupted


@dataclass
class Problem:
    """What a task hands the fit loop: training and evaluation points, and the PSNR peak-to-peak range."""

    train_coords: torch.Tensor  # [N, d] in [0, 1]
    train_values: torch.Tensor  # [N, C]
    eval_coords: torch.Tensor  # [M, d]
    eval_values: torch.Tensor  # [M, C]
    value_range: float  # PSNR = 10 log10(value_range^2 / MSE)


@dataclass
class FitState:
    step: int = 0
    seconds: float = 0.0  # training time, evaluation excluded
    history: list[dict[str, float]] = field(default_factory=list)  # {"step", "seconds", "loss", "psnr"}
    losses: list[float] = field(default_factory=list)  # the training loss of every step (curve.png, TensorBoard)


class StepObserver:
    """What the fit loop reports as it goes (TensorBoard's log implements it); the base ignores everything."""

    def step(self, step: int, loss: float, lr: float, samples_per_second: float) -> None:
        pass

    def evaluation(self, step: int, seconds: float, psnr: float) -> None:
        pass

    def saved(self) -> None:
        """A checkpoint was saved (the run folder holds the run from its first one on)."""


def sample_centres(n: int, selection: slice = slice(None)) -> torch.Tensor:
    """(i + 0.5) / n for the selected i < n (pixel or sample centres in [0, 1]): [k] float32, rounded from float64."""
    return ((torch.arange(n, dtype=torch.float64)[selection] + 0.5) / n).float()


@torch.no_grad()
def predict(model: Callable[[torch.Tensor], torch.Tensor], coords: torch.Tensor, chunk: int, device: torch.device,
            stop: Callable[[], bool] | None = None) -> torch.Tensor:
    """Model outputs for coords [M, d] computed ``chunk`` at a time on ``device``, gathered on the CPU. ``stop``:
    asked before each chunk; Interrupted as soon as it says True (a signal deferred during training)."""
    parts = []
    for i in range(0, coords.shape[0], chunk):
        if stop is not None and stop():
            raise Interrupted
        parts.append(model(coords[i : i + chunk].to(device)).float().cpu())
    return torch.cat(parts)
