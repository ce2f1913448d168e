"""Image and signal quality, shared by inr-fit and the nerfstudio plugin so both report the same numbers.

SSIM is torchmetrics' (the one nerfstudio's models report): an 11x11 Gaussian window (sigma 1.5), K1 0.01, K2 0.03,
data range 1, the image reflect-padded by 5 px so every pixel has a window, averaged over all pixels.
"""

from __future__ import annotations

import math

import torch
from torchmetrics.functional.image import structural_similarity_index_measure

SSIM_PAD = 5  # half of torchmetrics' 11-px Gaussian window for sigma 1.5
ROW_BAND = 256  # rows compared (and reconstructed, fitting/tasks/image.py) at a time, to bound memory on large images


def psnr(mse: float, value_range: float) -> float:
    """10 log10(value_range^2 / mse); inf for mse 0, NaN for a NaN or infinite error (never inf for a bad fit)."""
    if not math.isfinite(mse):
        return math.nan
    return 10 * math.log10(value_range**2 / mse) if mse > 0 else math.inf


def ssim_unavailable_reason(height: int, width: int) -> str | None:
    """Why SSIM is not defined for an image of this size (reflect padding needs more than SSIM_PAD px), or None."""
    if min(height, width) > SSIM_PAD:
        return None
    return (f"SSIM needs more than {SSIM_PAD} px on each side (its 11-px window is reflect-padded by {SSIM_PAD} px); "
            f"this image is {width}x{height}")


def ssim(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """Mean SSIM of two [H, W, C] images with values in [0, 1], computed ROW_BAND rows at a time (each band read
    with SSIM_PAD rows of the image around it, so the bands' maps are the whole image's); equal to torchmetrics'
    ``structural_similarity_index_measure(..., data_range=1.0)`` on the whole image. None for images of
    SSIM_PAD px or fewer on a side, which reflect padding cannot pad."""
    height, width = a.shape[:2]
    if ssim_unavailable_reason(height, width) is not None:
        return None
    total = 0.0
    for top in range(0, height, ROW_BAND):
        bottom = min(top + ROW_BAND, height)
        start, stop = max(top - SSIM_PAD, 0), min(bottom + SSIM_PAD, height)
        if stop - start <= SSIM_PAD:  # a last band too thin to pad: widen it upwards (its rows are still exact)
            start = max(stop - SSIM_PAD - 1, 0)
        pair = [image[start:stop].permute(2, 0, 1)[None].float() for image in (a, b)]
        full = structural_similarity_index_measure(*pair, data_range=1.0, return_full_image=True)[1]
        total += full[..., top - start:bottom - start, :].double().sum().item()
    return total / (height * width * a.shape[2])
