"""``inr-fit images DIR --together N``: same-sized signals fitted N at a time as one computation (field_batch.py).

Each model is the run it would be alone: built from the same config and seed, trained on the same batches (one
seeded generator draws the sample indices for all, as each single run's generator would), with the sum of the
per-model losses, so Adam (elementwise) moves each model's weights as its own run would, up to float rounding.
When the group is done, each model is written to its own run folder as ``inr-fit image`` writes one: a
checkpoint (its slice of the optimiser's state, so ``--resume`` with more steps continues it), config.yaml,
model.safetensors, metrics.json and the pictures. ``seconds`` there is the group's training time over its models.

A model whose loss or evaluation error stops being finite is left out of the rest of the group's training and
reported as diverged; the others go on. Every ``checkpoint_every`` steps and on Ctrl-C the whole group is saved to
``OUT/.group-<first run>-<models>.pt``, which a later run over the same files continues; once training ends,
every model's checkpoint is written (and the group's file removed) before any model's outputs, so a Ctrl-C from
then on leaves each file to resume on its own. Every run folder is locked for the whole group.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from ..config.memory import check_memory
from ..config.schema import estimate_run_memory
from ..field import Field
from ..field_batch import FieldBatch, batching_unavailable_reason
from ..io import atomic_path
from ..metrics import psnr
from ..ops.schedules import set_training_step
from .loop import FitState, Fitter, Problem, deferred_interrupts
from .outputs import OUTPUT_FILES
from .run import field_of, finish
from .run_folder import RunFolder
from ..optim.losses import elementwise_loss
from ..optim.setup import batch_index, make_optimizer
from .stops import Diverged, Interrupted


GROUP_CHECKPOINTS = ".group-*.pt"  # OUT/.group-<first run>-<models>.pt (dataset.py names them)


def group_key(task: Any) -> tuple:
    """Signals that can share a batch have equal keys: the task's description without its path."""
    return tuple(sorted((k, v) for k, v in task.describe().items() if k != "path"))


def group_unavailable_reason(run: dict[str, Any], field: Field) -> str | None:
    """Why runs like ``run`` (its model ``field``) cannot be fitted as a group, or None when they can."""
    if run["training"]["solver"] == "lion":
        return "it trains with Lion, which groups do not do yet"
    if run["training"]["ema_decay"] is not None:
        return "its training averages the weights (ema_decay, tcnn's Ema), which groups do not do yet"
    return batching_unavailable_reason(field)


