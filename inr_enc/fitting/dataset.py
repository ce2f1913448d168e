"""``inr-fit images DIR`` and ``inr-fit audios DIR``: one config over every file of a folder (or a glob pattern).

Each file is fitted into a run folder of its own under ``out`` (named after the file), as ``inr-fit image`` fits
one, and ``summary.csv`` and ``summary.md`` in ``out`` list per file its status, PSNR, SSIM, bits per pixel (or
sample), seconds and steps, with mean ± std (sample standard deviation) over the files that have results.

Resumable: a file whose folder holds a finished run of the same resolved config is skipped (its metrics read
back), an interrupted one (config and checkpoint, no metrics.json) resumes, and a file whose fit raises anything
(unreadable, refused by the config, diverged, a crash) is recorded as failed while the others go on; Ctrl-C stops.

Under torchrun (``WORLD_SIZE`` > 1) rank r fits files r, r + W, r + 2W, ... of the sorted list; the ranks' rows
are gathered (gloo on CPU, NCCL on CUDA, where each rank takes device ``LOCAL_RANK``) and rank 0 writes the summary.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from tqdm import tqdm

from .outputs import METRICS_FILE
from .batched import chunks, fit_group, group_key, group_unavailable_reason
from .run import field_of, fit_run, read_task, resolve_for, resolve_task_run
from .run_folder import CHECKPOINT, CONFIG, read_config
from .stops import Diverged
from .summary import summary_row, finite_numbers, write_summary

SUFFIXES = {"image": (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".gif"),
            "audio": (".wav", ".flac", ".ogg")}
UNITS = {"image": "pixel", "audio": "sample"}
NO_MEMORY_LIMIT = 1 << 62  # bytes
GATHER_TIMEOUT = datetime.timedelta(days=7)  # ranks wait this long for the slowest one's share


def list_signals(kind: str, where: str, out: Path | None = None) -> list[Path]:
    """The files to fit, sorted: a folder's files with a ``kind`` suffix (SUFFIXES), or every file a glob pattern
    matches, leaving out anything under ``out`` (a run's own outputs). ValueError when there are none."""
    if Path(where).is_dir():
        files = [p for p in Path(where).iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES[kind]]
        if not files:
            raise ValueError(f"{where}: no {kind} files in the folder ({' '.join(SUFFIXES[kind])})")
    elif glob.has_magic(where):
        files = [Path(p) for p in glob.glob(where, recursive=True) if Path(p).is_file()]
        if not files:
            raise ValueError(f"{where}: the pattern matches no file")
    else:
        raise ValueError(f"{where}: neither a folder nor a glob pattern (such as 'photos/*.png')")
    if out is not None:
        files = [file for file in files if not file.resolve().is_relative_to(out.resolve())]
        if not files:
            raise ValueError(f"{where}: no file outside --out {out}")
    return sorted(files)


def default_name(where: str) -> str:
    """A name for a folder run's default --out: the folder's, or for a glob the folder before its first wildcard."""
    parts = Path(where).parts
    plain = parts[:next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))]
    return Path(*plain).resolve().name if plain else Path.cwd().name


def run_names(files: list[Path]) -> list[str]:
    """A distinct run-folder name per file: its stem; a repeated stem gets -2, -3, ... in the files' order."""
    names: list[str] = []
    for file in files:
        name, k = file.stem, 1
        while name in names:
            k += 1
            name = f"{file.stem}-{k}"
        names.append(name)
    return names


