"""``inr-fit images|audios DIR|GLOB``: every file of a folder with each config of --config (fitting/dataset.py),
and the report of such a run."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ..config import load_config
from ..config.files import apply_overrides
from ..config.memory import memory_limit_set
from ..fitting.tasks import folder_tasks
from .parser import say
from .single import pick_device, training_overrides


def fit_files(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """inr-fit images | audios: every file of a folder with each config of --config (comma-separated; several:
    OUT/<config>/ each, and OUT/summary.* and rate_distortion.png comparing them; fitting/dataset.py) -> each
    config's rows."""
    from ..fitting.dataset import check_config, fit_folder, from_rank_0, rank_group
    from ..fitting.inputs import default_out, list_signals, safe_name
    from ..fitting.run_folder import folder_run_locked
    from ..fitting.summary import check_replaceable, write_config_comparison
    from ..fitting.tensorboard import require_tensorboard

    info = folder_tasks()[args.task]
    kind = info.kind
    if args.resume:
        raise ValueError(f"--resume continues one run; run the same inr-fit {args.task} command again to continue "
                         "(finished files are skipped, interrupted ones resume)")
    if args.path is None:
        raise ValueError(f"inr-fit {args.task} needs a folder or a glob pattern")
    if args.together < 1:
        raise ValueError(f"--together {args.together}: need at least 1")
    if args.together > 1 and args.vis != "none":
        raise ValueError("--vis tensorboard logs one run at a time; it does not go with --together")
    where, names = str(args.path), (args.config or info.config).split(",")
    stems = [Path(name).stem for name in names]
    if len({safe_name(stem) for stem in stems}) < len(stems):
        raise ValueError(f"--config {args.config}: two configs named alike; each gets OUT/<name>/")
    out = args.out or default_out(where, names, folder=True)
    if args.vis == "tensorboard":
        require_tensorboard()
    results: dict[str, list[dict[str, Any]]] = {}
    with memory_limit_set(args.max_memory):
        files = list_signals(kind, where, out)
        configs = {stem: apply_overrides(load_config(name), args.set) for stem, name in zip(stems, names)}
        options = {stem: {"train_split": args.train_split, "vis": args.vis, "together": args.together,
                          "pictures": args.pictures == "all",
                          "resolve": {"seed": args.seed, "backend": args.backend, "training": training_overrides(args),
                                      "config_name": stem}}
                   for stem in configs}
        for stem, config in configs.items():  # every config checked before anything is fitted
            check_config(kind, config, options[stem], files)
        with rank_group(pick_device(args.device)) as (ranks, device), ExitStack() as held:
            def lock_out() -> None:  # one folder run at a time
                held.enter_context(folder_run_locked(out))
                if len(configs) > 1:
                    check_replaceable(out, args.overwrite)

            from_rank_0(ranks, lock_out)
            for stem, config in configs.items():
                folder = out / safe_name(stem) if len(configs) > 1 else out
                results[stem] = fit_folder(kind, files, config, options[stem], folder, device, ranks,
                                           args.overwrite, args.quiet)
            if len(configs) > 1 and ranks.rank == 0:
                write_config_comparison(out, results, info.unit)
    return results


def report_files(results: dict[str, list[dict[str, Any]]], quiet: bool) -> int:
    """Each config's gist on stdout (rank 0 only under torchrun); one line on stderr and exit code 2 if a file
    failed."""
    from ..fitting.dataset import Ranks
    from ..fitting.summary import mean_and_std

    if Ranks.from_environment().rank != 0:
        return 0
    failed = [(stem, row) for stem, rows in results.items() for row in rows if row["status"] == "failed"]
    for stem, rows in results.items():
        done = sum(row["status"] != "failed" for row in rows)
        psnr = mean_and_std([row["psnr"] for row in rows])
        if not quiet:
            print(f"{stem}: {done} of {len(rows)} files fitted"
                  + (f", PSNR {psnr[0]:.2f} ± {psnr[1]:.2f} dB" if psnr else ""))
    if failed:
        total = sum(len(rows) for rows in results.values())
        stem, row = failed[0]
        say(f"{len(failed)} of {total} fits failed ({stem}, {row['file']}: {row['error']}); the summary lists them")
        return 2
    return 0
