"""``inr-fit image|audio ...``: one run, new (from a config and the flags) or resumed (``--resume DIR``), and what
both kinds of run share: the device, the flags that override the training section, ``inr-fit configs``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import load_config
from ..config.files import apply_overrides
from ..config.memory import memory_limit_set
from ..fitting.run_folder import CHECKPOINT, CONFIG, check_target, holds_run, read_config
from ..fitting.tasks import task_info
from .parser import TRAINING_FLAGS

if TYPE_CHECKING:
    import torch


def list_configs() -> int:
    """inr-fit configs: each named config and the source it follows, one per line."""
    from ..config.files import available_configs, config_source

    names = available_configs()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {config_source(name)}")
    return 0


def pick_device(name: str) -> torch.device:
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available() or name == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {name}: not available on this machine")
    return torch.device(name)


def training_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, flag) for flag, key in TRAINING_FLAGS.items() if getattr(args, flag) is not None}


def new_run(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Path]:
    """A fresh run from the config file and the flags, and its output folder (not touched yet)."""
    from ..fitting.inputs import default_out
    from ..fitting.run import resolve_task_run

    if args.together != 1:
        raise ValueError(f"--together fits the files of a folder together: use inr-fit {task_info(args.task).folder}")
    info = task_info(args.task)
    name = args.config or info.config
    path = args.path or info.sample
    if path is None:
        raise ValueError(f"inr-fit {args.task} needs the path of the signal")
    out = args.out or default_out(str(path), [name], folder=False)
    check_target(out, args.overwrite)  # early, before the signal is read; again under the run's lock
    config = apply_overrides(load_config(name), args.set)
    run, task = resolve_task_run(config, args.task, str(path), args.train_split, seed=args.seed, backend=args.backend,
                                 training=training_overrides(args), config_name=Path(name).stem)
    return run, task, out


def resumed_run(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Path]:
    """The saved run in ``args.resume``, checked again; only --steps (and --quiet, --device) may change."""
    from ..fitting.inputs import check_unchanged
    from ..fitting.run import resolve_task_run

    clashing = [flag for flag in ("config", "path", "out", "seed", "backend", "batch_size", "lr", "schedule",
                                  "eval_every", "checkpoint_every") if getattr(args, flag) is not None] \
        + (["train_split"] if args.train_split else []) + (["set"] if args.set else [])
    if clashing:
        raise ValueError(f"--resume continues with the saved config; drop --{clashing[0].replace('_', '-')}")
    out = args.resume
    if not holds_run(out):
        raise ValueError(f"{out}: no run to resume (needs {CONFIG} and {CHECKPOINT})")
    saved = read_config(out)
    task = saved.get("task") if isinstance(saved, dict) else None
    if not isinstance(task, dict) or task.get("kind") != args.task:
        raise ValueError(f"{out} holds a {task.get('kind') if isinstance(task, dict) else 'broken'} run, "
                         f"not {args.task}")
    training = {"steps": args.steps} if args.steps is not None else None
    saved_task = task
    run, task = resolve_task_run(saved, args.task, task.get("path"), task.get("train_split", False),
                                 training=training, saved=True)
    check_unchanged(saved_task, run["task"], out)
    return run, task, out


def fit(args: argparse.Namespace) -> dict[str, Any]:
    """parse -> resolve (nothing written yet) -> fit."""
    from ..fitting.run import fit_run

    with memory_limit_set(args.max_memory):  # the resolved run's estimate and every build check against it
        run, task, out = resumed_run(args) if args.resume else new_run(args)
        return fit_run(run, task, out, pick_device(args.device), resume=bool(args.resume), quiet=args.quiet,
                       overwrite=args.overwrite, vis=args.vis, pictures=args.pictures == "all")