@dataclass(frozen=True)
class Ranks:
    """This process's place among torchrun's: rank, world size, local rank (0, 1, 0 without torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> Ranks:
        values = {}
        for name, default in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)):
            text = os.environ.get(name, str(default))
            if not text.strip().isdigit():
                raise ValueError(f"environment variable {name}={text!r}: expected a whole number (torchrun sets it)")
            values[name] = int(text)
        if values["WORLD_SIZE"] < 1 or values["RANK"] >= values["WORLD_SIZE"]:
            raise ValueError(f"RANK {values['RANK']} and WORLD_SIZE {values['WORLD_SIZE']}: need 0 <= RANK < WORLD_SIZE")
        return cls(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])


def _as_saved(run: dict[str, Any]) -> Any:
    """``run`` as config.yaml holds it once read back (tuples become lists), to compare with a saved run."""
    return yaml.safe_load(yaml.safe_dump(run, sort_keys=False))


def fit_file(kind: str, config: dict[str, Any], options: dict[str, Any], path: Path, folder: Path,
             device: torch.device, overwrite: bool) -> tuple[str, dict[str, Any]]:
    """Fit one file into ``folder`` -> (status "fitted" | "resumed" | "skipped", its metrics). ``options``:
    train_split, vis, pictures and resolve ("resolve_run"'s keywords). A folder holding another run is refused (ValueError) unless
    ``overwrite``."""
    run, task = resolve_task_run(config, kind, str(path), options["train_split"], **options["resolve"])
    has_run = (folder / CONFIG).is_file() and (folder / CHECKPOINT).is_file()
    if has_run and not overwrite:
        raw = read_config(folder)
        try:  # the saved run resolved as today (keys added since it was written take their defaults)
            saved = resolve_for(raw, task, options["train_split"], saved=True, max_memory=NO_MEMORY_LIMIT)
        except ValueError:
            saved = None
        same_signal = isinstance(raw, dict) and _as_saved(raw.get("task")) == _as_saved(run["task"])  # as written
        if saved is None or not same_signal or _as_saved(saved) != _as_saved(run):
            raise ValueError(f"{folder} holds a run of another config or signal; pass --overwrite to replace it")
        if (folder / METRICS_FILE).is_file():
            return "skipped", json.loads((folder / METRICS_FILE).read_text())
        return "resumed", fit_run(saved, task, folder, device, resume=True, quiet=True, vis=options["vis"],
                                  pictures=options.get("pictures", True))
    return "fitted", fit_run(run, task, folder, device, resume=False, quiet=True, overwrite=overwrite,
                             vis=options["vis"], pictures=options.get("pictures", True))


def check_config(kind: str, config: dict[str, Any], options: dict[str, Any], files: list[Path]) -> None:
    """Resolve ``config`` on the first file that reads, before anything is fitted, so a bad key or value is one
    error rather than one per file (ValueError); no memory limit here (a file too large is its own failure)."""
    for file in files:
        try:
            task = read_task(kind, str(file), options["train_split"])
        except ValueError:  # a file that cannot be fitted is recorded when its turn comes
            continue
        run = resolve_for(config, task, options["train_split"], **options["resolve"], max_memory=NO_MEMORY_LIMIT)
        reason = group_unavailable_reason(run, field_of(run, task)) if options.get("together", 1) > 1 else None
        if reason is not None:
            raise ValueError(f"--together: config {run['config_name']!r} cannot be fitted in batches: {reason}")
        return


def gather_rows(rows: list[tuple[int, dict]], ranks: Ranks) -> list[dict]:
    """Every rank's (file index, row) pairs -> all rows in file order (on every rank)."""
    if ranks.world > 1:
        gathered: list[Any] = [None] * ranks.world
        torch.distributed.all_gather_object(gathered, rows)
        rows = [pair for part in gathered for pair in part]
    return [row for _, row in sorted(rows, key=lambda pair: pair[0])]


@contextmanager
def rank_group(device: torch.device) -> Iterator[tuple[Ranks, torch.device]]:
    """This process's :class:`Ranks` and device (under torchrun on CUDA: GPU LOCAL_RANK), inside the ranks' process
    group (gloo on CPU, NCCL on CUDA) when there are several. Ranks wait for each other only when rows are gathered,
    after fitting their shares, so the group's timeout is long (a share may take days)."""
    ranks = Ranks.from_environment()
    if ranks.world == 1:
        yield ranks, device
        return
    if device.type == "cuda":
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
    torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=GATHER_TIMEOUT)
    try:
        yield ranks, device
    finally:
        torch.distributed.destroy_process_group()


def _groups(kind: str, config: dict[str, Any], options: dict[str, Any], files: list[Path], folders: list[Path],
            mine: list[int], overwrite: bool, together: int) -> list[list[int]]:
    """``mine`` as jobs: files with no run in their folder (or all, with ``overwrite``) in groups of up to
    ``together`` of one signal shape; the rest one by one (skipped, resumed, refused or failing as
    :func:`fit_file` finds them)."""
    fresh, keys = [], []
    for i in mine:
        if not overwrite and (folders[i] / CONFIG).is_file() and (folders[i] / CHECKPOINT).is_file():
            continue
        try:
            task = read_task(kind, str(files[i]), options["train_split"])
        except ValueError:  # fit_file records why
            continue
        fresh.append(i)
        keys.append(group_key(task))
    groups = [group for group in chunks(fresh, keys, together) if len(group) > 1]
    grouped = {i for group in groups for i in group}
    return groups + [[i] for i in mine if i not in grouped]


def fit_folder(kind: str, files: list[Path], config: dict[str, Any], options: dict[str, Any], out: Path,
               device: torch.device, ranks: Ranks, overwrite: bool = False, quiet: bool = False) -> list[dict[str, Any]]:
    """Fit ``files`` (:func:`list_signals`) with ``config`` into ``out``/<name>/, this rank's share under torchrun
    (inside :func:`rank_group`), and write the summary (rank 0) -> the rows, in file order."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    names = run_names(files)
    mine = list(range(ranks.rank, len(files), ranks.world))
    together = options.get("together", 1)
    jobs = [[i] for i in mine] if together == 1 else \
        _groups(kind, config, options, files, [out / name for name in names], mine, overwrite, together)
    rows: list[tuple[int, dict]] = []
    psnrs: list[float] = []
    bar = tqdm(total=len(mine), disable=quiet or ranks.rank != 0, unit="file", dynamic_ncols=True)
    for job in jobs:
        if len(job) == 1:
            try:
                results = [fit_file(kind, config, options, files[job[0]], out / names[job[0]], device, overwrite)]
            except Exception as error:  # recorded, whatever it is (Ctrl-C is not an Exception); the others go on
                results = [error]
        else:
            try:  # the signals are read again here: only one group's are held at a time
                pairs = [resolve_task_run(config, kind, str(files[i]), options["train_split"], **options["resolve"])
                         for i in job]
                results = [("fitted", r) if isinstance(r, dict) else r for r in fit_group(
                    *zip(*pairs), [out / names[i] for i in job], out, device, overwrite, options.get("pictures", True))]
            except Exception as error:
                results = [error] * len(job)
        for i, result in zip(job, results):
            if isinstance(result, BaseException):
                reason = str(result) if isinstance(result, (ValueError, OSError, Diverged)) else \
                    f"{type(result).__name__}: {str(result).strip().splitlines()[0] if str(result).strip() else ''}"
                rows.append((i, summary_row(files[i], names[i], UNITS[kind], "failed", {}, reason)))
            else:
                rows.append((i, summary_row(files[i], names[i], UNITS[kind], *result)))
                psnrs += finite_numbers([result[1].get("psnr")])
        bar.update(len(job))
        if psnrs:
            bar.set_postfix_str(f"mean PSNR {statistics.fmean(psnrs):.2f} dB")
    bar.close()
    all_rows = gather_rows(rows, ranks)
    if ranks.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, all_rows)
    return all_rows
