"""``inr-fit``: fit a signal (an image, an audio file: the tasks of fitting/tasks/) with a field from a config, from
the command line.

    inr-fit image [PATH] [--config hashgrid] [--steps N] [--out DIR] [--train-split] [--seed S] [--backend B] ...
    inr-fit audio PATH (.wav, .flac, .ogg) [--config siren-audio] ...
    inr-fit image --resume DIR [--steps N]
    inr-fit images DIR|'GLOB' [--config hashgrid] [--out OUT] ...   (every file; OUT/summary.csv, summary.md)
    torchrun --nproc_per_node N -m inr_enc.cli images DIR ...        (each rank fits a share of the files)

Exit codes: 0 done; 2 bad input or an --out that cannot be written (one line on stderr, nothing in --out changed);
3 training diverged (a non-finite loss: the last good checkpoint is kept); 130 Ctrl-C or SIGTERM (a running fit saves
its checkpoint first).
Only torch-free modules load with this package: argparse, the signal handling (``fitting.stops``), the parser and
the task registry (parser.py, fitting/tasks/: their modules import torch inside their functions); ``main`` installs
the handling, then torch and the rest load. single.py runs one file, folder.py every file of a folder.
"""

from __future__ import annotations

import sys

from ..fitting.stops import Diverged, Interrupted, interrupts_noted
from ..fitting.tasks import folder_tasks
from ..fitting.tasks.image import SAMPLE_IMAGE as DEFAULT_IMAGE  # the name tests/test_wheel.py reads
from .folder import fit_files, report_files
from .parser import HELP_DEFAULTS, build_parser, parse_args, say
from .single import fit, list_configs

__all__ = ["DEFAULT_IMAGE", "HELP_DEFAULTS", "build_parser", "main", "parse_args"]


def main(argv: list[str] | None = None) -> int:
    with interrupts_noted():  # SIGTERM as Ctrl-C; the fit loop defers both to the end of its step
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(argv)
        folder_run = args.task in folder_tasks()
        if args.task == "configs":
            if args.path is not None:
                raise ValueError("inr-fit configs takes no path")
            return list_configs()
        if folder_run:
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
        again = "run the same command again" if folder_run else "continue with --resume"
        print(f"inr-fit: interrupted; the checkpoint is saved, {again}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # while loading, before the training loop, or in a closed-form solve
        print("inr-fit: interrupted; no checkpoint was written by this run", file=sys.stderr)
        return 130
    if not args.quiet:
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()))
    return 0
