"""What every fit writes next to its reconstruction: metrics.json and curve.png (atomically; config.yaml and
the checkpoint: run_folder.py and loop.py).

``OUTPUT_FILES`` names (as glob patterns) everything a run writes, so --overwrite knows what to replace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..io import atomic_path, write_text_atomically
from .loop import FitState
from .run_folder import CHECKPOINT, CONFIG

OUTPUT_FILES = (CONFIG, CHECKPOINT, "metrics.json", "curve.png",
                *(f"reconstruction{level}.{suffix}" for level in ("", "_level*") for suffix in ("png", "wav", "flac", "ogg")))


def model_size_metrics(n_params: int, n_samples: int, unit: str) -> dict[str, float]:
    """Model size in bytes and in bits per ``unit`` (pixel or sample) for float32 and float16 weights."""
    return {
        "n_params": n_params,
        "model_bytes_float32": 4 * n_params, "model_bytes_float16": 2 * n_params,
        f"bits_per_{unit}_float32": 32 * n_params / n_samples, f"bits_per_{unit}_float16": 16 * n_params / n_samples,
    }


def write_metrics(out_dir: Path, metrics: dict[str, Any]) -> None:
    """metrics.json as strict JSON: a non-finite number (PSNR inf for an exact reconstruction) is written as null,
    and ``"non_finite"`` names its value."""
    non_finite = {key: str(value) for key, value in metrics.items() if isinstance(value, float) and not math.isfinite(value)}
    strict = {key: None if key in non_finite else value for key, value in metrics.items()}
    if non_finite:
        strict["non_finite"] = non_finite
    write_text_atomically(out_dir / "metrics.json", json.dumps(strict, indent=2, allow_nan=False) + "\n")


def write_curve(out_dir: Path, state: FitState, title: str) -> None:
    """curve.png: evaluation PSNR against step and against training seconds."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    steps = [h["step"] for h in state.history]
    seconds = [h["seconds"] for h in state.history]
    values = [h["psnr"] for h in state.history]
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for axis, xs, label in ((by_step, steps, "step"), (by_time, seconds, "training time (s)")):
        axis.plot(xs, values, marker="." if len(xs) < 50 else None)
        axis.set_xlabel(label)
        axis.set_ylabel("PSNR (dB)")
        axis.grid(alpha=0.3)
    fig.suptitle(title)
    with atomic_path(out_dir / "curve.png") as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
