"""Images per second of `inr-fit images` one file at a time against `--together N` (one batched computation),
measured in one process and one run, for a SIREN and a hash-grid config on 32x32 crops of scikit-image's photos.

    python scripts/bench_batched.py [--images 64] [--alone 8] [--steps 500] [--out docs/benchmarks.md]

Both paths run the whole `inr-fit images` command (reading, fitting, every output but the pictures:
--pictures none) in this process after a warm-up, so imports and kernel builds are not counted. One at a time
is timed on the first ``--alone`` crops (its rate does not depend on how many there are), batched on all
``--images`` in one group. The mean PSNR of the crops both fitted, and the largest difference of one crop's, are
printed beside, as the check that both fit the same models.
"""

from __future__ import annotations

import argparse
import csv
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import skimage
import torch

from inr_enc.cli import main as inr_fit
from inr_enc.io import write_text_atomically

PHOTOS = ("astronaut.png", "camera.png", "chelsea.png", "coffee.png", "coins.png", "rocket.jpg")
CONFIGS = {  # label -> (config, --set overrides)
    "SIREN (siren as it is, 3 hidden layers of 256)": ("siren", ["network.n_neurons=256"]),
    "SIREN (siren, 3 hidden layers of 64)": ("siren", ["network.n_neurons=64"]),
    "hash grid (hashgrid, 2^12 entries per level)": ("hashgrid", ["encoding.log2_hashmap_size=12"]),
}


def write_crops(folder: Path, count: int, size: int = 32, seed: int = 0) -> None:
    """``count`` crops of ``size`` x ``size`` pixels at random places in PHOTOS (RGB; gray ones as RGB)."""
    rng = np.random.default_rng(seed)
    photos = [iio.imread(Path(skimage.__file__).parent / "data" / name) for name in PHOTOS]
    photos = [p if p.ndim == 3 else np.repeat(p[..., None], 3, axis=2) for p in photos]
    for k in range(count):
        photo = photos[k % len(photos)]
        y, x = rng.integers(0, photo.shape[0] - size), rng.integers(0, photo.shape[1] - size)
        iio.imwrite(folder / f"crop{k:03d}.png", photo[y:y + size, x:x + size, :3])


def timed_fit(folder: Path, files: str, config: str, overrides: list[str], steps: int,
              together: int) -> tuple[float, dict]:
    """Seconds of one `inr-fit images` command and its summary rows by run name."""
    out = Path(tempfile.mkdtemp(dir=folder))
    args = ["images", files, "--config", config, "--set", *overrides, "--steps", str(steps), "--pictures", "none",
            "--quiet", "--out", str(out), "--together", str(together)]
    start = time.perf_counter()
    if inr_fit(args) != 0:
        raise SystemExit(f"inr-fit {' '.join(args)} failed")
    seconds = time.perf_counter() - start
    with open(out / "summary.csv", newline="") as file:
        return seconds, {row["run"]: row for row in csv.DictReader(file)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--alone", type=int, default=8, help="crops fitted one at a time (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--out", type=Path, help="append the table to this markdown file")
    args = parser.parse_args()
    lines = [f"Batched fitting, {args.images} crops of 32x32, {args.steps} steps, "
             f"{platform.processor() or platform.machine()}, "
             f"{torch.get_num_threads()} threads, torch {torch.__version__} "
             f"(`python scripts/bench_batched.py --images {args.images} --alone {args.alone} --steps {args.steps}`):",
             "",
             "| config | one at a time (images/s) | --together (images/s) | ratio | mean PSNR alone / together (dB) "
             "| largest PSNR difference of a crop (dB) |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        crops = folder / "crops"
        crops.mkdir()
        write_crops(crops, args.images)
        alone = folder / "alone"  # the first --alone crops
        alone.mkdir()
        for k in range(args.alone):
            shutil.copyfile(crops / f"crop{k:03d}.png", alone / f"crop{k:03d}.png")
        for label, (config, overrides) in CONFIGS.items():
            for together in (1, 2):  # warm-up of both paths: kernel builds, first calls
                timed_fit(folder, str(alone / "crop00[01].png"), config, overrides, 5, together)
            alone_s, alone_rows = timed_fit(folder, str(alone), config, overrides, args.steps, 1)
            batched_s, batched_rows = timed_fit(folder, str(crops), config, overrides, args.steps, args.images)
            both = list(alone_rows)
            psnr_alone = statistics.fmean(float(alone_rows[name]["psnr"]) for name in both)
            psnr_batched = statistics.fmean(float(batched_rows[name]["psnr"]) for name in both)
            gap = max(abs(float(alone_rows[name]["psnr"]) - float(batched_rows[name]["psnr"])) for name in both)
            rate_alone, rate_batched = len(alone_rows) / alone_s, len(batched_rows) / batched_s
            lines.append(f"| {label} | {rate_alone:.2f} | {rate_batched:.2f} | {rate_batched / rate_alone:.1f}x | "
                         f"{psnr_alone:.2f} / {psnr_batched:.2f} | {gap:.1e} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_text_atomically(args.out, args.out.read_text() + "\n" + text)


if __name__ == "__main__":
    main()
