"""``inr-fit images DIR --together N``: same-sized signals fitted N at a time as one computation (field_batch.py).

Each model is the run it would be alone: built from the same config and seed, trained on the same batches (one
seeded generator draws the sample indices for all, as each single run's generator would), with the sum of the
per-model losses, so Adam (elementwise) moves each model's weights as its own run would, up to float rounding.
When the group is done, each model is written to its own run folder as ``inr-fit image`` writes one: a
checkpoint (its slice of the optimiser's state, so ``--resume`` with more steps continues it), config.yaml,
model.safetensors, metrics.json and the pictures. ``seconds`` there is the group's training time over its models.

A model whose loss stops being finite is left out of the rest of the group's training and reported as diverged;
the others go on. Ctrl-C, or a group checkpoint every ``checkpoint_every`` steps, saves the whole group to
``OUT/.group-<first run>-<models>.pt``; a later run over the same files continues it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ..field import Field
from ..field_batch import FieldBatch, batching_unavailable_reason
from ..io import atomic_path
from ..metrics import psnr
from ..ops.schedules import set_training_step
from ..optim import GridAdam
from .loop import FitState, Fitter, Problem, deferred_interrupts, elementwise_loss, lr_factor
from .outputs import OUTPUT_FILES
from .run import finish
from .run_folder import RunFolder
from .stops import Diverged, Interrupted


GROUP_CHECKPOINTS = ".group-*.pt"  # OUT/.group-<first run>-<models>.pt


def group_key(task: Any) -> tuple:
    """Signals that can share a batch have equal keys: the task's description without its path."""
    return tuple(sorted((k, v) for k, v in task.describe().items() if k != "path"))


def field_of(run: dict[str, Any], task: Any) -> Field:
    return Field(task.n_input_dims, task.n_output_dims, {"encoding": run["encoding"], "network": run["network"]})


