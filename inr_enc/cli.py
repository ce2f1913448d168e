"""``inr-fit``: fit an image or a WAV file with a field from a config, from the command line.

    inr-fit image [PATH] [--config hashgrid] [--steps N] [--out DIR] [--train-split] [--seed S] ...
    inr-fit audio PATH.wav [--config siren-audio] ...
    inr-fit image --resume DIR [--steps N]

Bad input prints one line on stderr and exits with code 2; Ctrl-C saves a checkpoint and exits with 130.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

import torch
import yaml

from .config import load_config
from .encoders import encoder_class
from .encoders.base import check_keys
from .field import build_field, is_separable
from .kernels.cpu_grid import cpu_extension
from .optim import grid_tables
from .tasks.audio import AudioTask
from .tasks.fitting import CHECKPOINT, Fitter, Interrupted, resolve_training
from .tasks.image import ImageTask
from .tasks.outputs import OUTPUT_FILES, model_size_metrics, write_config, write_curve, write_metrics

DEFAULT_IMAGE = Path(__file__).resolve().parent.parent / "data" / "astronaut.png"
TASKS = {"image": (ImageTask, "hashgrid"), "audio": (AudioTask, "siren-audio")}
CONFIG_KEYS = ("encoding", "network", "training", "seed")
# encodings sized to the signal: otype (lower case) -> the key that, left null, is set to the signal's shape
SIZED_BY_SIGNAL = {"latentgrid": "resolution"}
# flag -> key of the training section it overrides
TRAINING_FLAGS = {"steps": "steps", "batch_size": "batch_size", "lr": "lr", "schedule": "schedule",
                  "eval_every": "eval_every", "checkpoint_every": "checkpoint_every"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="inr-fit", description="Fit an implicit neural representation to an image or a WAV file.")
    parser.add_argument("task", choices=sorted(TASKS), help="what to fit")
    parser.add_argument("path", nargs="?", type=Path, help="the signal (image: default data/astronaut.png)")
    parser.add_argument("--config", help="config name in configs/ or a .yaml/.json file (image: hashgrid, audio: siren-audio)")
    parser.add_argument("--out", type=Path, help="output folder (default out/<signal>-<config>)")
    parser.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier run in --out")
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue the run saved in DIR")
    parser.add_argument("--train-split", action="store_true", help="Tancik et al.: train on pixels [::2, ::2], test on [1::2, 1::2]")
    parser.add_argument("--seed", type=int, help="seed of the initialisation and the batches (default: the config's, else 0)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    parser.add_argument("--steps", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--schedule", choices=("constant", "cosine"))
    parser.add_argument("--eval-every", type=int, help="steps between PSNR evaluations (the curve)")
    parser.add_argument("--checkpoint-every", type=int, metavar="K", help="steps between checkpoints")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available() or name == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {name}: not available on this machine")
    return torch.device(name)


def _with_seed(section: dict[str, Any], seed: int, has_seed_key: bool) -> dict[str, Any]:
    """The section with ``seed`` filled in where it takes one and the config did not set it."""
    return {**section, "seed": section.get("seed", seed)} if has_seed_key else dict(section)


def _encoding_with_seed(encoding: dict[str, Any], seed: int) -> dict[str, Any]:
    """The encoding config with ``seed`` filled in, also in nested encodings (Progressive, Composite)."""
    encoding = _with_seed(encoding, seed, "seed" in encoder_class(encoding.get("otype")).defaults)
    nested = encoding.get("nested")
    if isinstance(nested, dict):
        encoding["nested"] = _encoding_with_seed(nested, seed)
    elif isinstance(nested, list):
        encoding["nested"] = [_encoding_with_seed(n, seed) if isinstance(n, dict) else n for n in nested]
    return encoding


def warn_unfinished_schedules(model: torch.nn.Module, steps: int) -> None:
    """One line on stderr for each coarse-to-fine schedule that has not switched everything on by the last step."""
    for module in model.modules():
        end_step = getattr(module, "end_step", None)
        if end_step is not None and callable(getattr(module, "set_step", None)) and end_step >= steps:
            print(f"inr-fit: warning: {type(module).__name__}'s schedule ends at step {end_step} (end_step) but training "
                  f"stops at step {steps}: its finest bands or levels stay (partly) off", file=sys.stderr)


def trained_levels(model: torch.nn.Module) -> int:
    """How many levels of detail (PINs) the schedule had switched on in the last training step; 0 without levels."""
    weights = getattr(getattr(model, "network", None), "level_weights", None)
    return int((weights() > 0).sum()) if callable(weights) else 0


def new_run(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """Resolve a fresh run's config from the config file and the flags; prepare its output folder."""
    name = args.config or TASKS[args.task][1]
    config = load_config(name)
    check_keys("config", config, CONFIG_KEYS)
    seed = args.seed if args.seed is not None else config.get("seed", 0)
    training = dict(config.get("training") or {})
    training.update({key: getattr(args, flag) for flag, key in TRAINING_FLAGS.items() if getattr(args, flag) is not None})
    path = args.path or (DEFAULT_IMAGE if args.task == "image" else None)
    if path is None:
        raise ValueError(f"inr-fit {args.task} needs the path of the signal")
    encoding = dict(config.get("encoding") or {"otype": "Identity"})
    network = dict(config.get("network") or {})
    run = {
        "task": {"kind": args.task, "path": str(path), "train_split": args.train_split},
        "config_name": Path(name).stem, "seed": seed,
        "encoding": _encoding_with_seed(encoding, seed),
        "network": _with_seed(network, seed, not is_separable(network)),
        "training": resolve_training(training),
    }
    out = args.out or Path("out") / f"{Path(path).stem}-{Path(name).stem}"
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise ValueError(f"{out} exists and is not empty; pass --overwrite to replace it or --resume {out} to continue")
    return run, out


