"""Fixed wall-clock benchmark of a nerfstudio method on CPU (numbers for docs/nerf.md).

Measures: METHOD, configured as ns-train configures it (blender-data parser, or nerfstudio-data for a folder
with a transforms.json: images downscaled 2x, every 8th view held out; CPU, tensorboard,
no evaluation during training), trains in-process until its training loop has used --budget
seconds (timed from the start of the first iteration, so data-worker start-up is included);
the final checkpoint is then evaluated on every test view as ns-eval does. Reported: iterations,
loop seconds, training rays/s, test PSNR/SSIM (mean, std), render rays/s, torch threads, and the field's
share of a render (scripts/render_cost.py, on the first test views).
Offline, and only inside this process: LPIPS is replaced by a NaN stub (its AlexNet weights
would be downloaded), so "lpips" is null; the numpy globals a checkpoint needs under torch.load's
weights_only=True are allow-listed one by one and listed in "allowlisted_globals".

Reproduce (writes OUT/METHOD/results.json, and a copy in the timestamped run folder):
  .venv-bench/bin/python scripts/bench_nerf.py nerfacto --data data/scenes/primitives \
      --budget 300 --out out/nerf-bench [--rays-per-batch 4096] [-- extra ns-train method args]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import pickle
import re
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import torch
from render_cost import render_cost  # scripts/, this script's folder

from inr_enc.io import write_text_atomically

EVAL_FLAGS = ("steps-per-eval-batch", "steps-per-eval-image", "steps-per-eval-all-images")


def fail(message: str) -> NoReturn:
    print(f"bench_nerf.py: error: {message}", file=sys.stderr)
    sys.exit(2)


class OneLineErrorParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = OneLineErrorParser(description="Train a nerfstudio method on CPU for a fixed wall-clock budget.")
    parser.add_argument("method", help="registered ns-train method, e.g. nerfacto")
    parser.add_argument("--data", type=Path, required=True, help="scene folder (blender-data or nerfstudio-data)")
    parser.add_argument("--budget", type=float, required=True, help="training-loop seconds")
    parser.add_argument("--out", type=Path, required=True, help="output root")
    parser.add_argument("--rays-per-batch", type=int, help="training rays per batch (default: the method's)")
    args = parser.parse_args(argv[:split])
    if not (math.isfinite(args.budget) and args.budget > 0):
        fail(f"--budget must be a positive number of seconds, got {args.budget}")
    if args.rays_per_batch is not None and args.rays_per_batch <= 0:
        fail(f"--rays-per-batch must be positive, got {args.rays_per_batch}")
    if dataparser_args(args.data) is None:
        fail(f"--data {args.data} has neither transforms.json (nerfstudio-data) nor transforms_train.json and "
             "transforms_test.json (blender-data)")
    return args, argv[split + 1 :]


def dataparser_args(data: Path) -> list[str] | None:
    """ns-train's dataparser arguments for a scene folder: nerfstudio-data (a capture as ns-process-data writes it,
    images downscaled 2x, every 8th view held out) where it has a transforms.json, else blender-data; None when
    it is neither."""
    if (data / "transforms.json").is_file():
        return ["nerfstudio-data", "--data", str(data), "--downscale-factor", "2", "--eval-mode", "interval",
                "--eval-interval", "8"]
    if all((data / name).is_file() for name in ("transforms_train.json", "transforms_test.json")):
        return ["blender-data", "--data", str(data)]
    return None


class NaNLPIPS(torch.nn.Module):
    """Offline stand-in for torchmetrics' LPIPS: no weights, always NaN."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.tensor(float("nan"))


def disable_lpips() -> None:
    # nerfstudio's models import the class inside populate_modules(), so patching a model module
    # would not reach it: replace it at its source, before nerfstudio or any plugin is imported.
    for module_name in ("torchmetrics.image.lpip", "torchmetrics.image"):
        importlib.import_module(module_name).LearnedPerceptualImagePatchSimilarity = NaNLPIPS


