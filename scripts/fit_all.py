"""Fit every image config on scikit-image's camera and astronaut (and audio configs on a WAV); tabulate the results.

    python scripts/fit_all.py [--size 512] [--step-scale 1.0] [--configs relu nerf-pe ...] [--images camera astronaut]
    python scripts/fit_all.py --images --audio data/speech.wav [--audio-configs siren-audio ...]

Each config runs through ``inr-fit image`` with its own settings; the configs in TRAIN_SPLIT use --train-split
(train on [::2, ::2], PSNR on [1::2, 1::2]), the others are scored on all pixels. ``--step-scale`` multiplies every
config's steps (1.0 = the papers' protocols);
``--size`` resizes the images (512 = the papers'). The report states both. Needs scikit-image.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from inr_enc import load_config
from inr_enc.cli import main as inr_fit
from inr_enc.field.schema import resolve_training
from inr_enc.fitting.signals import write_image
from inr_enc.io import write_text_atomically

# Configs whose papers train on pixels [::2, ::2] and test on [1::2, 1::2] (Tancik et al.; Zheng et al.)
TRAIN_SPLIT = ("relu", "nerf-pe", "tancik-gaussian", "learnable-fourier", "shifted-basis", "shifted-closed-form")
IMAGE_CONFIGS = ("relu", "nerf-pe", "tancik-gaussian", "learnable-fourier", "siren", "spder", "hashgrid", "densegrid")
AUDIO_CONFIGS = ("siren-audio", "spder-audio")


def test_images(names: list[str], size: int, folder: Path) -> list[Path]:
    """scikit-image's bundled images (camera: grey, astronaut: RGB), resized to size x size, as PNG."""
    from skimage import data
    from skimage.transform import resize

    paths = []
    for name in names:
        image = getattr(data, name)()
        if image.shape[0] != size:
            image = resize(image, (size, size), anti_aliasing=True, preserve_range=True)
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        path = folder / f"{name}.png"
        write_image(path, pixels[:, :, None] if pixels.ndim == 2 else pixels, np.dtype(np.uint8))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--step-scale", type=float, default=1.0)
    parser.add_argument("--configs", nargs="+", default=list(IMAGE_CONFIGS))
    parser.add_argument("--images", nargs="*", default=["camera", "astronaut"])
    parser.add_argument("--audio", type=Path, help="a WAV file to fit with --audio-configs")
    parser.add_argument("--audio-configs", nargs="+", default=list(AUDIO_CONFIGS))
    parser.add_argument("--out", type=Path, default=Path("out/results"))
    parser.add_argument("--report", type=Path,
                        help="the markdown table (default OUT/report.md); docs/results.md quotes these")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    args.report = args.report or args.out / "report.md"
    rows: list = []
    runs = [("image", image, name) for image in test_images(args.images, args.size, args.out) for name in args.configs]
    runs += [("audio", args.audio, name) for name in args.audio_configs] if args.audio else []
    for task, signal, name in runs:
        steps = max(1, round(resolve_training(load_config(name).get("training"))["steps"] * args.step_scale))
        run_dir = args.out / f"{signal.stem}-{Path(name).stem}"  # a config name or a config file
        flags = ["--train-split"] if name in TRAIN_SPLIT else []
        start = time.perf_counter()
        code = inr_fit([task, str(signal), "--config", name, "--steps", str(steps), "--out", str(run_dir),
                        "--overwrite", "--quiet", *flags])
        wall = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"inr-fit failed on {signal.stem} with {name} (exit {code})")
        metrics = json.loads((run_dir / "metrics.json").read_text())
        rows.append((task, signal.stem, name, "test (split)" if flags else "all samples", metrics, wall))
        print(f"{signal.stem:10s} {name:18s} psnr {metrics['psnr']:6.2f} steps {metrics['steps']} "
              f"train {metrics['seconds']:.0f}s wall {wall:.0f}s", flush=True)
        write_report(args, rows)


def write_report(args: argparse.Namespace, rows: list) -> None:
    lines = [
        "# Image fitting results", "",
        f"Command: `python scripts/fit_all.py --size {args.size} --step-scale {args.step_scale} "
        f"--configs {' '.join(args.configs)} --images {' '.join(args.images)}"
        f"{f' --audio {args.audio} --audio-configs ' + ' '.join(args.audio_configs) if args.audio else ''}`  ",
        f"Images: scikit-image {', '.join(args.images) or '(none)'} at {args.size}x{args.size}; steps = each config's "
        f"steps x {args.step_scale}. Machine: 2 CPU cores, {time.strftime('%Y-%m-%d')}. Reconstructions: "
        f"`{args.out}/<signal>-<config>/` (not committed).", "",
        "| signal | config | PSNR (dB) | scored on | SSIM | final train loss | steps | train s | wall s | params |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, signal, name, scored, m, wall in rows:
        ssim = f"{m['ssim']:.4f}" if "ssim" in m else "-"
        lines.append(f"| {signal} | {name} | {m['psnr']:.2f} | {scored} | {ssim} | {m['loss']:.3g} | {m['steps']} | "
                     f"{m['seconds']:.0f} | {wall:.0f} | {m['n_params']} |")
        levels = [f"level {k}: {m[f'psnr_level{k}']:.2f}" for k in range(64) if f"psnr_level{k}" in m]
        if levels:
            lines.append(f"| | (levels of detail) | {', '.join(levels)} | | | | | | | |")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.report, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
