"""A folder run's tables: per-file rows, summary.csv and summary.md with mean ± std (sample standard deviation),
and the comparison of several configs with its rate-distortion plot."""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path
from typing import Any

from ..io import write_text_atomically
from .pictures import write_rate_distortion

SUMMARY_CSV, SUMMARY_MD, COMPARISON_PLOT = "summary.csv", "summary.md", "rate_distortion.png"


# how the tables this module writes begin (per-file rows, then a comparison of configs): a file that begins
# otherwise under their names was not written by a folder run
OWN_BEGINNINGS = {SUMMARY_CSV: ("file,run,status,", "config,files,with_results,"),
                  SUMMARY_MD: ("| file | run | status |", "| config | files (with results) |")}


def check_replaceable(out: Path, overwrite: bool) -> None:
    """ValueError, unless ``overwrite``, if ``out`` holds a file under a name a folder run writes (summary.csv,
    summary.md, rate_distortion.png) that a folder run did not write (rate_distortion.png: without our
    summary.csv beside it), so that a folder run never replaces a user's file of that name."""
    ours = {}
    for name, beginnings in OWN_BEGINNINGS.items():
        if (out / name).exists():
            try:
                with open(out / name, encoding="utf-8", errors="replace") as file:
                    ours[name] = file.readline().startswith(beginnings)
            except OSError:
                ours[name] = False
    foreign = [name for name, own in ours.items() if not own]
    if (out / COMPARISON_PLOT).exists() and not ours.get(SUMMARY_CSV, False):
        foreign.append(COMPARISON_PLOT)
    if foreign and not overwrite:
        raise ValueError(f"{out / foreign[0]} was not written by an inr-fit folder run; move it, choose another --out "
                         "or pass --overwrite to replace it")


def printable(text: str) -> str:
    """``text`` as UTF-8 can hold it: the bytes of a file name that were not UTF-8 as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def summary_row(path: Path, name: str, unit: str, status: str, metrics: dict[str, Any], error: str = "") -> dict:
    error = printable(error)
    return {"file": printable(str(path)), "run": name, "status": status, "psnr": metrics.get("psnr"),
            "psnr_float16": metrics.get("psnr_float16"), "ssim": metrics.get("ssim"),
            f"bits_per_{unit}": metrics.get(f"bits_per_{unit}"),
            "seconds": metrics.get("seconds"), "steps": metrics.get("steps"), "error": error}


def finite_numbers(values: list[Any]) -> list[float]:
    """The finite int and float values among ``values``, as floats."""
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def mean_and_std(values: list[Any]) -> tuple[float, float] | None:
    """Mean and sample standard deviation (0 for one value) of the finite numbers among ``values``; None if none."""
    numbers = finite_numbers(values)
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
        text = "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value).replace("|", "\\|")
        return text.replace("\r", "\\r").replace("\n", "\\n")  # a file name with a newline stays in its row

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
    stats = {c: mean_and_std([row[c] for row in rows]) for c in columns[3:-1]}
    counts = {status: sum(row["status"] == status for row in rows)
              for status in ("fitted", "resumed", "skipped", "failed")}
    lines += ["", f"{len(rows)} files: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n), ""]
    lines += [f"- {c}: {s[0]:.4g} ± {s[1]:.2g}" for c, s in stats.items() if s is not None]
    write_text_atomically(out / SUMMARY_MD, "\n".join(lines) + "\n")


def write_config_comparison(out: Path, results: dict[str, list[dict[str, Any]]], unit: str) -> None:
    """Several configs over the same files: summary.csv and summary.md in ``out`` (one row per config: files with
    results, mean ± std of PSNR, PSNR with the float16 weights, SSIM and bits per ``unit``) and rate_distortion.png
    (PSNR with the float16 weights of model.safetensors against that file's bits)."""
    rows = []
    for name, config_rows in results.items():
        done = [row for row in config_rows if row["status"] != "failed"]
        row = {"config": name, "files": len(config_rows), "with_results": len(done)}
        for column in ("psnr", "psnr_float16", "ssim", f"bits_per_{unit}"):
            stats = mean_and_std([r[column] for r in done])
            row[column], row[f"{column}_std"] = stats if stats else (None, None)
        rows.append(row)
    _write_csv(out / SUMMARY_CSV, rows)

    def both(row: dict[str, Any], column: str) -> str:
        return "" if row[column] is None else f"{row[column]:.4g} ± {row[f'{column}_std']:.2g}"

    lines = [f"| config | files (with results) | PSNR (dB) | PSNR, float16 weights (dB) | SSIM | bits per {unit} |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['files']} ({r['with_results']}) | {both(r, 'psnr')} | {both(r, 'psnr_float16')} | "
              f"{both(r, 'ssim')} | {both(r, f'bits_per_{unit}')} |" for r in rows]
    write_text_atomically(out / SUMMARY_MD, "\n".join(lines) + "\n")
    series = {name: [(r[f"bits_per_{unit}"], r["psnr_float16"]) for r in config_rows if r["status"] != "failed"
                     and r[f"bits_per_{unit}"] is not None and r["psnr_float16"] is not None]
              for name, config_rows in results.items()}
    write_rate_distortion(out / COMPARISON_PLOT, series, f"bits per {unit} (model.safetensors, float16)",
                          "PSNR with the float16 weights (dB)")