class GroupFitter:
    """Fits one model per task (same config, same signal shape) as a :class:`FieldBatch`."""

    def __init__(self, runs: list[dict[str, Any]], tasks: list[Any], device: torch.device) -> None:
        self.runs, self.tasks, self.device = runs, tasks, device
        self.training, seed = runs[0]["training"], runs[0]["seed"]
        first = field_of(runs[0], tasks[0])
        reason = batching_unavailable_reason(first)
        if reason is not None:
            raise ValueError(f"--together: config {runs[0]['config_name']!r} cannot be batched: {reason}")
        self.batch = FieldBatch([first] + [field_of(run, task) for run, task in zip(runs[1:], tasks[1:])]).to(device)
        training = self.training
        self.optimizer = GridAdam.for_model(self.batch, lr=training["lr"], lazy=training["lazy_tables"],
                                            betas=tuple(training["betas"]), eps=training["eps"])
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_factor(training["schedule"], training["steps"]))
        self.batches = torch.Generator().manual_seed(seed)
        self.problems: list[Problem] = [task.problem() for task in tasks]
        self.coords = self.problems[0].train_coords.to(device)  # the same for every signal of one shape
        self.values = torch.stack([p.train_values for p in self.problems]).to(device)  # [M, n, C]
        self.states = [FitState() for _ in tasks]
        self.diverged: dict[int, Diverged] = {}

    def _step(self) -> list[float]:
        n, size = self.coords.shape[0], self.training["batch_size"]
        if size is None or size >= n:
            coords, values = self.coords, self.values
        else:
            index = torch.randint(n, (size,), generator=self.batches).to(self.device)
            coords, values = self.coords[index], self.values[:, index]
        step = self.states[0].step
        set_training_step(self.batch, step)
        prediction = self.batch(coords.expand(len(self.tasks), *coords.shape)).float()
        losses = elementwise_loss(self.training["loss"], prediction, values).mean(dim=(1, 2))  # [M]
        finite = torch.isfinite(losses)
        for m in (~finite).nonzero()[:, 0].tolist():
            if m not in self.diverged:
                self.diverged[m] = Diverged(step + 1, f"the loss is {losses[m].item()}", None)
        active = torch.tensor([m not in self.diverged for m in range(len(self.tasks))], device=losses.device)
        self.optimizer.zero_grad(set_to_none=True)
        torch.where(active, losses, 0.0).sum().backward()  # each model's gradient is its own loss's
        self.optimizer.step()
        self.scheduler.step()
        return losses.tolist()

    def evaluate(self) -> list[float]:
        """Each model's PSNR on its evaluation samples."""
        coords = self.problems[0].eval_coords
        chunk = max(self.training["eval_chunk"] // len(self.tasks), 1)
        with torch.no_grad():
            parts = [self.batch(coords[i:i + chunk].to(self.device).expand(len(self.tasks), -1, -1)).float().cpu()
                     for i in range(0, coords.shape[0], chunk)]
        prediction = torch.cat(parts, dim=1)
        return [psnr(((prediction[m] - p.eval_values) ** 2).mean().item(), p.value_range)
                for m, p in enumerate(self.problems)]

    def run(self, checkpoint: Path) -> None:
        """Train to ``training["steps"]``, saving the group to ``checkpoint`` every ``checkpoint_every`` steps and
        on Ctrl-C (then Interrupted)."""
        training = self.training
        with deferred_interrupts() as interrupted:
            while self.states[0].step < training["steps"]:
                start = time.perf_counter()
                losses = self._step()
                elapsed = (time.perf_counter() - start) / len(self.tasks)
                for state, loss in zip(self.states, losses):
                    state.step += 1
                    state.seconds += elapsed
                    state.losses.append(loss)
                step = self.states[0].step
                if step % training["eval_every"] == 0 or step == training["steps"]:
                    for state, loss, value in zip(self.states, losses, self.evaluate()):
                        state.history.append({"step": step, "seconds": state.seconds, "loss": loss, "psnr": value})
                if interrupted() or (step % training["checkpoint_every"] == 0 and step < training["steps"]):
                    self.save(checkpoint)
                if interrupted():
                    raise Interrupted

    def save(self, path: Path) -> None:
        payload = {"names": [run["task"]["path"] for run in self.runs], "config": self.runs[0],
                   "states": [vars(s) for s in self.states], "diverged": {m: d.step for m, d in self.diverged.items()},
                   "model": self.batch.state_dict(), "optimizer": self.optimizer.state_dict(),
                   "scheduler": self.scheduler.state_dict(), "batches": self.batches.get_state()}
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)

    def load(self, path: Path) -> bool:
        """Continue the group saved at ``path`` if it is this group (same files and config); False otherwise."""
        try:
            payload = torch.load(path, map_location=self.device, weights_only=True)
            if payload["names"] != [run["task"]["path"] for run in self.runs] or payload["config"] != self.runs[0]:
                return False
            self.batch.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.scheduler.load_state_dict(payload["scheduler"])
            self.batches.set_state(payload["batches"])
        except Exception:  # unreadable or of another group: start the group afresh
            return False
        self.states = [FitState(**state) for state in payload["states"]]
        self.diverged = {m: Diverged(step, "the loss was not finite", None) for m, step in payload["diverged"].items()}
        return True

    def write(self, m: int, folder: Path, overwrite: bool, pictures: bool = True) -> dict[str, Any]:
        """Model ``m``'s run folder, as a single run of it would leave it -> its metrics."""
        if m in self.diverged:
            raise self.diverged[m]
        run, task, model = self.runs[m], self.tasks[m], self.batch.field(m)
        with RunFolder(folder, OUTPUT_FILES, overwrite=overwrite) as run_folder:
            fitter = Fitter(model, self.problems[m], self.training, run["seed"], run_folder, self.device, run)
            fitter.state = self.states[m]
            fitter.scheduler.load_state_dict(self.scheduler.state_dict())
            fitter.batches.set_state(self.batches.get_state())
            self._copy_optimizer_state(m, model, fitter.optimizer)
            fitter.save_checkpoint()
            return finish(run, task, model, fitter.state, folder, self.device, {"fitted_together": len(self.tasks)},
                          pictures)

    def _copy_optimizer_state(self, m: int, model: Field, optimizer: GridAdam) -> None:
        """Model m's slice of the group's Adam state into ``optimizer`` (over ``model``, model m as a Field)."""
        for name, param in model.named_parameters():
            stacked = self.batch.stacked(name)
            state = self.optimizer.state.get(stacked)
            if state:  # per element (moments, lazy step counts): model m's slice; Adam's one step count: as is
                optimizer.state[param] = {
                    key: value.reshape(len(self.tasks), -1)[m].reshape(param.shape).clone()
                    if value.numel() == stacked.numel() else value.clone() for key, value in state.items()}


def fit_group(runs: list[dict[str, Any]], tasks: list[Any], folders: list[Path], out: Path, device: torch.device,
              overwrite: bool, pictures: bool = True) -> list[dict[str, Any] | BaseException]:
    """Fit ``tasks`` together and write each into its folder -> per task its metrics or the error it ended with."""
    fitter = GroupFitter(runs, tasks, device)
    checkpoint = out / GROUP_CHECKPOINTS.replace("*", f"{folders[0].name}-{len(tasks)}")
    if checkpoint.is_file():
        fitter.load(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    fitter.run(checkpoint)
    results: list[dict[str, Any] | BaseException] = []
    for m, folder in enumerate(folders):
        try:
            results.append(fitter.write(m, folder, overwrite, pictures))
        except Exception as error:  # this model's failure (Ctrl-C is not an Exception); the others are written
            results.append(error)
    checkpoint.unlink(missing_ok=True)
    return results


def chunks(indices: list[int], keys: list[tuple], size: int) -> list[list[int]]:
    """``indices`` grouped by equal ``keys`` (first-seen order), each group cut into runs of at most ``size``."""
    by_key: dict[tuple, list[int]] = {}
    for i, key in zip(indices, keys):
        by_key.setdefault(key, []).append(i)
    return [group[k:k + size] for group in by_key.values() for k in range(0, len(group), size)]
