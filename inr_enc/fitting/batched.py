"""``inr-fit images DIR --together N``: same-sized signals fitted N at a time as one computation (field/batch.py,
trained by loop.py's Fitter), each model the run it would be alone, checkpointed into its own run folder as that
run would be (so a member resumes alone, and interrupted runs at one step resume as a group). When the group is
done, each model's outputs are written to its folder as ``inr-fit image`` writes them; ``seconds`` there is the
group's training time over its models. A model whose loss, evaluation error or weights stop being finite is
reported as diverged; the others go on. Every run folder is locked for the whole group.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from ..config.memory import check_memory
from ..field.batch import FieldBatch, batching_unavailable_reason
from ..field.schema import estimate_run_memory
from .checkpoints import load_group_file
from .loop import Fitter
from .outputs import OUTPUT_FILES
from .run import field_of, finish
from .run_folder import RunFolder
from .stops import Diverged


def group_unavailable_reason(tasks: list[Any], runs: list[dict[str, Any]] | None = None) -> str | None:
    """Why the signals of ``tasks`` (with their resolved ``runs``, when known) cannot be fitted as one group, or
    None when they can: signals of one kind and shape, runs equal beyond their signals, a config a FieldBatch
    computes, trained as groups train (Adam, no moving average)."""
    shapes = [{k: v for k, v in task.describe().items() if k != "path"} for task in tasks]
    if any(shape != shapes[0] for shape in shapes):
        return "their signals differ in kind or shape"
    if not runs:
        return None
    if any({**run, "task": None} != {**runs[0], "task": None} for run in runs):
        return "their resolved runs differ beyond their signals"
    if runs[0]["training"]["solver"] == "lion":
        return "it trains with Lion, which groups do not do yet"
    if runs[0]["training"]["ema_decay"] is not None:
        return "its training averages the weights (ema_decay, tcnn's Ema), which groups do not do yet"
    return batching_unavailable_reason(field_of(runs[0], tasks[0]))


def plan_groups(indices: list[int], together: Callable[[int, int], bool], size: int) -> list[list[int]]:
    """``indices`` in groups of at most ``size``: each joins the first open group whose first member it can be
    fitted ``together`` with (first-seen order), else opens one."""
    groups: list[list[int]] = []
    for i in indices:
        group = next((g for g in groups if len(g) < size and together(g[0], i)), None)
        if group is None:
            groups.append([i])
        else:
            group.append(i)
    return groups


class GroupUnloadable(ValueError):
    """A member's checkpoint does not load into its group (another model's, or saved before lazy tables): each
    member continues alone instead (fitting/dataset.py), so the one file fails and the others go on."""


def group_fitter(runs: list[dict[str, Any]], tasks: list[Any], folders: list[RunFolder], device: torch.device
                 ) -> Fitter:
    """A Fitter of ``tasks``' models as one FieldBatch (every model starts as its run alone would: one config and
    seed); ValueError when they cannot be grouped or do not fit in memory."""
    reason = group_unavailable_reason(tasks, runs)
    if reason is not None:
        raise ValueError(f"--together: config {runs[0]['config_name']!r} cannot be batched: {reason}")
    estimate = estimate_run_memory(runs[0], tasks[0].n_input_dims, tasks[0].n_output_dims, tasks[0].n_samples)
    check_memory(f"--together: {len(tasks)} models", len(tasks) * sum(estimate.values()))
    batch = FieldBatch([field_of(runs[0], tasks[0])] * len(tasks))
    return Fitter(batch, [task.problem() for task in tasks], runs[0]["training"], runs[0]["seed"], folders, device,
                  runs)


def fit_group(runs: list[dict[str, Any]], tasks: list[Any], folders: list[Path], resume: list[bool],
              device: torch.device, overwrite: bool, pictures: bool = True, legacy: Path | None = None
              ) -> list[dict[str, Any] | BaseException]:
    """Fit ``tasks`` together (continuing their checkpoints where ``resume``, or the legacy group file ``legacy``)
    and write each into its folder -> per task its metrics or the error it ended with.

    Every folder is locked (and checked, as ``inr-fit image`` checks --out) before training; one that cannot be
    used is that file's error and the group goes on without it. Training ends with every model's checkpoint
    written, before any model's outputs: a Ctrl-C from then on leaves each file to resume on its own."""
    results: list[dict[str, Any] | BaseException | None] = [None] * len(tasks)
    with ExitStack() as stack:
        locked: dict[int, RunFolder] = {}
        for m, folder in enumerate(folders):
            try:
                locked[m] = stack.enter_context(RunFolder(folder, OUTPUT_FILES, resume[m], overwrite))
            except (ValueError, OSError) as error:
                results[m] = error
        members = list(locked)
        if not members:
            return results  # type: ignore[return-value]

        def build() -> Fitter:
            return group_fitter([runs[m] for m in members], [tasks[m] for m in members],
                                [locked[m] for m in members], device)

        fitter = build()
        if legacy is not None and legacy.is_file():
            try:
                load_group_file(fitter, legacy)
            except ValueError:  # another group's or damaged: this group starts afresh
                fitter = build()
        elif any(resume[m] for m in members):
            try:
                fitter.load_checkpoints()
            except ValueError as error:
                raise GroupUnloadable(str(error)) from None
        try:
            fitter.run(quiet=True)
        except Diverged:  # every model diverged: each is reported below
            pass
        finally:
            if legacy is not None and fitter.checkpoint_step is not None:  # its models' checkpoints replace it
                legacy.unlink(missing_ok=True)
        models = dict(fitter.models())
        for k, m in enumerate(members):
            try:
                results[m] = fitter.diverged[k] if k in fitter.diverged else finish(
                    runs[m], tasks[m], models[k], fitter.states[k], folders[m], device,
                    {"fitted_together": len(members)}, pictures)
            except Exception as error:  # this model's failure (Ctrl-C is not an Exception)
                results[m] = error
    return results  # type: ignore[return-value]
