"""``inr-encode``: encode a bundled image's pixel coordinates with each named config and print a summary.

    inr-encode [--image data/astronaut.png] [--config hashgrid nerf-pe ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import torch

from . import available_configs, build_encoder, load_config, tcnn_available

DEFAULT_IMAGE = Path(__file__).resolve().parent.parent / "data" / "astronaut.png"


def pixel_centres(height: int, width: int) -> torch.Tensor:
    """[H * W, 2] coordinates (x, y) of pixel centres in [0, 1]^2, row-major."""
    ys = (torch.arange(height) + 0.5) / height
    xs = (torch.arange(width) + 0.5) / width
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y], dim=-1).reshape(-1, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inr-encode", description="Encode an image's pixel coordinates with inr_enc encoders.")
    parser.add_argument("--image", type=Path, default=DEFAULT_IMAGE)
    parser.add_argument("--config", nargs="+", help="config names or files (default: every bundled 2D config)")
    args = parser.parse_args(argv)
    try:
        image = iio.imread(args.image)
        names = args.config or [n for n in available_configs() if load_config(n).get("n_input_dims", 2) == 2]
        configs = [(name, load_config(name)) for name in names]
        encoders = [(name, build_encoder(cfg["encoding"], cfg.get("n_input_dims", 2))) for name, cfg in configs]
    except (OSError, ValueError, KeyError) as error:
        print(f"inr-encode: {error}", file=sys.stderr)
        return 2
    height, width = image.shape[:2]
    coords = pixel_centres(height, width)
    print(f"{args.image.name}: {width}x{height}, {coords.shape[0]} coordinates; tiny-cuda-nn available: {tcnn_available()}")
    print(f"{'config':20s} {'otype':18s} {'outputs':>7s} {'params':>10s} {'mean':>9s} {'std':>9s} {'M samples/s':>12s}")
    for name, encoder in encoders:
        with torch.no_grad():
            start = time.perf_counter()
            features = encoder(coords)
            seconds = time.perf_counter() - start
        n_params = sum(p.numel() for p in encoder.parameters())
        print(f"{name:20s} {encoder.otype:18s} {encoder.n_output_dims:7d} {n_params:10d} "
              f"{features.mean().item():9.4f} {features.std().item():9.4f} {coords.shape[0] / seconds / 1e6:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