def resumed_run(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """The saved run in ``args.resume``; only --steps (and --quiet, --device) may change."""
    clashing = [flag for flag in ("config", "path", "out", "seed", "batch_size", "lr", "schedule", "eval_every", "checkpoint_every")
                if getattr(args, flag) is not None] + (["train_split"] if args.train_split else [])
    if clashing:
        raise ValueError(f"--resume continues with the saved config; drop --{clashing[0].replace('_', '-')}")
    out = args.resume
    if not (out / "config.yaml").is_file() or not (out / CHECKPOINT).is_file():
        raise ValueError(f"{out}: no run to resume (needs config.yaml and {CHECKPOINT})")
    run = yaml.safe_load((out / "config.yaml").read_text())
    if run.get("task", {}).get("kind") != args.task:
        raise ValueError(f"{out} holds a {run.get('task', {}).get('kind')} run, not {args.task}")
    if args.steps is not None:
        run["training"] = resolve_training({**run["training"], "steps": args.steps})
    return run, out


def fit(args: argparse.Namespace) -> dict[str, Any]:
    run, out = resumed_run(args) if args.resume else new_run(args)
    device = pick_device(args.device)
    task_class = TASKS[args.task][0]
    task = task_class(run["task"]["path"], run["task"]["train_split"])
    run["task"] = {**run["task"], **task.describe()}
    encoding_otype = str(run["encoding"].get("otype", "")).lower()
    if encoding_otype in SIZED_BY_SIGNAL and run["encoding"].get(SIZED_BY_SIGNAL[encoding_otype]) is None:
        run["encoding"] = {**run["encoding"], SIZED_BY_SIGNAL[encoding_otype]: task.coordinate_shape}
    model = build_field(task.n_input_dims, task.n_output_dims, {"encoding": run["encoding"], "network": run["network"]})
    if run["training"]["solver"] == "closed-form" and not is_separable(run["network"]):
        raise ValueError("training solver 'closed-form' needs network otype Separable (a model linear in its weights)")
    run.update(model.config)
    if not args.resume:  # the signal and config are valid: only now replace an earlier run's outputs
        for pattern in OUTPUT_FILES:
            for file in out.glob(pattern):
                file.unlink()
    out.mkdir(parents=True, exist_ok=True)
    if device.type == "cpu" and grid_tables(model):
        cpu_extension()  # a first build here, not inside the first (timed) training step
    fitter = Fitter(model, task.problem(), run["training"], run["seed"], out, device, run)
    if args.resume:
        fitter.load_checkpoint()
    write_config(out, run)
    warn_unfinished_schedules(model, run["training"]["steps"])
    if run["training"]["solver"] == "closed-form":
        xs, ys, values = task.train_grid()
        state = fitter.solve(lambda: model.solve(xs, ys, values, run["training"]["ridge"]))
    else:
        state = fitter.run(quiet=args.quiet)
    chunk = run["training"]["eval_chunk"]
    metrics = task.finish(model, out, chunk, device)
    for level in range(trained_levels(model)):  # PINs: one reconstruction per level of detail
        level_metrics = task.finish(functools.partial(model, level=level), out, chunk, device, f"reconstruction_level{level}")
        metrics[f"psnr_level{level}"] = level_metrics["psnr"]
    n_params = sum(p.numel() for p in model.parameters())
    final_loss = {"loss": state.history[-1]["loss"]} if state.history else {}
    metrics.update({**final_loss, "steps": state.step, "seconds": state.seconds, **model_size_metrics(n_params, task.n_samples, task.unit)})
    write_metrics(out, metrics)
    write_curve(out, state, f"{run['config_name']} on {Path(run['task']['path']).name}")
    return metrics


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        metrics = fit(args)
    except ValueError as error:
        print(f"inr-fit: {error}", file=sys.stderr)
        return 2
    except Interrupted:
        print("inr-fit: interrupted; the checkpoint is saved, continue with --resume", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # before the training loop, or in a closed-form solve: nothing new was saved
        print("inr-fit: interrupted; no checkpoint was written by this run", file=sys.stderr)
        return 130
    if not args.quiet:
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
