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

import csv
import datetime
import glob
import io
import json
import math
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

from ..io import write_text_atomically
from .outputs import METRICS_FILE
from .pictures import write_rate_distortion
from .run import fit_run, read_task, resolve_for, resolve_task_run
from .run_folder import CHECKPOINT, CONFIG, read_config
from .stops import Diverged

SUFFIXES = {"image": (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".gif"),
            "audio": (".wav", ".flac", ".ogg")}
UNITS = {"image": "pixel", "audio": "sample"}
SUMMARY_CSV, SUMMARY_MD = "summary.csv", "summary.md"
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
    train_split, vis and resolve ("resolve_run"'s keywords). A folder holding another run is refused (ValueError) unless
    ``overwrite``."""
    run, task = resolve_task_run(config, kind, str(path), options["train_split"], **options["resolve"])
    has_run = (folder / CONFIG).is_file() and (folder / CHECKPOINT).is_file()
    if has_run and not overwrite:
        saved = read_config(folder)
        if not isinstance(saved, dict) or {k: v for k, v in saved.items() if k != "provenance"} != _as_saved(run):
            raise ValueError(f"{folder} holds a run of another config or signal; pass --overwrite to replace it")
        if (folder / METRICS_FILE).is_file():
            return "skipped", json.loads((folder / METRICS_FILE).read_text())
        run = resolve_for(saved, task, options["train_split"], saved=True)  # the signal already read
        return "resumed", fit_run(run, task, folder, device, resume=True, quiet=True, vis=options["vis"])
    return "fitted", fit_run(run, task, folder, device, resume=False, quiet=True, overwrite=overwrite,
                             vis=options["vis"])


def check_config(kind: str, config: dict[str, Any], options: dict[str, Any], files: list[Path]) -> None:
    """Resolve ``config`` on the first file that reads, before anything is fitted, so a bad key or value is one
    error rather than one per file (ValueError); no memory limit here (a file too large is its own failure)."""
    for file in files:
        try:
            task = read_task(kind, str(file), options["train_split"])
        except ValueError:  # a file that cannot be fitted is recorded when its turn comes
            continue
        resolve_for(config, task, options["train_split"], **options["resolve"], max_memory=NO_MEMORY_LIMIT)
        return


def summary_row(path: Path, name: str, unit: str, status: str, metrics: dict[str, Any], error: str = "") -> dict:
    return {"file": str(path), "run": name, "status": status, "psnr": metrics.get("psnr"),
            "ssim": metrics.get("ssim"), f"bits_per_{unit}": metrics.get(f"bits_per_{unit}"),
            "seconds": metrics.get("seconds"), "steps": metrics.get("steps"), "error": error}


def _finite(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def mean_and_std(values: list[Any]) -> tuple[float, float] | None:
    """Mean and sample standard deviation (0 for one value) of the finite numbers among ``values``; None if none."""
    numbers = _finite(values)
    if not numbers:
        return None
    return statistics.fmean(numbers), statistics.stdev(numbers) if len(numbers) > 1 else 0.0


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomically(path, text.getvalue())


def write_summary(out: Path, rows: list[dict[str, Any]]) -> None:
    """summary.csv (every column, one row per file) and summary.md (a table, then mean ± std), atomically."""
    columns = list(rows[0])
    _write_csv(out / SUMMARY_CSV, rows)

    def cell(value: Any) -> str:
        return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
    stats = {c: mean_and_std([row[c] for row in rows]) for c in columns[3:-1]}
    counts = {status: sum(row["status"] == status for row in rows) for status in ("fitted", "resumed", "skipped", "failed")}
    lines += ["", f"{len(rows)} files: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n), ""]
    lines += [f"- {c}: {s[0]:.4g} ± {s[1]:.2g}" for c, s in stats.items() if s is not None]
    write_text_atomically(out / SUMMARY_MD, "\n".join(lines) + "\n")


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


def fit_folder(kind: str, files: list[Path], config: dict[str, Any], options: dict[str, Any], out: Path,
               device: torch.device, ranks: Ranks, overwrite: bool = False, quiet: bool = False) -> list[dict[str, Any]]:
    """Fit ``files`` (:func:`list_signals`) with ``config`` into ``out``/<name>/, this rank's share under torchrun
    (inside :func:`rank_group`), and write the summary (rank 0) -> the rows, in file order."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    names = run_names(files)
    mine = range(ranks.rank, len(files), ranks.world)
    rows: list[tuple[int, dict]] = []
    psnrs: list[float] = []
    bar = tqdm(mine, disable=quiet or ranks.rank != 0, unit="file", dynamic_ncols=True)
    for i in bar:
        try:
            status, metrics = fit_file(kind, config, options, files[i], out / names[i], device, overwrite)
            rows.append((i, summary_row(files[i], names[i], UNITS[kind], status, metrics)))
            psnrs += _finite([metrics.get("psnr")])
        except Exception as error:  # recorded, whatever it is (Ctrl-C is not an Exception); the others go on
            reason = str(error) if isinstance(error, (ValueError, OSError, Diverged)) else \
                f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            rows.append((i, summary_row(files[i], names[i], UNITS[kind], "failed", {}, reason)))
        if psnrs:
            bar.set_postfix_str(f"mean PSNR {statistics.fmean(psnrs):.2f} dB")
    all_rows = gather_rows(rows, ranks)
    if ranks.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, all_rows)
    return all_rows


def write_config_comparison(out: Path, results: dict[str, list[dict[str, Any]]], unit: str) -> None:
    """Several configs over the same files: summary.csv and summary.md in ``out`` (one row per config: files with
    results, mean ± std of PSNR, SSIM and bits per ``unit``) and rate_distortion.png (PSNR against bits)."""
    rows = []
    for name, config_rows in results.items():
        done = [row for row in config_rows if row["status"] != "failed"]
        row = {"config": name, "files": len(config_rows), "with_results": len(done)}
        for column in ("psnr", "ssim", f"bits_per_{unit}"):
            stats = mean_and_std([r[column] for r in done])
            row[column], row[f"{column}_std"] = stats if stats else (None, None)
        rows.append(row)
    _write_csv(out / SUMMARY_CSV, rows)

    def both(row: dict[str, Any], column: str) -> str:
        return "" if row[column] is None else f"{row[column]:.4g} ± {row[f'{column}_std']:.2g}"

    lines = [f"| config | files (with results) | PSNR (dB) | SSIM | bits per {unit} |", "|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['files']} ({r['with_results']}) | {both(r, 'psnr')} | {both(r, 'ssim')} | "
              f"{both(r, f'bits_per_{unit}')} |" for r in rows]
    write_text_atomically(out / SUMMARY_MD, "\n".join(lines) + "\n")
    points = [(r["config"], r[f"bits_per_{unit}"], r["psnr"]) for r in rows if r["psnr"] is not None]
    write_rate_distortion(out / "rate_distortion.png", points, f"bits per {unit} (model.safetensors, float16)")