class GroupFitter:
    """Fits one model per task (same config and seed, same signal shape) as a :class:`FieldBatch`."""

    def __init__(self, runs: list[dict[str, Any]], tasks: list[Any], device: torch.device) -> None:
        self.runs, self.tasks, self.device = runs, tasks, device
        self.training, seed, first = runs[0]["training"], runs[0]["seed"], runs[0]
        if any({**run, "task": None} != {**first, "task": None} for run in runs):
            raise ValueError("--together: the files' resolved runs differ beyond their signals")
        estimate = estimate_run_memory(first, tasks[0].n_input_dims, tasks[0].n_output_dims, tasks[0].n_samples)
        check_memory(f"--together: {len(tasks)} models", len(tasks) * sum(estimate.values()))
        field = field_of(first, tasks[0])  # every model starts from it, as each would alone (one config and seed)
        reason = group_unavailable_reason(first, field)
        if reason is not None:
            raise ValueError(f"--together: config {first['config_name']!r} cannot be batched: {reason}")
        self.batch = FieldBatch([field] * len(tasks)).to(device)
        self.optimizer, self.scheduler = make_optimizer(self.batch, self.training)
        self.batches = torch.Generator().manual_seed(seed)
        self.problems: list[Problem] = [task.problem() for task in tasks]
        self.coords = self.problems[0].train_coords.to(device)  # the same for every signal of one shape
        self.values = torch.stack([p.train_values for p in self.problems]).to(device)  # [M, n, C]
        self.states = [FitState() for _ in tasks]
        self.diverged: dict[int, int] = {}  # model -> the step its loss or evaluation stopped being finite

    def _step(self) -> list[float]:
        index = batch_index(self.coords.shape[0], self.training["batch_size"], self.batches, self.device)
        coords, values = (self.coords, self.values) if index is None else (self.coords[index], self.values[:, index])
        step, n_models = self.states[0].step, len(self.tasks)
        set_training_step(self.batch, step)
        self.optimizer.zero_grad(set_to_none=True)
        features = self.batch.encode(coords.expand(n_models, *coords.shape))
        stacked = self.batch.network_parameters()
        grads = {name: torch.zeros_like(p) for name, p in stacked.items()}
        feature_grad = torch.zeros_like(features) if features.requires_grad else None
        losses = []
        chunk = self.batch.models_per_chunk(coords.shape[0])
        for a in range(0, n_models, chunk):  # forward and backward a chunk at a time: its activations stay in cache
            models = slice(a, a + chunk)
            params = {name: p.detach()[models].requires_grad_() for name, p in stacked.items()}
            part = features.detach()[models].requires_grad_(feature_grad is not None)
            loss = elementwise_loss(self.training["loss"], self.batch.networks(part, params, models).float(),
                                    values[models]).mean(dim=(1, 2))
            for k in (~torch.isfinite(loss)).nonzero()[:, 0].tolist():
                self.diverged.setdefault(a + k, step + 1)
            active = torch.tensor([a + k not in self.diverged for k in range(len(loss))], device=loss.device)
            torch.where(active, loss, 0.0).sum().backward()  # each model's gradient is its own loss's
            for name, param in params.items():
                if param.grad is not None:
                    grads[name][models] = param.grad
            if feature_grad is not None:
                feature_grad[models] = part.grad
            losses += loss.tolist()
        for name, param in stacked.items():
            param.grad = grads[name]
        if feature_grad is not None:  # the encoder's parameters (grid tables): one backward for every model
            features.backward(feature_grad)
        self.optimizer.step()
        self.scheduler.step()
        return losses

    def evaluate(self, stop: Callable[[], bool] | None = None) -> list[float]:
        """Each model's PSNR on its evaluation samples (a model whose error is not finite is marked diverged).
        ``stop``: None or a function () -> bool asked before each chunk; Interrupted as soon as it says True."""
        coords = self.problems[0].eval_coords
        chunk = max(self.training["eval_chunk"] // len(self.tasks), 1)
        parts = []
        with torch.no_grad():
            for i in range(0, coords.shape[0], chunk):
                if stop is not None and stop():
                    raise Interrupted
                parts.append(self.batch(coords[i:i + chunk].to(self.device).expand(len(self.tasks), -1, -1)).float().cpu())
        prediction = torch.cat(parts, dim=1)
        errors = [((prediction[m] - p.eval_values) ** 2).mean().item() for m, p in enumerate(self.problems)]
        for m, error in enumerate(errors):
            if not math.isfinite(error):
                self.diverged.setdefault(m, self.states[m].step)
        return [psnr(error, p.value_range) for error, p in zip(errors, self.problems)]

    def run(self, checkpoint: Path) -> None:
        """Train to ``training["steps"]``, saving the group to ``checkpoint`` every ``checkpoint_every`` steps and
        on Ctrl-C (then Interrupted); a Ctrl-C during an evaluation stops it between chunks, and the continued
        group evaluates that step first (as ``Fitter.run``)."""
        training, steps = self.training, self.training["steps"]
        with deferred_interrupts() as interrupted:
            step, first = self.states[0].step, self.states[0]
            if step and not (first.history and first.history[-1]["step"] == step) and \
                    (step % training["eval_every"] == 0 or step == steps):
                set_training_step(self.batch, step - 1)  # as the step before it left the schedules
                self._evaluation([s.losses[-1] if s.losses else math.nan for s in self.states], interrupted, checkpoint)
            while self.states[0].step < steps:
                start = time.perf_counter()
                losses = self._step()
                elapsed = (time.perf_counter() - start) / len(self.tasks)
                for state, loss in zip(self.states, losses):
                    state.step += 1
                    state.seconds += elapsed
                    state.losses.append(loss)
                step = self.states[0].step
                if step % training["eval_every"] == 0 or step == steps:
                    self._evaluation(losses, interrupted, checkpoint)
                if interrupted() or (step % training["checkpoint_every"] == 0 and step < steps):
                    self.save(checkpoint)
                if interrupted():
                    raise Interrupted

    def _evaluation(self, losses: list[float], stop: Callable[[], bool], checkpoint: Path) -> None:
        """Every model's evaluation at this step into its history; stopped by ``stop``: the group saved, Interrupted."""
        try:
            values = self.evaluate(stop)
        except Interrupted:
            self.save(checkpoint)
            raise
        for state, loss, value in zip(self.states, losses, values):
            state.history.append({"step": state.step, "seconds": state.seconds, "loss": loss, "psnr": value})

    def save(self, path: Path) -> None:
        payload = {"names": [run["task"]["path"] for run in self.runs], "tasks": [run["task"] for run in self.runs],
                   "config": self.runs[0],
                   "states": [vars(s) for s in self.states], "diverged": self.diverged,
                   "model": self.batch.state_dict(), "optimizer": self.optimizer.state_dict(),
                   "scheduler": self.scheduler.state_dict(), "batches": self.batches.get_state()}
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)

    def load(self, path: Path) -> None:
        """Continue the group saved at ``path``; ValueError if it is not this group's (other files or config) or
        does not load (then this fitter is partly overwritten: build a new one)."""
        try:
            payload = torch.load(path, map_location=self.device, weights_only=True)
        except Exception:
            raise ValueError(f"{path}: not a readable group checkpoint") from None
        if payload.get("tasks") != [run["task"] for run in self.runs] or payload.get("config") != self.runs[0]:
            raise ValueError(f"{path}: a group of other files (or since changed) or another config")
        try:
            self.batch.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.scheduler.load_state_dict(payload["scheduler"])
            self.batches.set_state(payload["batches"])
            self.states = [FitState(**state) for state in payload["states"]]
            self.diverged = dict(payload["diverged"])
        except Exception:
            raise ValueError(f"{path}: does not load into this group") from None

    def checkpoint_model(self, m: int, folder: RunFolder) -> Field:
        """Model ``m``'s checkpoint.pt and config.yaml in ``folder``, as its run alone would leave them (its slice of
        the optimiser's state and the schedule's position, so ``--resume`` with more steps continues it) -> the model."""
        run, model = self.runs[m], self.batch.field(m)
        fitter = Fitter(model, self.problems[m], self.training, run["seed"], folder, self.device, run)
        fitter.state = self.states[m]
        fitter.scheduler.load_state_dict(self.scheduler.state_dict())
        for group, single in zip(self.optimizer.param_groups, fitter.optimizer.param_groups):
            single["lr"], single["initial_lr"] = group["lr"], group["initial_lr"]
        for name, param in model.named_parameters():
            stacked = self.batch.stacked(name)
            state = self.optimizer.state.get(stacked)
            if state:  # per element (moments, lazy step counts): model m's slice; Adam's one step count: as is
                fitter.optimizer.state[param] = {
                    key: value.reshape(len(self.tasks), -1)[m].reshape(param.shape).clone()
                    if value.numel() == stacked.numel() else value.clone() for key, value in state.items()}
        fitter.batches.set_state(self.batches.get_state())
        fitter.save_checkpoint()
        return model


