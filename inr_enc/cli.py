"""``inr-fit``: fit an image or an audio file (WAV, FLAC, OGG) with a field from a config, from the command line.

    inr-fit image [PATH] [--config hashgrid] [--steps N] [--out DIR] [--train-split] [--seed S] ...
    inr-fit audio PATH (.wav, .flac, .ogg) [--config siren-audio] ...
    inr-fit image --resume DIR [--steps N]
    inr-fit images DIR|'GLOB' [--config hashgrid] [--out OUT] ...   (every file; OUT/summary.csv, summary.md)
    torchrun --nproc_per_node N -m inr_enc.cli images DIR ...        (each rank fits a share of the files)

Exit codes: 0 done; 2 bad input or an --out that cannot be written (one line on stderr, nothing in --out changed);
3 training diverged (a non-finite loss: the last good checkpoint is kept); 130 Ctrl-C or SIGTERM (a running fit saves its checkpoint first).
Only argparse and light modules (``fitting.stops`` holds the signal handling) load before ``main`` installs it;
torch and the rest load inside it.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .config import load_config
from .config.files import apply_overrides
from .config.memory import memory_limit_set
from .fitting.run_folder import CHECKPOINT, CONFIG, check_target, read_config
from .fitting.stops import Diverged, Interrupted, interrupts_noted
from .version import __version__

if TYPE_CHECKING:
    import torch

DEFAULT_IMAGE = Path(__file__).resolve().parent / "data" / "astronaut.png"  # package data: in a wheel too
DEFAULT_CONFIGS = {"image": "hashgrid", "audio": "siren-audio"}  # also the task names (fitting/run.py's TASKS)
FOLDER_TASKS = {"images": "image", "audios": "audio"}  # every file of a folder (fitting/dataset.py)
# flag -> key of the training section it overrides
TRAINING_FLAGS = {"steps": "steps", "batch_size": "batch_size", "lr": "lr", "schedule": "schedule",
                  "eval_every": "eval_every", "checkpoint_every": "checkpoint_every"}


def say(message: str) -> None:
    """``message`` as one line on stderr, whatever it holds (a file name with a line break or undecodable bytes)."""
    print("inr-fit: " + message.replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, as for every other bad input (argparse adds the usage)
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# the training section's defaults (config/schema.py TRAINING_DEFAULTS, which imports torch) as --help states them;
# tests/test_cli_flags.py checks that they agree
HELP_DEFAULTS = {"steps": 2000, "batch_size": "every sample", "lr": 0.001, "schedule": "constant", "eval_every": 50,
                 "checkpoint_every": 100}


def _from_config(key: str) -> str:
    return f"default: the config's training.{key}, else {HELP_DEFAULTS[key]}"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="inr-fit", description="Fit an implicit neural representation to an image or an audio "
                     "file (WAV, FLAC, OGG), or to every file of a folder; `inr-fit configs` lists the named configs.")
    parser.add_argument("task", choices=sorted(DEFAULT_CONFIGS) + sorted(FOLDER_TASKS) + ["configs"],
                        help="what to fit: one image or audio file, or every file of a folder (images, audios); "
                        "configs: list the named configs")
    parser.add_argument("path", nargs="?", type=Path, help="the signal (image: default inr_enc/data/astronaut.png); "
                        "images, audios: a folder or a glob pattern such as 'photos/*.png'")
    parser.add_argument("--config", help="config name in inr_enc/configs/ or a .yaml/.json file (default: hashgrid "
                        "for images, siren-audio for audio); images, audios: several, comma-separated, are compared")
    parser.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. --set encoding.log2_hashmap_size=15 network.n_neurons=128 "
                        "(dotted keys, YAML values; default: none)")
    parser.add_argument("--out", type=Path, help="output folder (default: out/<signal or folder>-<config>)")
    parser.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier run in --out "
                        "(default: refuse)")
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue the run saved in DIR (default: a new run)")
    parser.add_argument("--train-split", action="store_true", help="Tancik et al.: train on pixels [::2, ::2], test "
                        "on [1::2, 1::2] (default: train and test on every pixel)")
    parser.add_argument("--seed", type=int, help="seed of the initialisation and the batches (default: the config's, "
                        "else 0)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"),
                        help="default: auto (cuda, else mps, else cpu)")
    parser.add_argument("--steps", type=int, help=f"training steps ({_from_config('steps')})")
    parser.add_argument("--batch-size", type=int, help=f"samples per step ({_from_config('batch_size')})")
    parser.add_argument("--lr", type=float, help=f"Adam's learning rate ({_from_config('lr')})")
    parser.add_argument("--schedule", choices=("constant", "cosine"), help=f"learning-rate schedule "
                        f"({_from_config('schedule')})")
    parser.add_argument("--eval-every", type=int, metavar="K", help=f"steps between PSNR evaluations (the curve; "
                        f"{_from_config('eval_every')})")
    parser.add_argument("--checkpoint-every", type=int, metavar="K", help=f"steps between checkpoints "
                        f"({_from_config('checkpoint_every')})")
    parser.add_argument("--max-memory", metavar="SIZE", help="refuse runs estimated to need more memory than SIZE "
                        "(e.g. 64G; default: INR_ENC_MAX_MEMORY, else this machine's memory)")
    parser.add_argument("--vis", choices=("none", "tensorboard"), default="none", help="tensorboard: log scalars "
                        "every step, PSNR at evaluations and the pictures to OUT/tensorboard (default: none)")
    parser.add_argument("--pictures", choices=("all", "none"), default="all", help="none: no comparison.png or "
                        "curve.png in the run folders (default: all)")
    parser.add_argument("--together", type=int, default=1, metavar="N", help="images, audios: fit up to N files of "
                        "one size at once, as one batched computation (default: 1, one at a time)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or final line (default: both)")
    parser.add_argument("--version", action="version", version=f"inr-fit (inr_enc) {__version__}")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def list_configs() -> int:
    """inr-fit configs: each named config and the source it follows, one per line."""
    from .config.files import available_configs, config_source

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


def new_run(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Path]:
    """A fresh run from the config file and the flags, and its output folder (not touched yet)."""
    from .fitting.run import resolve_task_run

    if args.together != 1:
        raise ValueError(f"--together fits the files of a folder together: use inr-fit {args.task}s")
    name = args.config or DEFAULT_CONFIGS[args.task]
    path = args.path or (DEFAULT_IMAGE if args.task == "image" else None)
    if path is None:
        raise ValueError(f"inr-fit {args.task} needs the path of the signal")
    out = args.out or Path("out") / f"{Path(path).stem}-{Path(name).stem}"
    check_target(out, args.overwrite)  # early, before the signal is read; again under the run's lock
    training = training_overrides(args)
    config = apply_overrides(load_config(name), args.set)
    run, task = resolve_task_run(config, args.task, str(path), args.train_split, seed=args.seed, training=training,
                                 config_name=Path(name).stem)
    return run, task, out


def resumed_run(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Path]:
    """The saved run in ``args.resume``, checked again; only --steps (and --quiet, --device) may change."""
    from .fitting.inputs import check_unchanged
    from .fitting.run import resolve_task_run

    clashing = [flag for flag in ("config", "path", "out", "seed", "batch_size", "lr", "schedule", "eval_every", "checkpoint_every")
                if getattr(args, flag) is not None] + (["train_split"] if args.train_split else []) + (["set"] if args.set else [])
    if clashing:
        raise ValueError(f"--resume continues with the saved config; drop --{clashing[0].replace('_', '-')}")
    out = args.resume
    if not (out / CONFIG).is_file() or not (out / CHECKPOINT).is_file():
        raise ValueError(f"{out}: no run to resume (needs {CONFIG} and {CHECKPOINT})")
    saved = read_config(out)
    task = saved.get("task") if isinstance(saved, dict) else None
    if not isinstance(task, dict) or task.get("kind") != args.task:
        raise ValueError(f"{out} holds a {task.get('kind') if isinstance(task, dict) else 'broken'} run, not {args.task}")
    training = {"steps": args.steps} if args.steps is not None else None
    saved_task = task
    run, task = resolve_task_run(saved, args.task, task.get("path"), task.get("train_split", False),
                                 training=training, saved=True)
    check_unchanged(saved_task, run["task"], out)
    return run, task, out


def training_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, flag) for flag, key in TRAINING_FLAGS.items() if getattr(args, flag) is not None}


def fit_files(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """inr-fit images | audios: every file of a folder with each config of --config (comma-separated; several:
    OUT/<config>/ each, and OUT/summary.* and rate_distortion.png comparing them; fitting/dataset.py) -> each
    config's rows."""
    from .fitting.dataset import UNITS, check_config, fit_folder, from_rank_0, rank_group
    from .fitting.inputs import default_name, list_signals, safe_name
    from .fitting.run_folder import folder_run_locked
    from .fitting.summary import check_replaceable, write_config_comparison
    from .fitting.tensorboard import require_tensorboard

    kind = FOLDER_TASKS[args.task]
    if args.resume:
        raise ValueError(f"--resume continues one run; run the same inr-fit {args.task} command again to continue "
                         "(finished files are skipped, interrupted ones resume)")
    if args.path is None:
        raise ValueError(f"inr-fit {args.task} needs a folder or a glob pattern")
    if args.together < 1:
        raise ValueError(f"--together {args.together}: need at least 1")
    if args.together > 1 and args.vis != "none":
        raise ValueError("--vis tensorboard logs one run at a time; it does not go with --together")
    where, names = str(args.path), (args.config or DEFAULT_CONFIGS[kind]).split(",")
    stems = [Path(name).stem for name in names]
    if len({safe_name(stem) for stem in stems}) < len(stems):
        raise ValueError(f"--config {args.config}: two configs named alike; each gets OUT/<name>/")
    out = args.out or Path("out") / f"{default_name(where)}-{'+'.join(stems)}"
    if args.vis == "tensorboard":
        require_tensorboard()
    results: dict[str, list[dict[str, Any]]] = {}
    with memory_limit_set(args.max_memory):
        files = list_signals(kind, where, out)
        configs = {stem: apply_overrides(load_config(name), args.set) for stem, name in zip(stems, names)}
        options = {stem: {"train_split": args.train_split, "vis": args.vis, "together": args.together,
                          "pictures": args.pictures == "all",
                          "resolve": {"seed": args.seed, "training": training_overrides(args), "config_name": stem}}
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
                write_config_comparison(out, results, UNITS[kind])
    return results


def report_files(results: dict[str, list[dict[str, Any]]], quiet: bool) -> int:
    """Each config's gist on stdout (rank 0 only under torchrun); one line on stderr and exit code 2 if a file
    failed."""
    from .fitting.dataset import Ranks
    from .fitting.summary import mean_and_std

    if Ranks.from_environment().rank != 0:
        return 0
    failed = [(stem, row) for stem, rows in results.items() for row in rows if row["status"] == "failed"]
    for stem, rows in results.items():
        done = sum(row["status"] != "failed" for row in rows)
        psnr = mean_and_std([row["psnr"] for row in rows])
        if not quiet:
            print(f"{stem}: {done} of {len(rows)} files fitted" + (f", PSNR {psnr[0]:.2f} ± {psnr[1]:.2f} dB" if psnr else ""))
    if failed:
        total = sum(len(rows) for rows in results.values())
        stem, row = failed[0]
        say(f"{len(failed)} of {total} fits failed ({stem}, {row['file']}: {row['error']}); the summary lists them")
        return 2
    return 0


def fit(args: argparse.Namespace) -> dict[str, Any]:
    """parse -> resolve (nothing written yet) -> fit."""
    from .fitting.run import fit_run

    with memory_limit_set(args.max_memory):  # the resolved run's estimate and every build check against it
        run, task, out = resumed_run(args) if args.resume else new_run(args)
        return fit_run(run, task, out, pick_device(args.device), resume=bool(args.resume), quiet=args.quiet,
                       overwrite=args.overwrite, vis=args.vis, pictures=args.pictures == "all")


def main(argv: list[str] | None = None) -> int:
    with interrupts_noted():  # SIGTERM as Ctrl-C; the fit loop defers both to the end of its step
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(argv)
        if args.task == "configs":
            if args.path is not None:
                raise ValueError("inr-fit configs takes no path")
            return list_configs()
        if args.task in FOLDER_TASKS:
            return report_files(fit_files(args), args.quiet)
        metrics = fit(args)
    except ValueError as error:
        say(str(error))
        return 2
    except OSError as error:  # --out cannot be written (permissions, a full disk): one line, like bad input
        say(f"cannot write the run: {error}")
        return 2
    except Diverged as error:
        say(str(error))
        return 3
    except Interrupted:
        again = "run the same command again" if args.task in FOLDER_TASKS else "continue with --resume"
        print(f"inr-fit: interrupted; the checkpoint is saved, {again}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # while loading, before the training loop, or in a closed-form solve
        print("inr-fit: interrupted; no checkpoint was written by this run", file=sys.stderr)
        return 130
    if not args.quiet:
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
