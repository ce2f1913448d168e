"""The fit loop shared by every task, for one model or a batch of M (``--together``): batches, optimiser, schedule,
evaluation, checkpoints (checkpoints.py), resume.

A run is deterministic on CPU for a given seed: batches come from a seeded generator whose state is
checkpointed with the model, optimiser and schedule, so a resumed run continues the same curve.
"""

from __future__ import annotations

import functools
import math
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Callable, Iterator

import torch
from tqdm import tqdm

from ..field.batch import FieldBatch
from ..metrics import psnr
from ..ops.schedules import set_training_step
from ..optim.losses import elementwise_loss
from ..optim.setup import batch_index, make_average, make_optimizer
from .checkpoints import (
    error_line,
    member_optimizer_state,
    model_state,
    provenance,
    read_checkpoint,
    stack_optimizer_states,
    write_checkpoint,
)
from .problem import FitState, Problem, StepObserver, predict
from .run_folder import CHECKPOINT, RunFolder, write_config
from .stops import Diverged, Interrupted, signals_handled_by


class Fitter:
    """Fits one model, or a :class:`FieldBatch` of M models of one config and seed (``inr-fit images --together``),
    to ``problems`` (one per model; a batch's share their coordinates) with the resolved ``training`` settings.
    Model m's run is ``runs[m]``, checkpointed into ``folders[m].path`` (fitting/run_folder.py) as its run alone
    would be (checkpoints.py). Every model draws its batches from one generator seeded with ``seed``, as each run
    alone would; a batch trains on the sum of its models' losses, so Adam (elementwise) moves each model as alone.
    A model whose loss, evaluation error or weights stop being finite leaves the batch (``diverged``; its last good
    checkpoint stays); Diverged is raised once every model has."""

    def __init__(self, model: torch.nn.Module, problems: list[Problem], training: dict[str, Any], seed: int,
                 folders: list[RunFolder], device: torch.device, runs: list[dict[str, Any]]) -> None:
        self.model, self.problems, self.training = model.to(device), problems, training
        self.folders, self.device, self.runs, self.n = folders, device, runs, len(problems)
        self.batched = isinstance(model, FieldBatch)
        self._make_optimizer(training["lazy_tables"])
        self.average = make_average(self.model, training)  # tcnn's Ema: what evaluation and the outputs use
        self.batches = torch.Generator().manual_seed(seed)
        self.states = [FitState() for _ in problems]
        self.diverged: dict[int, Diverged] = {}  # model -> why it left the batch
        self.checkpoint_step: int | None = None  # the step of the checkpoints on disk, if any
        self._config_written = [False] * self.n  # each run's config.yaml (a resumed run's may change its steps)
        self.train_coords = problems[0].train_coords.to(device)  # [N, d]
        self.train_values = (torch.stack([p.train_values for p in problems]).to(device) if self.batched
                             else problems[0].train_values.to(device))  # [M, N, C] or [N, C] (no copy on CPU)

    def _make_optimizer(self, lazy_tables: bool) -> None:
        self.optimizer, self.scheduler = make_optimizer(self.model, {**self.training, "lazy_tables": lazy_tables})

    def diverge(self, m: int, step: int, what: str) -> None:
        """Model ``m`` stopped being finite at ``step``: it leaves the batch (the first reason is kept)."""
        self.diverged.setdefault(m, Diverged(step, what, self.checkpoint_step))

    def _raise_if_all_diverged(self) -> None:
        if len(self.diverged) == self.n:
            raise self.diverged[min(self.diverged)]

    def set_states(self, states: list[dict[str, Any]]) -> None:
        """Each model's FitState from its saved step, seconds, history and losses (none in runs saved before those)."""
        self.states = [FitState(int(s["step"]), float(s["seconds"]), list(s["history"]), list(s.get("losses", [])))
                       for s in states]

    def models(self) -> list[tuple[int, torch.nn.Module]]:
        """(m, model m as a standalone Field) for every model still training."""
        if not self.batched:
            return [] if self.diverged else [(0, self.model)]
        return [(m, self.model.field(m)) for m in range(self.n) if m not in self.diverged]

    def save_checkpoint(self) -> None:
        """Write each model's checkpoint.pt atomically (its folder then commits a staged run); a model with a weight
        that is not finite diverges instead, so its last checkpoint on disk stays a good one."""
        step, models = self.states[0].step, self.models()
        for m, model in models:
            if not all(torch.isfinite(p).all() for p in model.parameters()):
                self.diverge(m, step, "a weight is not finite")
        self._raise_if_all_diverged()
        for m, model in models:
            if m in self.diverged:
                continue
            optimizer = self.optimizer.state_dict() if not self.batched else member_optimizer_state(
                self.model, self.optimizer, m, model, make_optimizer(model, self.training)[0])
            write_checkpoint(self.folders[m].path / CHECKPOINT, {
                **vars(self.states[m]), "model": model.state_dict(), "optimizer": optimizer,
                "scheduler": self.scheduler.state_dict(), "batches": self.batches.get_state(), "config": self.runs[m],
                **({"average": self.average.state_dict()} if self.average is not None else {})})
            if not self._config_written[m]:  # config.yaml follows the run's first checkpoint
                write_config(self.folders[m].path, {**self.runs[m], "provenance": provenance(model, self.device)})
                self._config_written[m] = True
            self.folders[m].checkpoint_saved()
        self.checkpoint_step = step

    def load_checkpoints(self) -> None:
        """Continue from each model's checkpoint.pt; ValueError (one line) if damaged, foreign or at unequal steps."""
        payloads, models, singles = [], [], []
        for m, model in self.models():
            path = self.folders[m].path / CHECKPOINT
            payload = read_checkpoint(path, self.device)
            try:
                model.load_state_dict(model_state(payload))
                if not self.batched and len(payload["optimizer"]["param_groups"]) != len(self.optimizer.param_groups):
                    self._make_optimizer(lazy_tables=False)  # a run saved before lazy tables: it goes on as it began
                single = self.optimizer if not self.batched else make_optimizer(model, self.training)[0]
                single.load_state_dict(payload["optimizer"])
                if self.average is not None and "average" in payload:  # none: a config edited to average; from here
                    self.average.load_state_dict(payload["average"])
                if payloads and (payload["step"] != payloads[0]["step"] or
                                 not torch.equal(payload["batches"], payloads[0]["batches"])):
                    raise ValueError(f"at step {payload['step']}, the batch's first model at {payloads[0]['step']}")
                self.scheduler.load_state_dict(payload["scheduler"])
                self.batches.set_state(payload["batches"])
            except Exception as error:  # a checkpoint of another model, or edited: a clear message, not a traceback
                raise ValueError(f"{path} does not fit this run ({error_line(error)})") from None
            payloads.append(payload)
            models.append(model)
            singles.append(single)
        if self.batched:
            for m, model in enumerate(models):
                self.model.set_field(m, model)
            stack_optimizer_states(self.model, self.optimizer, models, singles)
        self.set_states(payloads)
        self.checkpoint_step = self.states[0].step
    def averaged(self) -> AbstractContextManager:
        """Within the block the model holds the weights evaluation and outputs use: tcnn's Ema average, else trained."""
        return self.average.applied() if self.average is not None else nullcontext()

    def evaluate(self, stop: Callable[[], bool] | None = None) -> list[float]:
        """Each model's PSNR on its evaluation samples (not finite: it diverges); Interrupted once ``stop()``."""
        coords, chunk = self.problems[0].eval_coords, max(self.training["eval_chunk"] // self.n, 1)
        model = (lambda x: self.model(x.expand(self.n, -1, -1)).transpose(0, 1)) if self.batched else \
            (lambda x: self.model(x).unsqueeze(1))
        with self.averaged():
            prediction = predict(model, coords, chunk, self.device, stop)  # [M evaluation samples, models, C]
        errors = [((prediction[:, m] - p.eval_values) ** 2).mean().item() for m, p in enumerate(self.problems)]
        for m, error in enumerate(errors):
            if not math.isfinite(error):
                self.diverge(m, self.states[m].step, f"the evaluation error is {error}")
        self._raise_if_all_diverged()
        return [psnr(error, p.value_range) for error, p in zip(errors, self.problems)]

    def _step(self) -> list[float]:
        """One training step -> each model's loss."""
        index = batch_index(self.train_coords.shape[0], self.training["batch_size"], self.batches, self.device)
        coords, values = (self.train_coords, self.train_values) if index is None else \
            (self.train_coords[index], self.train_values[..., index, :])
        step = self.states[0].step
        set_training_step(self.model, step)
        if self.batched:  # each model's forward and backward, a chunk of models at a time
            self.optimizer.zero_grad(set_to_none=True)
            loss = functools.partial(elementwise_loss, self.training["loss"])
            losses = self.model.backward_losses(coords, values, loss, [m not in self.diverged for m in range(self.n)])
        else:
            single = elementwise_loss(self.training["loss"], self.model(coords).float(), values).mean()
            losses = single.detach().reshape(1)
        for m in (~torch.isfinite(losses)).nonzero()[:, 0].tolist():
            self.diverge(m, step + 1, f"the loss is {losses[m].item()}")
        self._raise_if_all_diverged()  # before the step: the weights stay as the last finite loss left them
        if not self.batched:
            self.optimizer.zero_grad(set_to_none=True)
            single.backward()
        self.optimizer.step()
        self.scheduler.step()
        if self.average is not None:
            self.average.update()
        return losses.tolist()

    def solve(self, solve: Callable[[], float]) -> None:
        """Closed-form fit: ``solve()`` sets the weights, returns its seconds; evaluated at step 0, checkpointed."""
        state = self.states[0]
        state.seconds = solve()
        prediction = predict(self.model, self.problems[0].train_coords, self.training["eval_chunk"], self.device)
        loss = ((prediction - self.problems[0].train_values) ** 2).mean().item()
        state.history = [{"step": 0, "seconds": state.seconds, "loss": loss, "psnr": self.evaluate()[0]}]
        with deferred_interrupts() as interrupted:  # the checkpoint (and its commit) is whole, or not begun
            self.save_checkpoint()
        if interrupted():
            raise Interrupted

    def run(self, quiet: bool = False, observer: StepObserver | None = None) -> None:
        """Train up to ``training["steps"]``, reporting each step and evaluation (model 0's) to ``observer``. Ctrl-C
        (or SIGTERM) finishes the current step, saves the checkpoints and raises Interrupted, so a resumed run
        continues exactly where this one stopped. A signal during an evaluation stops it between chunks (the step
        is kept and checkpointed; the resumed run evaluates that step first)."""
        steps, states, observer = self.training["steps"], self.states, observer or StepObserver()
        samples = min(self.training["batch_size"] or self.train_coords.shape[0], self.train_coords.shape[0])
        bar = tqdm(total=steps, initial=states[0].step, disable=quiet, unit="step", dynamic_ncols=True)

        def evaluation(losses: list[float]) -> None:
            try:
                values = self.evaluate(interrupted)
            except Interrupted:
                self.save_checkpoint()
                observer.saved()
                raise
            for state, loss, value in zip(states, losses, values):
                state.history.append({"step": state.step, "seconds": state.seconds, "loss": loss, "psnr": value})
            observer.evaluation(states[0].step, states[0].seconds, values[0])
            bar.set_postfix(loss=f"{losses[0]:.3g}", psnr=f"{values[0]:.2f}")

        with deferred_interrupts() as interrupted:
            try:
                step = states[0].step
                evaluated = states[0].history and states[0].history[-1]["step"] == step
                if step and not evaluated and (step % self.training["eval_every"] == 0 or step == steps):
                    set_training_step(self.model, step - 1)  # as the step before it left the schedules
                    evaluation([s.losses[-1] if s.losses else math.nan for s in states])  # the one an interrupt cut
                    self.save_checkpoint()
                while states[0].step < steps:
                    start, lr = time.perf_counter(), self.optimizer.param_groups[0]["lr"]
                    losses = self._step()
                    elapsed = time.perf_counter() - start
                    for state, loss in zip(states, losses):
                        state.seconds += elapsed / self.n  # a batch's time over its models
                        state.step += 1  # schedules stay as in the step taken: evaluation sees the model as trained
                        state.losses.append(loss)
                    step = states[0].step
                    observer.step(step, losses[0], lr, samples / max(elapsed, 1e-9))
                    if step % self.training["eval_every"] == 0 or step == steps:
                        evaluation(losses)
                    if step % self.training["checkpoint_every"] == 0 or step == steps or interrupted():
                        self.save_checkpoint()
                        observer.saved()
                    bar.update(1)
                    if interrupted():
                        raise Interrupted
            finally:
                bar.close()
        if self.checkpoint_step != states[0].step:  # nothing left to train (steps already reached): still a checkpoint
            self.save_checkpoint()


@contextmanager
def deferred_interrupts() -> Iterator[Callable[[], bool]]:
    """Within the block, SIGINT/SIGTERM only set a flag (read through the yielded function)."""
    received: list[int] = []
    with signals_handled_by(lambda signum, frame: received.append(signum)):
        yield lambda: bool(received)