def saved_group_files(path: Path) -> list[str]:
    """The input paths of the group saved at ``path`` (a group checkpoint, read without loading its tensors);
    [] for a file that is not one."""
    try:
        names = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("names")
    except Exception:
        return []
    return names if isinstance(names, list) and all(isinstance(name, str) for name in names) else []


def fit_group(runs: list[dict[str, Any]], tasks: list[Any], folders: list[Path], checkpoint: Path,
              device: torch.device, overwrite: bool, pictures: bool = True) -> list[dict[str, Any] | BaseException]:
    """Fit ``tasks`` together and write each into its folder -> per task its metrics or the error it ended with.
    ``checkpoint``: the group's file (GROUP_CHECKPOINTS), continued when it holds this group.

    Every folder is locked (and checked, as ``inr-fit image`` checks --out) before training; one that cannot be
    used is that file's error and the group goes on without it. After training, every model's checkpoint is
    written before any model's outputs: a Ctrl-C after that leaves each file to resume on its own."""
    results: list[dict[str, Any] | BaseException | None] = [None] * len(tasks)
    with ExitStack() as stack:
        locked: dict[int, RunFolder] = {}
        for m, folder in enumerate(folders):
            try:
                locked[m] = stack.enter_context(RunFolder(folder, OUTPUT_FILES, overwrite=overwrite))
            except (ValueError, OSError) as error:
                results[m] = error
        members = list(locked)
        if members:
            fitter = GroupFitter([runs[m] for m in members], [tasks[m] for m in members], device)
            if checkpoint.is_file():
                try:
                    fitter.load(checkpoint)
                except ValueError:  # another group's or damaged: this group starts afresh
                    fitter = GroupFitter([runs[m] for m in members], [tasks[m] for m in members], device)
            fitter.run(checkpoint)
            models = {}
            with deferred_interrupts() as interrupted:  # every checkpoint, or the group's checkpoint stays
                for k, m in enumerate(members):
                    if k in fitter.diverged:
                        results[m] = Diverged(fitter.diverged[k], "the loss or evaluation error was not finite", None)
                    else:
                        models[m] = fitter.checkpoint_model(k, locked[m])
            checkpoint.unlink(missing_ok=True)
            if interrupted():
                raise Interrupted
            for k, m in enumerate(members):
                if m in models:
                    try:
                        results[m] = finish(runs[m], tasks[m], models[m], fitter.states[k], folders[m], device,
                                            {"fitted_together": len(members)}, pictures)
                    except Exception as error:  # this model's failure (Ctrl-C is not an Exception)
                        results[m] = error
    return results  # type: ignore[return-value]


def chunks(indices: list[int], keys: list[tuple], size: int) -> list[list[int]]:
    """``indices`` grouped by equal ``keys`` (first-seen order), each group cut into runs of at most ``size``."""
    by_key: dict[tuple, list[int]] = {}
    for i, key in zip(indices, keys):
        by_key.setdefault(key, []).append(i)
    return [group[k:k + size] for group in by_key.values() for k in range(0, len(group), size)]