@dataclass
class BudgetClock:
    budget_s: float
    iterations: int = 0
    rays: int = 0
    rays_per_batch: int = 0
    start: float | None = None
    end: float | None = None


def install_budget_stop(clock: BudgetClock) -> None:
    """Patch Trainer so that its loop stops once clock.budget_s seconds have passed."""
    from nerfstudio.engine.trainer import Trainer

    run_iteration, after_train = Trainer.train_iteration, Trainer._after_train

    def timed_iteration(self: Trainer, step: int) -> Any:
        clock.start = clock.start or time.perf_counter()
        clock.rays_per_batch = self.pipeline.datamanager.get_train_rays_per_batch()  # this step's (dynamic batches)
        result = run_iteration(self, step)
        clock.iterations += 1
        clock.rays += clock.rays_per_batch
        if time.perf_counter() - clock.start >= clock.budget_s:
            self.stop_training = True  # the loop checks this before its next iteration
        return result

    def timed_after_train(self: Trainer) -> None:
        clock.end = time.perf_counter()  # the loop has exited; checkpoint saving is not counted
        after_train(self)

    Trainer.train_iteration, Trainer._after_train = timed_iteration, timed_after_train  # type: ignore


def user_sets(flag: str, extra: list[str]) -> bool:
    return any(a.startswith("--") and a[2:].split("=")[0].replace("_", "-") == flag for a in extra)


def tyro_reason(text: str) -> str:
    """The message under the title of tyro's error box, up to the next rule or blank line."""
    lines = [line.strip(" │╭╮╰╯").strip() for line in text.splitlines()]
    lines = [line if line.strip("─-") else "" for line in lines]
    start = next((i + 1 for i, line in enumerate(lines) if line), len(lines))  # skip the title
    body = "\n".join(lines[start:]).strip().split("\n\n")[0]
    return body.replace("\n", " ") or "could not parse the arguments"


def build_config(args: argparse.Namespace, extra: list[str]) -> Any:
    import tyro

    with warnings.catch_warnings():  # keep bad-input output to one line
        warnings.simplefilter("ignore", FutureWarning)
        from nerfstudio.configs.method_configs import (
            AnnotatedBaseConfigUnion,
            all_methods,
        )
    if args.method not in all_methods:
        fail(f"unknown method {args.method!r}; registered: {', '.join(all_methods)}")
    cli = [args.method, "--machine.device-type", "cpu", "--vis", "tensorboard",
           "--viewer.quit-on-train-completion", "True", "--max-num-iterations", str(10**9),
           "--output-dir", str(args.out / args.method)]
    cli += [word for flag in EVAL_FLAGS if not user_sets(flag, extra) for word in (f"--{flag}", "0")]
    if hasattr(all_methods[args.method].pipeline.model, "implementation"):
        cli += ["--pipeline.model.implementation", "torch"]  # nerfacto & co.: no tiny-cuda-nn on CPU
    if args.rays_per_batch is not None:
        cli += ["--pipeline.datamanager.train-num-rays-per-batch", str(args.rays_per_batch)]
    cli += [*extra, *(dataparser_args(args.data) or [])]  # on repeats, the user's value wins
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tyro warns about nerfstudio's `Type` annotations
            config = tyro.cli(AnnotatedBaseConfigUnion, args=cli)
    except SystemExit as parse_exit:
        if not parse_exit.code:  # e.g. `-- --help`
            print(captured.getvalue())
            raise
        fail(f"ns-train rejected {shlex.join(cli)}: {tyro_reason(captured.getvalue())}")
    if args.rays_per_batch is not None and hasattr(config.pipeline, "target_num_samples"):
        fail(f"{args.method} sizes its batches by samples (DynamicBatchPipeline): pass "
             "-- --pipeline.target-num-samples N instead of --rays-per-batch")
    config.experiment_name = config.experiment_name or args.data.resolve().name  # not "unnamed"
    stamp, attempt = datetime.now().strftime("%Y-%m-%d_%H%M%S"), 1
    config.timestamp = stamp
    while config.get_base_dir().exists():  # a fresh run folder even within the same second
        attempt += 1
        config.timestamp = f"{stamp}-{attempt}"
    return config


