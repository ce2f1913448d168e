"""Image fitting: pixel-centre coordinates in [0, 1]^2 -> the image's channels in [0, 1]."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kornia
import numpy as np
import torch

from .fitting import Problem, predict, psnr, sample_centres
from .signals import read_image, write_image

SSIM_WINDOW = 11
ROW_BAND = 256  # rows reconstructed (and SSIM-compared) at a time, to bound memory on large images


def pixel_coords(height: int, width: int, rows: slice = slice(None), cols: slice = slice(None)) -> torch.Tensor:
    """(x, y) of pixel centres ((j + 0.5) / W, (i + 0.5) / H) for the selected rows and columns: [n, 2], row-major."""
    ys, xs = sample_centres(height, rows), sample_centres(width, cols)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y], dim=-1).reshape(-1, 2)


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM (kornia, 11x11 Gaussian window, data range 1) over the valid region of two [H, W, C] images,
    computed in row bands; images smaller than the window are compared with zero padding."""
    height = a.shape[0]
    if min(a.shape[:2]) < SSIM_WINDOW:
        tensors = [torch.from_numpy(np.ascontiguousarray(v)).permute(2, 0, 1)[None] for v in (a, b)]
        return kornia.metrics.ssim(*tensors, SSIM_WINDOW, max_val=1.0).mean().item()
    total, count = 0.0, 0
    for top in range(0, height - SSIM_WINDOW + 1, ROW_BAND):
        rows = slice(top, min(top + ROW_BAND + SSIM_WINDOW - 1, height))
        tensors = [torch.from_numpy(np.ascontiguousarray(v[rows])).permute(2, 0, 1)[None] for v in (a, b)]
        ssim_map = kornia.metrics.ssim(*tensors, SSIM_WINDOW, max_val=1.0, padding="valid")
        total += ssim_map.double().sum().item()
        count += ssim_map.numel()
    return total / count


class ImageTask:
    """Fit one image. With ``train_split`` (Tancik et al. 2020): train on pixels [::2, ::2], report PSNR on [1::2, 1::2]."""

    unit = "pixel"
    n_input_dims = 2

    def __init__(self, path: str | Path, train_split: bool = False) -> None:
        self.path, self.train_split = Path(path), train_split
        self.image = read_image(self.path)
        self.height, self.width, self.n_output_dims = self.image.pixels.shape

    @property
    def coordinate_shape(self) -> list[int]:
        """Samples per coordinate dim, in coordinate order (x = column, y = row): [width, height]."""
        return [self.width, self.height]

    def describe(self) -> dict[str, Any]:
        return {"kind": "image", "path": str(self.path), "train_split": self.train_split,
                "height": self.height, "width": self.width, "channels": self.n_output_dims}

    def problem(self) -> Problem:
        pixels = torch.from_numpy(self.image.pixels)
        train, test = (slice(0, None, 2), slice(1, None, 2)) if self.train_split else (slice(None), slice(None))
        return Problem(
            pixel_coords(self.height, self.width, train, train), pixels[train, train].reshape(-1, self.n_output_dims),
            pixel_coords(self.height, self.width, test, test), pixels[test, test].reshape(-1, self.n_output_dims),
            value_range=1.0,
        )

    def train_grid(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The training pixels as a grid: column centres xs [W'], row centres ys [H'], values [H', W', C]."""
        train = slice(0, None, 2) if self.train_split else slice(None)
        return sample_centres(self.width, train), sample_centres(self.height, train), torch.from_numpy(self.image.pixels[train, train])

    def reconstruct(self, model: Callable[[torch.Tensor], torch.Tensor], chunk: int, device: torch.device) -> np.ndarray:
        """The model's image [H, W, C], evaluated ROW_BAND rows at a time."""
        out = np.empty((self.height, self.width, self.n_output_dims), dtype=np.float32)
        for top in range(0, self.height, ROW_BAND):
            rows = slice(top, min(top + ROW_BAND, self.height))
            band = predict(model, pixel_coords(self.height, self.width, rows), chunk, device)
            out[rows] = band.reshape(-1, self.width, self.n_output_dims).numpy()
        return out

    def finish(self, model: Callable[[torch.Tensor], torch.Tensor], out_dir: Path, chunk: int, device: torch.device,
               name: str = "reconstruction") -> dict[str, float]:
        """Write <name>.png; return psnr (test pixels with the split, else all), psnr_train, ssim."""
        recon = self.reconstruct(model, chunk, device)
        write_image(out_dir / f"{name}.png", recon, self.image.dtype)
        target = self.image.pixels
        if self.train_split:
            test_mse = float(np.mean((recon[1::2, 1::2] - target[1::2, 1::2]) ** 2, dtype=np.float64))
            train_mse = float(np.mean((recon[::2, ::2] - target[::2, ::2]) ** 2, dtype=np.float64))
            metrics = {"psnr": psnr(test_mse, 1.0), "psnr_train": psnr(train_mse, 1.0)}
        else:
            metrics = {"psnr": psnr(float(np.mean((recon - target) ** 2, dtype=np.float64)), 1.0)}
        metrics["ssim"] = ssim(np.clip(recon, 0, 1), target)
        return metrics

    @property
    def n_samples(self) -> int:
        return self.height * self.width
