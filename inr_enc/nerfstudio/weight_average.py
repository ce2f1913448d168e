"""tiny-cuda-nn's Ema in a nerfstudio model: the moving average of the field's weights (optim/ema.py WeightEma,
tcnn's debiased formula) kept as buffers, so that nerfstudio's checkpoints hold it, and swapped into the weights
while the model is in eval mode (ns-train's evaluations, ns-eval, ns-render, the viewer), as tcnn evaluates with
its inference params; training reads and updates the raw weights."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..optim.ema import WeightEma


class WeightAverage(nn.Module):
    """The average of ``params`` with ``decay``; :meth:`update` after each optimiser step. ``train(False)`` (also
    through a parent's ``eval()``) puts the average into the parameters, ``train(True)`` the raw weights back
    (:meth:`before_load` and :meth:`loaded` around loading a checkpoint). Buffers: ``average_<i>`` [each parameter's
    shape], steps []."""

    def __init__(self, params: list[nn.Parameter], decay: float) -> None:
        super().__init__()
        self._params = list(params)  # a plain list: the parameters stay registered where they live
        for i, param in enumerate(self._params):
            self.register_buffer(f"average_{i}", torch.zeros_like(param, dtype=torch.float32))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.decay, self._steps = decay, 0  # _steps: ``steps`` on the host (no device sync per update)
        self._raw: list[torch.Tensor] | None = None  # the raw weights while the average is swapped in

    def _ema(self) -> WeightEma:
        """A WeightEma over the current buffers (which ``.to(device)`` may have replaced)."""
        return WeightEma(self._params, self.decay, [getattr(self, f"average_{i}") for i in range(len(self._params))],
                         self._steps)

    @torch.no_grad()
    def update(self) -> None:
        """After an optimiser step on the raw weights."""
        if self._raw is not None:
            raise RuntimeError("WeightAverage.update: the average is swapped in (the model is in eval mode)")
        ema = self._ema()
        ema.update()
        self._steps = ema.steps
        self.steps.fill_(ema.steps)

    def train(self, mode: bool = True) -> Any:
        super().train(mode)
        self._swap(average=not mode)
        return self

    def _swap(self, average: bool) -> None:
        if average and self._raw is None:
            self._raw = self._ema().swap_in()
        elif not average and self._raw is not None:
            self._ema().restore(self._raw)
            self._raw = None

    def before_load(self) -> None:
        """Call before a state dict is loaded into the parameters' module: a load writes raw weights, so the raw
        ones go back first (a load that leaves them out keeps them)."""
        self._swap(average=False)

    def loaded(self) -> None:
        """Call after a load (:meth:`before_load` first): in eval mode the average goes in at once."""
        self._steps = int(self.steps)
        self._swap(average=not self.training)

    def raw_weights(self) -> list[torch.Tensor] | None:
        """The raw weights while the average is swapped in (what a checkpoint must hold for them), else None."""
        return self._raw


def average_field_weights(model: nn.Module, decay: float) -> WeightAverage:
    """A WeightAverage of ``model.field``'s network and encoder weights (tcnn's Ema covers its model's params; an
    appearance embedding is not one), wired into ``model``: loads go through :meth:`WeightAverage.before_load` and
    :meth:`WeightAverage.loaded`, a state dict saved while the average is swapped in holds the raw weights, and
    DDP does not broadcast the average (each rank updates its own from the same weights)."""
    named = [(f"field.{name}", p) for name, p in model.field.named_parameters()
             if not name.startswith("appearance_embedding.")]
    average = WeightAverage([p for _, p in named], decay)

    def raw_into_state(module: nn.Module, state: dict[str, Any], prefix: str, metadata: Any) -> None:
        raw = average.raw_weights()
        for (name, _), weight in zip(named, raw or []):
            state[prefix + name] = weight.clone()

    model.register_load_state_dict_pre_hook(lambda module, *args: average.before_load())
    model.register_load_state_dict_post_hook(lambda module, keys: average.loaded())
    model.register_state_dict_post_hook(raw_into_state)
    model._ddp_params_and_buffers_to_ignore = [f"weight_average.{name}" for name, _ in average.named_buffers()]
    return average