def allow_numpy_globals(checkpoint: Path) -> list[str]:
    """Allow-list, one at a time, the numpy globals that weights_only loading rejects."""
    import numpy as np

    allowed: dict[str, Any] = {"numpy.dtype": np.dtype}
    allowed.update({f"numpy.dtypes.{n}": getattr(np.dtypes, n) for n in dir(np.dtypes) if "DType" in n})
    for module_name in ("numpy.core.multiarray", "numpy._core.multiarray"):  # numpy 1.x, 2.x
        with contextlib.suppress(ImportError, AttributeError), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2 deprecates numpy.core
            allowed[f"{module_name}.scalar"] = importlib.import_module(module_name).scalar
    needed: list[str] = []
    while True:
        try:
            torch.load(checkpoint, map_location="cpu", weights_only=True)
            return needed
        except pickle.UnpicklingError as error:
            found = re.search(r"GLOBAL (\S+) was not|but got <class '([^']+)'>", str(error))
            name = (found[1] or found[2]) if found else "an unrecognised global"
            if name not in allowed or name in needed:
                raise SystemExit(f"bench_nerf.py: not loading {checkpoint}: it needs {name}") from error
            needed.append(name)
            torch.serialization.add_safe_globals([allowed[name]])


def finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def main(argv: list[str]) -> None:
    args, extra = parse_args(argv)
    disable_lpips()
    config = build_config(args, extra)
    clock = BudgetClock(budget_s=args.budget)
    install_budget_stop(clock)
    from nerfstudio.scripts.train import main as ns_train
    from nerfstudio.utils.eval_utils import eval_setup

    ns_train(config)  # -> launch -> train_loop(local_rank=0, world_size=1, config)
    if clock.start is None or clock.end is None:
        raise SystemExit("bench_nerf.py: training did not run to completion (interrupted?)")
    training_loop_s = clock.end - clock.start
    run_dir, checkpoint = config.get_base_dir(), max(config.get_checkpoint_dir().glob("step-*.ckpt"))
    allowlisted = allow_numpy_globals(checkpoint)
    eval_start = time.perf_counter()
    _, pipeline, _, _ = eval_setup(run_dir / "config.yml", test_mode="test")
    metrics = pipeline.get_average_eval_image_metrics(get_std=True)
    results = {
        "method": args.method, "data": str(args.data), "budget_s": args.budget,
        "training_loop_s": round(training_loop_s, 3), "iterations": clock.iterations,
        "rays_per_batch": clock.rays_per_batch,
        "train_rays_per_s": round(clock.rays / training_loop_s, 1),
        "psnr": metrics.get("psnr"), "psnr_std": finite_or_none(metrics.get("psnr_std")),
        "ssim": metrics.get("ssim"), "ssim_std": finite_or_none(metrics.get("ssim_std")),
        "lpips": finite_or_none(metrics.get("lpips")), "lpips_disabled": True,
        "render_rays_per_s": round(metrics["num_rays_per_sec"], 1),
        "n_test_views": len(pipeline.datamanager.fixed_indices_eval_dataloader),
        "eval_s": round(time.perf_counter() - eval_start, 1), "render_cost": render_cost(pipeline),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "allowlisted_globals": allowlisted, "checkpoint": str(checkpoint),
        "command": shlex.join([sys.executable, *sys.argv]), "config": str(run_dir / "config.yml"),
    }
    for path in (args.out / args.method / "results.json", run_dir / "results.json"):
        write_text_atomically(path, json.dumps(results, indent=2) + "\n")
    print("LPIPS was disabled (offline: its AlexNet weights cannot be downloaded); lpips is null.")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
