"""The pictures every fit writes, where people look rather than read (matplotlib, Agg; PNGs written atomically):

- curve.png: the training loss at every step, and PSNR at each evaluation against steps and against seconds;
- comparison.png for images: target | reconstruction | error map, the error as per-pixel PSNR
  10 log10(1 / squared error) (channels averaged) with its colour bar in dB;
- comparison.png for audio: waveform and spectrogram of the first channel, target above reconstruction;
- rate_distortion.png for a folder fitted with several configs: mean PSNR against mean bits per pixel (sample).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..io import atomic_path

ERROR_MAP_DB = (0.0, 60.0)  # per-pixel PSNR shown in the error map (60 dB: below 8-bit rounding)
MAX_PLOTTED_SAMPLES = 200_000  # a waveform longer than this is drawn from every k-th sample
MAX_SHOWN_PIXELS = 1024  # an image larger than this on a side is drawn from every k-th pixel


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    _pyplot().close(fig)


def write_curve(path: Path, losses: list[float], history: list[dict[str, float]], title: str) -> None:
    """curve.png: ``losses`` (one per step, from step 1) on a log scale; ``history``'s PSNR against its steps and
    its training seconds."""
    plt = _pyplot()
    fig, (by_loss, by_step, by_time) = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
    if losses:
        by_loss.plot(np.arange(1, len(losses) + 1), losses, linewidth=0.8)
        by_loss.set_yscale("log" if min(losses) > 0 else "linear")
    by_loss.set(xlabel="step", ylabel="training loss")
    steps, seconds, values = ([h[key] for h in history] for key in ("step", "seconds", "psnr"))
    for axis, xs, label in ((by_step, steps, "step"), (by_time, seconds, "training time (s)")):
        axis.plot(xs, values, marker="." if len(xs) < 50 else None)
        axis.set(xlabel=label, ylabel="PSNR (dB)")
    for axis in (by_loss, by_step, by_time):
        axis.grid(alpha=0.3)
    fig.suptitle(title)
    _save(fig, path)


def error_map_db(target: np.ndarray, reconstruction: np.ndarray) -> np.ndarray:
    """[H, W, C] images in [0, 1] -> [H, W] per-pixel PSNR in dB (channels averaged), clipped to ERROR_MAP_DB."""
    squared = np.mean((reconstruction.astype(np.float64) - target) ** 2, axis=-1)
    return np.clip(10 * np.log10(1 / np.maximum(squared, 1e-12)), *ERROR_MAP_DB)


def _shown(image: np.ndarray) -> np.ndarray:
    """An [H, W, C] image in [0, 1] as imshow takes it: grey -> [H, W]; grey + alpha -> grey."""
    image = np.clip(image, 0, 1)
    return image[..., 0] if image.shape[-1] in (1, 2) else image


def write_image_comparison(path: Path, target: np.ndarray, reconstruction: np.ndarray, psnr: float) -> None:
    """comparison.png: target | reconstruction | per-pixel PSNR map with a colour bar; images [H, W, C] in [0, 1],
    shown at every k-th pixel where they exceed MAX_SHOWN_PIXELS on a side (the panels are smaller still)."""
    plt = _pyplot()
    height, width = target.shape[:2]
    stride = -(-max(height, width) // MAX_SHOWN_PIXELS)
    target, reconstruction = target[::stride, ::stride], reconstruction[::stride, ::stride]
    panel = 4.0 * min(1.0, max(width / height, 0.25))
    fig, axes = plt.subplots(1, 3, figsize=(3 * panel + 1.5, 4.4), constrained_layout=True)
    grey = {"cmap": "gray", "vmin": 0, "vmax": 1} if target.shape[-1] in (1, 2) else {}
    axes[0].imshow(_shown(target), **grey)
    axes[1].imshow(_shown(reconstruction), **grey)
    shown = axes[2].imshow(error_map_db(target, reconstruction), cmap="inferno", vmin=ERROR_MAP_DB[0],
                           vmax=ERROR_MAP_DB[1])
    fig.colorbar(shown, ax=axes[2], label="per-pixel PSNR (dB)", shrink=0.8)
    for axis, title in zip(axes, ("target", f"reconstruction ({psnr:.2f} dB)", "error")):
        axis.set_title(title)
        axis.set_axis_off()
    _save(fig, path)


def write_audio_comparison(path: Path, target: np.ndarray, reconstruction: np.ndarray, rate: int,
                           psnr: float) -> None:
    """comparison.png: waveform and spectrogram of channel 0, target above reconstruction; audio [T, C]."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(13, 6), constrained_layout=True, sharex="col")
    stride = max(1, len(target) // MAX_PLOTTED_SAMPLES)
    time = np.arange(0, len(target), stride) / rate
    for row, (signal, name) in enumerate(((target, "target"), (reconstruction, f"reconstruction ({psnr:.2f} dB)"))):
        axes[row, 0].plot(time, signal[::stride, 0], linewidth=0.5)
        axes[row, 0].set(ylim=(-1.05, 1.05), ylabel="amplitude", title=name)
        if len(signal) >= 256:  # a spectrogram needs at least one window
            axes[row, 1].specgram(signal[:, 0], NFFT=256, Fs=rate, noverlap=128, cmap="magma")
        axes[row, 1].set(ylabel="frequency (Hz)", title=f"{name}: spectrogram")
    for axis in axes[1]:
        axis.set_xlabel("time (s)")
    _save(fig, path)


def write_rate_distortion(path: Path, series: dict[str, list[tuple[float, float]]], rate_label: str,
                          psnr_label: str = "PSNR (dB)") -> None:
    """rate_distortion.png: per config (name -> its files' (bits, PSNR) pairs, finite ones) a faint point per file
    and a labelled marker at the means; bits on a log scale."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(7, 5), constrained_layout=True)
    all_bits = []
    for name, pairs in series.items():
        pairs = [(b, p) for b, p in pairs if np.isfinite(b) and np.isfinite(p)]
        if not pairs:
            continue
        bits, psnrs = np.array(pairs).T
        dots = axis.scatter(bits, psnrs, s=12, alpha=0.35)
        mean = (float(bits.mean()), float(psnrs.mean()))
        axis.scatter(*mean, s=80, color=dots.get_facecolor()[0][:3], edgecolors="black", zorder=3)
        axis.annotate(name, mean, textcoords="offset points", xytext=(6, 6))
        all_bits += list(bits)
    if all_bits and min(all_bits) > 0:
        axis.set_xscale("log")
    axis.set(xlabel=rate_label, ylabel=psnr_label, title="rate and distortion: files (dots) and their mean (marker)")
    axis.grid(alpha=0.3)
    _save(fig, path)
