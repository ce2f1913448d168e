"""One inr-fit run from a resolved run config (field/schema.py): build the field, fit it, write the outputs.

The output folder is locked and the run staged until its first checkpoint (run_folder.py): an earlier run's outputs
are replaced only then.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path
from typing import Any

import torch

from ..field import Field
from ..field.schema import FieldSpec, check_task, resolve_run
from ..ops.grid.cpu_kernel import cpu_extension
from ..optim import grid_tables
from ..optim.lazy_adam import lazy_adam_extension
from .checkpoints import provenance
from .inputs import file_identity
from .loop import Fitter
from .outputs import (
    CURVE_FILE,
    MODEL_FILE,
    OUTPUT_FILES,
    read_model_file,
    size_metrics,
    write_metrics,
    write_model_file,
)
from .pictures import write_curve
from .problem import FitState
from .run_folder import RunFolder
from .stops import Interrupted, raise_if_interrupted
from .tasks import Task, task_info
from .tensorboard import TensorBoardLog


def read_task(kind: str, path: str, train_split: bool) -> Task:
    """The task on the signal at ``path`` (read, input only); ValueError for a bad signal."""
    check_task({"kind": kind, "path": path, "train_split": train_split})
    return task_info(kind).cls(path, train_split)


def resolve_for(config: dict[str, Any], task: Task, train_split: bool, **options: Any
                ) -> dict[str, Any]:
    """The whole run of ``config`` on ``task``'s signal (field/schema.py ``resolve_run``, ``options`` passed on);
    ValueError naming the first problem."""
    facts = task.describe()  # kind, path and the signal's facts
    # the file's size and hash: is it still the file a saved run fitted?
    section = {"train_split": train_split, **facts, **file_identity(facts["path"])}
    return resolve_run(config, section, task.n_input_dims, task.n_output_dims, task.coordinate_shape, **options)


def resolve_task_run(config: dict[str, Any], kind: str, path: str, train_split: bool, **options: Any
                     ) -> tuple[dict[str, Any], Task]:
    """:func:`read_task` then :func:`resolve_for` -> (run, task)."""
    task = read_task(kind, path, train_split)
    return resolve_for(config, task, train_split, **options), task


def field_of(run: dict[str, Any], task: Task) -> Field:
    """A new model of the resolved ``run`` for ``task``'s signal (initialised from the run's seeds; every encoder on
    the run's backend)."""
    spec = FieldSpec.of_resolved(run, task.n_input_dims, task.n_output_dims)  # resolve_run checked it
    return Field(task.n_input_dims, task.n_output_dims, spec, backend=run["backend"])


def warn_unfinished_schedules(model: torch.nn.Module, steps: int) -> None:
    """One line on stderr for each coarse-to-fine schedule that has not switched everything on by the last step."""
    for module in model.modules():
        end_step = getattr(module, "end_step", None)
        if end_step is not None and callable(getattr(module, "set_step", None)) and end_step >= steps:
            print(f"inr-fit: warning: {type(module).__name__}'s schedule ends at step {end_step} (end_step) "
                  f"but training stops at step {steps}: its finest bands or levels stay (partly) off", file=sys.stderr)


def fit_run(run: dict[str, Any], task: Task, out: Path, device: torch.device, resume: bool,
            quiet: bool = False, overwrite: bool = False, vis: str = "none", pictures: bool = True) -> dict[str, Any]:
    """Fit ``task`` with the resolved ``run`` into ``out`` (continuing its checkpoint with ``resume``; replacing an
    earlier run's outputs with ``overwrite``, once the new run has a checkpoint); returns the metrics written to
    metrics.json. ``vis`` "tensorboard": a TensorBoard log in out/tensorboard (fitting/tensorboard.py);
    ``pictures`` False: no comparison.png or curve.png. Raises
    ValueError (folder in use, damaged checkpoint), Interrupted or Diverged."""
    training = run["training"]
    model = field_of(run, task)
    # first builds here, not inside the first (timed) step; tcnn runs on CUDA only: refused at the first forward
    if device.type == "cpu" and grid_tables(model) and run["backend"] != "tcnn":
        if run["backend"] in ("auto", "cpp"):
            cpu_extension()
        if training["lazy_tables"]:
            lazy_adam_extension()
    raise_if_interrupted()  # a signal a library swallowed while loading: nothing written yet
    with RunFolder(out, OUTPUT_FILES, resume=resume, overwrite=overwrite) as folder:
        fitter = Fitter(model, [task.problem()], training, run["seed"], [folder], device, [run])
        if resume:
            fitter.load_checkpoints()
        warn_unfinished_schedules(model, training["steps"])
        log = TensorBoardLog(folder, fitter.states[0].step) if vis == "tensorboard" else None
        try:
            if training["solver"] == "closed-form":
                xs, ys, values = task.train_grid()
                fitter.solve(lambda: model.network.solve(model.encoder, xs, ys, values, training["ridge"]))
            else:
                fitter.run(quiet=quiet, observer=log)
            state = fitter.states[0]
            try:
                with fitter.averaged():  # tcnn's Ema: the outputs are the moving average's
                    metrics = finish(run, task, model, state, out, device, pictures=pictures)
            except KeyboardInterrupt:  # the checkpoint is saved: --resume writes the outputs
                raise Interrupted from None
            if log is not None:
                log.pictures(state.step)
            return metrics
        finally:
            if log is not None:
                log.close()


def finish(run: dict[str, Any], task: Task, model: Field, state: FitState, out: Path,
           device: torch.device, extra: dict[str, Any] | None = None, pictures: bool = True) -> dict[str, Any]:
    """The reconstructions, model.safetensors, metrics.json (with ``extra``'s keys) and, with ``pictures``,
    comparison.png and curve.png of a trained model."""
    training = run["training"]
    chunk = training["eval_chunk"]
    metrics = task.finish(model, out, chunk, device, comparison=pictures)
    for level in range(trained_levels(model)):  # PINs: one reconstruction per level of detail
        level_metrics = task.finish(functools.partial(model, level=level), out, chunk, device,
                                    f"reconstruction_level{level}")
        metrics[f"psnr_level{level}"] = level_metrics["psnr"]
    file_bytes = write_model_file(out, model)
    rounded = field_of(run, task)
    read_model_file(out / MODEL_FILE, rounded.to(device))  # a fresh model, not a copy (tcnn holds native modules)
    metrics["psnr_float16"] = task.score(rounded, chunk, device)
    n_params = sum(p.numel() for p in model.parameters())
    final_loss = {"loss": state.history[-1]["loss"]} if state.history else {}
    scored = [h for h in state.history if not math.isnan(h["psnr"])]  # inf (an exact fit) is the best
    best = max(scored, key=lambda h: h["psnr"]) if scored else None
    metrics.update({**final_loss, "steps": state.step, "seconds": state.seconds,
                    **({"best_psnr": best["psnr"], "best_psnr_step": best["step"]} if best else {}),
                    **size_metrics(n_params, file_bytes, task.n_samples, task_info(run["task"]["kind"]).unit),
                    "provenance": provenance(model, device), **(extra or {})})
    write_metrics(out, metrics)
    if pictures:
        write_curve(out / CURVE_FILE, state.losses, state.history,
                    f"{run['config_name']} on {Path(run['task']['path']).name}")
    return metrics


def trained_levels(model: Field) -> int:
    """How many levels of detail (PINs) the schedule had switched on in the last training step; 0 without levels."""
    return int((model.network.level_weights() > 0).sum()) if model.n_levels is not None else 0
