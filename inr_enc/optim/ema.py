"""tiny-cuda-nn's Ema optimizer wrapper: a bias-corrected exponential moving average of the weights, used for
inference while training goes on with the raw weights.

tcnn (include/tiny-cuda-nn/optimizers/ema.h), after the nested optimizer's t-th step (t from 1):
ema_t = (ema_{t-1} * decay * (1 - decay^(t-1)) + w_t * (1 - decay)) / (1 - decay^t), so ema_1 = w_1 and every step's
weights count with (1 - decay) decay^(t - k), normalised. torch.optim.swa_utils.AveragedModel starts from the
first weights instead of debiasing, which weights w_1 differently, hence this class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..config.checks import check_float, config_error


def check_ema_decay(section: str, value: Any) -> float | None:
    """``ema_decay``, one rule for inr-fit's training section and ns-train's model settings: None (no moving
    average) or a decay in (0, 1). 0 is refused: tcnn's Ema with decay 0 averages nothing (the average is the last
    weights), which is what None says; 1 would keep the first weights forever."""
    if value is None:
        return None
    try:
        return check_float(section, "ema_decay", value, 0.0, low_inclusive=False, high=1.0, high_inclusive=False)
    except ValueError:  # one message, naming null
        raise config_error(section, f"'ema_decay' must be in (0, 1) (null: no moving average), got {value!r}") from None


class WeightEma:
    """The moving average of ``params`` (updated by :meth:`update` after each optimiser step); :meth:`applied`
    swaps it into the parameters for evaluation. ``state_dict``/``load_state_dict`` for checkpoints. ``average``,
    ``steps``: float32 tensors shaped as ``params`` to keep the average in (updated in place), and its step count
    (default: zeros, 0)."""

    def __init__(self, params: list[torch.nn.Parameter], decay: float, average: list[torch.Tensor] | None = None,
                 steps: int = 0) -> None:
        self.params, self.decay, self.steps = list(params), decay, steps
        self.average = [torch.zeros_like(p, dtype=torch.float32) for p in self.params] if average is None else average

    @torch.no_grad()
    def update(self) -> None:
        self.steps += 1
        t, d = self.steps, self.decay
        keep, scale = d * (1 - d ** (t - 1)), 1 / (1 - d**t)
        for average, param in zip(self.average, self.params):
            average.mul_(keep).add_(param.float(), alpha=1 - d).mul_(scale)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block the parameters hold the average (the raw weights before any update: no step yet)."""
        raw = self.swap_in()
        try:
            yield
        finally:
            self.restore(raw)

    @torch.no_grad()
    def swap_in(self) -> list[torch.Tensor] | None:
        """Put the average into the parameters -> a copy of the raw weights for :meth:`restore` (None, changing
        nothing, before the first update)."""
        if self.steps == 0:
            return None
        raw = [p.detach().clone() for p in self.params]
        for average, param in zip(self.average, self.params):
            param.copy_(average)
        return raw

    @torch.no_grad()
    def restore(self, raw: list[torch.Tensor] | None) -> None:
        """Put back the raw weights :meth:`swap_in` returned."""
        for saved, param in zip(raw or [], self.params):
            param.copy_(saved)

    def state_dict(self) -> dict:
        return {"steps": self.steps, "decay": self.decay, "average": [a.clone() for a in self.average]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["average"]) != len(self.average) or state["decay"] != self.decay:
            raise ValueError("WeightEma: the saved average is of other parameters or another decay")
        self.steps = int(state["steps"])
        for average, saved in zip(self.average, state["average"]):
            average.copy_(saved)
