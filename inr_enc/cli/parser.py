"""inr-fit's command line: the parser, its sub-commands and help read from the task registry (fitting/tasks/__init__.py)
and the backends' list (config/backends.py). Torch-free: built inside ``main``, after its signal handling."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from ..config.backends import BACKENDS
from ..fitting.tasks import tasks
from ..version import __version__

# flag -> key of the training section it overrides
TRAINING_FLAGS = {"steps": "steps", "batch_size": "batch_size", "lr": "lr", "schedule": "schedule",
                  "eval_every": "eval_every", "checkpoint_every": "checkpoint_every"}
# the training section's defaults (field/schema.py TRAINING_DEFAULTS, which imports torch) as --help states them;
# tests/test_cli_flags.py checks that they agree
HELP_DEFAULTS = {"steps": 2000, "batch_size": "every sample", "lr": 0.001, "schedule": "constant", "eval_every": 50,
                 "checkpoint_every": 100}


def say(message: str) -> None:
    """``message`` as one line on stderr, whatever it holds (a file name with a line break or undecodable bytes)."""
    print("inr-fit: " + message.replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, as for every other bad input (argparse adds the usage)
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _from_config(key: str) -> str:
    return f"default: the config's training.{key}, else {HELP_DEFAULTS[key]}"


def build_parser() -> argparse.ArgumentParser:
    known = tasks().values()
    kinds = ", ".join(f"{t.kind} ({' '.join(t.suffixes)})" for t in known)
    folders = ", ".join(t.folder for t in known)
    samples = "; ".join(f"{t.kind}: default {Path(*t.sample.parts[-3:])}" for t in known if t.sample)
    parser = _Parser(prog="inr-fit", description=f"Fit an implicit neural representation to one signal ({kinds}), or "
                     "to every file of a folder; `inr-fit configs` lists the named configs.")
    parser.add_argument("task", choices=[t.kind for t in known] + [t.folder for t in known] + ["configs"],
                        help=f"what to fit: one file, or every file of a folder ({folders}); configs: list the named "
                        "configs")
    parser.add_argument("path", nargs="?", type=Path, help=f"the signal ({samples}); {folders}: a folder or a glob "
                        "pattern such as 'photos/*.png'")
    parser.add_argument("--config", help="config name in inr_enc/configs/ or a .yaml/.json file (default: "
                        + ", ".join(f"{t.config} for {t.kind}" for t in known)
                        + f"); {folders}: several, comma-separated, are compared")
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
    parser.add_argument("--backend", choices=BACKENDS, help="what computes every encoder of the field: auto (the "
                        "first of each encoder's that can run here), tcnn, cpp, triton or torch; saved with the run "
                        "(default: the config's backend, else auto)")
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
    parser.add_argument("--together", type=int, default=1, metavar="N", help=f"{folders}: fit up to N files of "
                        "one size at once, as one batched computation (default: 1, one at a time)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or final line (default: both)")
    parser.add_argument("--version", action="version", version=f"inr-fit (inr_enc) {__version__}")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
