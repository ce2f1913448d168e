"""What every fit writes next to its reconstruction: metrics.json, curve.png and model.safetensors (the float16
weights whose size is the reported rate), atomically (config.yaml and the checkpoint: run_folder.py and loop.py).

One name for each file a run writes (``CURVE_FILE``, ``COMPARISON_FILE`` by the task, ...); ``OUTPUT_FILES`` names
(as glob patterns) everything a run writes, the tasks' reconstructions included, so --overwrite knows what to
replace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..io import atomic_path, write_text_atomically
from .run_folder import CHECKPOINT, CONFIG
from .tasks import tasks
from .tensorboard import FOLDER as TENSORBOARD

MODEL_FILE, METRICS_FILE = "model.safetensors", "metrics.json"
CURVE_FILE, COMPARISON_FILE = "curve.png", "comparison.png"  # fitting/pictures.py draws them
OUTPUT_FILES = (CONFIG, CHECKPOINT, METRICS_FILE, CURVE_FILE, COMPARISON_FILE, MODEL_FILE, TENSORBOARD,
                *(pattern for task in tasks().values() for pattern in task.outputs))


def rebuilt_buffers(model: torch.nn.Module) -> set[str]:
    """State-dict names of the buffers encoders rebuild from their config (``Encoder.config_buffers``: level
    layouts, seeded random features), which a model file need not hold."""
    return {f"{prefix}.{name}" if prefix else name for prefix, module in model.named_modules()
            for name in getattr(module, "config_buffers", {})}


def write_model_file(out_dir: Path, model: torch.nn.Module) -> int:
    """model.safetensors, atomically: the state dict with floating-point tensors in float16 (other dtypes as they
    are), without the buffers the config rebuilds -> the file's size in bytes (the rate inr-fit reports)."""
    skip = rebuilt_buffers(model)
    tensors = {name: (t.half() if t.is_floating_point() else t).detach().cpu().contiguous()
               for name, t in model.state_dict().items() if name not in skip}
    with atomic_path(out_dir / MODEL_FILE) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "inr_enc float16 state dict; config: config.yaml"})
    return (out_dir / MODEL_FILE).stat().st_size


def read_model_file(path: Path, model: torch.nn.Module) -> None:
    """Load model.safetensors into ``model`` (tensors cast to the model's dtypes); ValueError (one line) when it
    is not a model file of this model."""
    try:
        tensors = load_file(str(path))
    except Exception as error:  # safetensors raises its own types for a damaged file
        raise ValueError(f"{path}: not a readable model file ({type(error).__name__}: {error})") from None
    own = model.state_dict()
    expected = set(own) - rebuilt_buffers(model)
    if set(tensors) != expected or any(tensors[k].shape != own[k].shape for k in expected):
        raise ValueError(f"{path}: its tensors do not match this model's "
                         f"({len(tensors)} saved, {len(expected)} expected)")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in tensors.items()}, strict=False)


def size_metrics(n_params: int, file_bytes: int, n_samples: int, unit: str) -> dict[str, float]:
    """Parameters, the model file's bytes and its bits per ``unit`` (pixel or sample)."""
    return {"n_params": n_params, "model_file_bytes": file_bytes, f"bits_per_{unit}": 8 * file_bytes / n_samples}


def write_metrics(out_dir: Path, metrics: dict[str, Any]) -> None:
    """metrics.json as strict JSON: a non-finite number (PSNR inf for an exact reconstruction) is written as null,
    and ``"non_finite"`` names its value."""
    non_finite = {key: str(value) for key, value in metrics.items()
                  if isinstance(value, float) and not math.isfinite(value)}
    strict = {key: None if key in non_finite else value for key, value in metrics.items()}
    if non_finite:
        strict["non_finite"] = non_finite
    write_text_atomically(out_dir / METRICS_FILE, json.dumps(strict, indent=2, allow_nan=False) + "\n")
