"""Audio fitting: time in [0, 1] (sample centres) -> each channel's amplitude in [-1, 1].

A task module (tasks.py): torch, numpy and the signal readers load inside the functions, when a task is built."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import register_task

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ..problem import Problem
    from ..signals import Audio

AUDIO_RANGE = 2.0  # PSNR peak-to-peak range of [-1, 1] amplitudes


def sample_coords(n_samples: int) -> torch.Tensor:
    """[T, 1] sample-centre times (t + 0.5) / T."""
    from ..problem import sample_centres

    return sample_centres(n_samples)[:, None]


@register_task("audio", "audios", (".wav", ".flac", ".ogg"), "sample", "siren-audio",
               tuple(f"reconstruction{level}.{suffix}" for level in ("", "_level*")
                     for suffix in ("wav", "flac", "ogg")))
class AudioTask:
    """Fit one audio file (fitting/signals.py: WAV of any depth, FLAC, OGG...; mono or multichannel). Built from the
    file's header; the samples are read on first use (``audio``), once."""

    n_input_dims = 1

    def __init__(self, path: str | Path, train_split: bool = False) -> None:
        if train_split:
            raise ValueError("--train-split applies to images only")
        from ..signals import read_audio_header

        self.path = Path(path)
        self.header = read_audio_header(self.path)
        self.n_samples, self.n_output_dims = self.header.frames, self.header.channels

    @cached_property
    def audio(self) -> Audio:
        """The samples (SignalError for values it cannot fit)."""
        from ..signals import read_audio

        return read_audio(self.path, self.header)

    @property
    def coordinate_shape(self) -> list[int]:
        return [self.n_samples]

    def describe(self) -> dict[str, Any]:
        return {"kind": "audio", "path": str(self.path), "rate": self.header.rate, "samples": self.n_samples,
                "channels": self.n_output_dims, "format": self.header.sample_format,
                "container": self.header.container.lower()}

    def problem(self) -> Problem:
        import torch

        from ..problem import Problem

        coords, values = sample_coords(self.n_samples), torch.from_numpy(self.audio.samples)
        return Problem(coords, values, coords, values, value_range=AUDIO_RANGE)

    def finish(self, model: Callable[[torch.Tensor], torch.Tensor], out_dir: Path, chunk: int, device: torch.device,
               name: str = "reconstruction", comparison: bool = True) -> dict[str, float]:
        """Write <name>.wav, .flac or .ogg: the input's container, subtype and rate where libsndfile writes them,
        else WAV (``Audio.output_format``); for the main reconstruction also COMPARISON_FILE. Return psnr over all
        samples, and psnr_file of the written file read back (PCM rounding, or a lossy codec's loss)."""
        from ..outputs import COMPARISON_FILE
        from ..pictures import write_audio_comparison
        from ..problem import predict
        from ..signals import read_audio, write_audio

        recon = predict(model, sample_coords(self.n_samples), chunk, device).numpy()
        path = out_dir / f"{name}.{self.header.output_format[2]}"
        write_audio(path, recon, self.header)
        written = read_audio(path).samples[: self.n_samples]  # a codec may pad the last frame
        metrics = {"psnr": self._psnr(recon), "psnr_file": self._psnr(written)}
        if name == "reconstruction" and comparison:
            write_audio_comparison(out_dir / COMPARISON_FILE, self.audio.samples, recon, self.header.rate,
                                   metrics["psnr"])
        return metrics

    def score(self, model: Callable[[torch.Tensor], torch.Tensor], chunk: int, device: torch.device) -> float:
        """The model's PSNR as ``finish`` reports it, without writing anything."""
        from ..problem import predict

        return self._psnr(predict(model, sample_coords(self.n_samples), chunk, device).numpy())

    def _psnr(self, samples: np.ndarray) -> float:
        import numpy as np

        from ...metrics import psnr

        if samples.shape != self.audio.samples.shape:
            return math.nan
        return psnr(float(np.mean((samples - self.audio.samples) ** 2, dtype=np.float64)), AUDIO_RANGE)
