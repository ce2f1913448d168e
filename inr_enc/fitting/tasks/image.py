"""Image fitting: pixel-centre coordinates in [0, 1]^2 -> the image's channels in [0, 1].

A task module (tasks.py): torch, numpy and the signal readers load inside the functions, when a task is built."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import register_task

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ..problem import Problem
    from ..signals import Image


def pixel_coords(height: int, width: int, rows: slice = slice(None), cols: slice = slice(None)) -> torch.Tensor:
    """(x, y) of pixel centres ((j + 0.5) / W, (i + 0.5) / H) for the selected rows and columns: [n, 2], row-major."""
    import torch

    from ..problem import sample_centres

    ys, xs = sample_centres(height, rows), sample_centres(width, cols)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y], dim=-1).reshape(-1, 2)


SAMPLE_IMAGE = Path(__file__).resolve().parents[2] / "data" / "astronaut.png"  # package data: in a wheel too


@register_task("image", "images", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".gif"), "pixel",
               "hashgrid", ("reconstruction.png", "reconstruction_level*.png"), sample=SAMPLE_IMAGE)
class ImageTask:
    """Fit one image. With ``train_split`` (Tancik et al. 2020): train on pixels [::2, ::2], report PSNR on
    [1::2, 1::2]. Built from the file's header; the pixels are decoded on first use (``image``), once, after a run's
    memory estimate has passed."""

    n_input_dims = 2

    def __init__(self, path: str | Path, train_split: bool = False) -> None:
        from ..signals import read_image_header

        self.path, self.train_split = Path(path), train_split
        self.header = read_image_header(self.path)
        self.height, self.width, self.n_output_dims = self.header.height, self.header.width, self.header.channels
        if train_split and min(self.height, self.width) < 2:
            raise ValueError(f"{self.path}: --train-split tests on pixels [1::2, 1::2]; a {self.width}x{self.height} "
                             "image has none")

    @cached_property
    def image(self) -> Image:
        """The decoded image (SignalError for pixels it cannot fit, or that do not match the header)."""
        from ..signals import read_image

        return read_image(self.path, self.header)

    @property
    def coordinate_shape(self) -> list[int]:
        """Samples per coordinate dim, in coordinate order (x = column, y = row): [width, height]."""
        return [self.width, self.height]

    def describe(self) -> dict[str, Any]:
        return {"kind": "image", "path": str(self.path), "train_split": self.train_split,
                "height": self.height, "width": self.width, "channels": self.n_output_dims,
                "bit_depth": 8 * self.header.dtype.itemsize}

    def problem(self) -> Problem:
        import torch

        from ..problem import Problem

        pixels = torch.from_numpy(self.image.pixels)
        train, test = (slice(0, None, 2), slice(1, None, 2)) if self.train_split else (slice(None), slice(None))
        return Problem(
            pixel_coords(self.height, self.width, train, train), pixels[train, train].reshape(-1, self.n_output_dims),
            pixel_coords(self.height, self.width, test, test), pixels[test, test].reshape(-1, self.n_output_dims),
            value_range=1.0,
        )

    def train_grid(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The training pixels as a grid: column centres xs [W'], row centres ys [H'], values [H', W', C]."""
        import torch

        from ..problem import sample_centres

        train = slice(0, None, 2) if self.train_split else slice(None)
        return (sample_centres(self.width, train), sample_centres(self.height, train),
                torch.from_numpy(self.image.pixels[train, train]))

    def reconstruct(self, model: Callable[[torch.Tensor], torch.Tensor], chunk: int,
                    device: torch.device) -> np.ndarray:
        """The model's image [H, W, C], evaluated ROW_BAND rows at a time."""
        import numpy as np

        from ...metrics import ROW_BAND
        from ..problem import predict

        out = np.empty((self.height, self.width, self.n_output_dims), dtype=np.float32)
        for top in range(0, self.height, ROW_BAND):
            rows = slice(top, min(top + ROW_BAND, self.height))
            band = predict(model, pixel_coords(self.height, self.width, rows), chunk, device)
            out[rows] = band.reshape(-1, self.width, self.n_output_dims).numpy()
        return out

    def finish(self, model: Callable[[torch.Tensor], torch.Tensor], out_dir: Path, chunk: int, device: torch.device,
               name: str = "reconstruction", comparison: bool = True) -> dict[str, float]:
        """Write <name>.png (for the main reconstruction also COMPARISON_FILE); return psnr (test pixels with the
        split, else all), psnr_train, psnr_file (the written 8- or 16-bit PNG read back, on psnr's pixels), ssim
        (None, with ssim_note saying why, for an image too small for SSIM's window)."""
        import numpy as np
        import torch

        from ...metrics import psnr, ssim, ssim_unavailable_reason
        from ..outputs import COMPARISON_FILE
        from ..pictures import write_image_comparison
        from ..signals import read_image, write_image

        recon = self.reconstruct(model, chunk, device)
        write_image(out_dir / f"{name}.png", recon, self.header.dtype)
        target = self.image.pixels
        metrics = {"psnr": self._psnr(recon)}
        if self.train_split:
            metrics["psnr_train"] = psnr(float(np.mean((recon[::2, ::2] - target[::2, ::2]) ** 2,
                                                       dtype=np.float64)), 1.0)
        metrics["psnr_file"] = self._psnr(read_image(out_dir / f"{name}.png").pixels)
        if name == "reconstruction" and comparison:
            write_image_comparison(out_dir / COMPARISON_FILE, target, recon, metrics["psnr"])
        metrics["ssim"] = ssim(torch.from_numpy(np.clip(recon, 0, 1)), torch.from_numpy(target))
        if metrics["ssim"] is None:
            metrics["ssim_note"] = ssim_unavailable_reason(self.height, self.width)
        return metrics

    def score(self, model: Callable[[torch.Tensor], torch.Tensor], chunk: int, device: torch.device) -> float:
        """The model's PSNR as ``finish`` reports it, without writing anything."""
        return self._psnr(self.reconstruct(model, chunk, device))

    def _psnr(self, image: np.ndarray) -> float:
        """PSNR of ``image`` [H, W, C] against the target: on the test pixels [1::2, 1::2] with the split, else all."""
        import numpy as np

        from ...metrics import psnr

        test = (slice(1, None, 2),) * 2 if self.train_split else (slice(None),) * 2
        return psnr(float(np.mean((image[test] - self.image.pixels[test]) ** 2, dtype=np.float64)), 1.0)

    @property
    def n_samples(self) -> int:
        return self.height * self.width
