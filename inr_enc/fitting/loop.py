"""The fit loop shared by every task: batches, optimiser, schedule, evaluation, checkpoints, resume.

A run is deterministic on CPU for a given seed: batches come from a seeded generator whose state is
checkpointed with the model, optimiser and schedule, so a resumed run continues the same curve.
"""

from __future__ import annotations

import math
import platform
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from tqdm import tqdm

from ..encoders.backends import backends_used
from ..io import atomic_path
from ..version import __version__
from ..metrics import psnr
from ..ops.schedules import set_training_step
from .run_folder import CHECKPOINT, RunFolder, write_config
from .stops import Diverged, Interrupted, signals_handled_by
from ..optim.losses import elementwise_loss
from ..optim.setup import batch_index, make_average, make_optimizer

# state-dict keys renamed since a checkpoint was written: the separable model kept W at the top level before it
# became the Separable network (commit 0e5031c)
RENAMED_KEYS = {"weight": "network.weight"}


def provenance(model: torch.nn.Module, device: torch.device) -> dict[str, Any]:
    """What produced a run's numbers: the implementation each encoder of ``model`` last ran on (tcnn, cpp, triton
    or torch, by module name), the device and torch's thread count, and the inr_enc, torch and Python versions."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {"encoders": backends_used(model), "device": str(device), "device_name": name,
            "threads": torch.get_num_threads(), "inr_enc": __version__, "torch": str(torch.__version__),
            "python": platform.python_version()}


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
    """(i + 0.5) / n for the selected i in 0..n-1 (pixel or sample centres in [0, 1]): [k] float32, rounded once
    from float64."""
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


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


class Fitter:
    """Fits ``model`` to ``problem`` with the resolved ``training`` settings, checkpointing into ``folder.path``
    (fitting/run_folder.py)."""

    def __init__(self, model: torch.nn.Module, problem: Problem, training: dict[str, Any], seed: int,
                 folder: RunFolder, device: torch.device, run_config: dict[str, Any]) -> None:
        self.model, self.problem, self.training = model.to(device), problem, training
        self.folder, self.device, self.run_config = folder, device, run_config
        self._make_optimizer(training["lazy_tables"])
        self.average = make_average(self.model, training)  # tcnn's Ema: what evaluation and the outputs use
        self.batches = torch.Generator().manual_seed(seed)
        self.state = FitState()
        self.checkpoint_step: int | None = None  # the step of the checkpoint on disk, if any
        self._config_written = False  # this run's config.yaml (a resumed run's may change its steps)
        self.train_coords = problem.train_coords.to(device)
        self.train_values = problem.train_values.to(device)

    def save_checkpoint(self) -> None:
        """Write checkpoint.pt atomically (the folder then commits a staged run); Diverged instead if a weight is
        not finite, so the last checkpoint on disk stays a good one."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise Diverged(self.state.step, "a weight is not finite", self.checkpoint_step)
        payload = {
            "step": self.state.step, "seconds": self.state.seconds, "history": self.state.history,
            "losses": self.state.losses,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "batches": self.batches.get_state(), "config": self.run_config,
            **({"average": self.average.state_dict()} if self.average is not None else {}),
        }
        with atomic_path(self.folder.path / CHECKPOINT) as tmp:
            torch.save(payload, tmp)
        if not self._config_written:  # config.yaml follows the run's first checkpoint
            write_config(self.folder.path, {**self.run_config, "provenance": provenance(self.model, self.device)})
            self._config_written = True
        self.checkpoint_step = self.state.step
        self.folder.checkpoint_saved()

    def _make_optimizer(self, lazy_tables: bool) -> None:
        self.optimizer, self.scheduler = make_optimizer(self.model, {**self.training, "lazy_tables": lazy_tables})

    def load_checkpoint(self) -> None:
        """Continue from checkpoint.pt; ValueError (one line) for a damaged file or one of another model."""
        path = self.folder.path / CHECKPOINT
        try:
            payload = torch.load(path, map_location=self.device, weights_only=True)
        except Exception as error:  # truncated, empty or garbage: torch raises many types
            raise ValueError(f"{path}: not a readable checkpoint ({_first_line(error)})") from None
        try:
            state = {RENAMED_KEYS.get(key, key): value for key, value in payload["model"].items()}
            self.model.load_state_dict(state)
            if len(payload["optimizer"]["param_groups"]) != len(self.optimizer.param_groups):
                self._make_optimizer(lazy_tables=False)  # a run saved before lazy tables: it goes on as it began
            self.optimizer.load_state_dict(payload["optimizer"])
            self.scheduler.load_state_dict(payload["scheduler"])
            self.batches.set_state(payload["batches"])
            if self.average is not None and "average" in payload:  # none: a config edited to average; from here
                self.average.load_state_dict(payload["average"])
            self.state = FitState(int(payload["step"]), float(payload["seconds"]), list(payload["history"]),
                                  list(payload.get("losses", [])))  # runs saved before per-step losses: none
        except Exception as error:  # a checkpoint of another model, or edited: a clear message, not a traceback
            raise ValueError(f"{path} does not fit this run ({_first_line(error)})") from None
        self.checkpoint_step = self.state.step

    @contextmanager
    def averaged(self) -> Iterator[None]:
        """Within the block the model holds the weights evaluation and the outputs use: the moving average with
        tcnn's Ema (training.ema_decay), else the trained weights."""
        if self.average is None:
            yield
        else:
            with self.average.applied():
                yield

    def evaluate(self, stop: Callable[[], bool] | None = None) -> float:
        """PSNR on the evaluation samples; Interrupted between chunks once ``stop()`` says True."""
        with self.averaged():
            prediction = predict(self.model, self.problem.eval_coords, self.training["eval_chunk"], self.device, stop)
        mse = ((prediction - self.problem.eval_values) ** 2).mean().item()
        if not math.isfinite(mse):
            raise Diverged(self.state.step, f"the evaluation error is {mse}", self.checkpoint_step)
        return psnr(mse, self.problem.value_range)

    def _step(self) -> float:
        index = batch_index(self.train_coords.shape[0], self.training["batch_size"], self.batches, self.device)
        coords, values = (self.train_coords, self.train_values) if index is None else \
            (self.train_coords[index], self.train_values[index])
        set_training_step(self.model, self.state.step)
        loss = elementwise_loss(self.training["loss"], self.model(coords).float(), values).mean()
        if not torch.isfinite(loss):  # stop before the step: the weights stay as the last finite loss left them
            raise Diverged(self.state.step + 1, f"the loss is {loss.item()}", self.checkpoint_step)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        if self.average is not None:
            self.average.update()
        return loss.item()

    def solve(self, solve: Callable[[], float]) -> FitState:
        """Fit in closed form instead of by steps: ``solve()`` sets the weights and returns the seconds it took;
        the state records one evaluation (step 0) and is checkpointed."""
        self.state.seconds = solve()
        prediction = predict(self.model, self.problem.train_coords, self.training["eval_chunk"], self.device)
        loss = ((prediction - self.problem.train_values) ** 2).mean().item()
        self.state.history = [{"step": 0, "seconds": self.state.seconds, "loss": loss, "psnr": self.evaluate()}]
        with deferred_interrupts() as interrupted:  # the checkpoint (and its commit) is whole, or not begun
            self.save_checkpoint()
        if interrupted():
            raise Interrupted
        return self.state

    def run(self, quiet: bool = False, observer: StepObserver | None = None) -> FitState:
        """Train up to ``training["steps"]``, reporting each step and evaluation to ``observer``. Ctrl-C (or
        SIGTERM) finishes the current step, saves a checkpoint and raises Interrupted, so a resumed run continues
        exactly where this one stopped. A signal during an evaluation stops it between chunks (the step is kept
        and checkpointed; the resumed run evaluates that step first)."""
        steps, state, observer = self.training["steps"], self.state, observer or StepObserver()
        samples = min(self.training["batch_size"] or self.train_coords.shape[0], self.train_coords.shape[0])
        bar = tqdm(total=steps, initial=state.step, disable=quiet, unit="step", dynamic_ncols=True)

        def evaluation(loss: float) -> None:
            try:
                value = self.evaluate(interrupted)
            except Interrupted:
                self.save_checkpoint()
                observer.saved()
                raise
            state.history.append({"step": state.step, "seconds": state.seconds, "loss": loss, "psnr": value})
            observer.evaluation(state.step, state.seconds, value)
            bar.set_postfix(loss=f"{loss:.3g}", psnr=f"{value:.2f}")

        with deferred_interrupts() as interrupted:
            try:
                evaluated = state.history and state.history[-1]["step"] == state.step
                if state.step and not evaluated and (state.step % self.training["eval_every"] == 0 or state.step == steps):
                    set_training_step(self.model, state.step - 1)  # as the step before it left the schedules
                    evaluation(state.losses[-1] if state.losses else math.nan)  # the one an interrupt cut short
                    self.save_checkpoint()
                while state.step < steps:
                    start, lr = time.perf_counter(), self.optimizer.param_groups[0]["lr"]
                    loss = self._step()
                    elapsed = time.perf_counter() - start
                    state.seconds += elapsed
                    state.step += 1  # schedules stay as in the step just taken: evaluation sees the model as trained
                    state.losses.append(loss)
                    observer.step(state.step, loss, lr, samples / max(elapsed, 1e-9))
                    if state.step % self.training["eval_every"] == 0 or state.step == steps:
                        evaluation(loss)
                    if state.step % self.training["checkpoint_every"] == 0 or state.step == steps or interrupted():
                        self.save_checkpoint()
                        observer.saved()
                    bar.update(1)
                    if interrupted():
                        raise Interrupted
            finally:
                bar.close()
        if self.checkpoint_step != state.step:  # nothing left to train (steps already reached): still a checkpoint
            self.save_checkpoint()
        return state


@contextmanager
def deferred_interrupts() -> Iterator[Callable[[], bool]]:
    """Within the block, SIGINT/SIGTERM only set a flag (read through the yielded function)."""
    received: list[int] = []
    with signals_handled_by(lambda signum, frame: received.append(signum)):
        yield lambda: bool(received)
