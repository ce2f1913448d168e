"""What ns-eval reports for one rendered view: PSNR and SSIM (inr_enc.metrics, as nerfstudio computes them), LPIPS
only when its AlexNet weights are already on disk (nothing is downloaded), and the images nerfstudio shows."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

import torch
from nerfstudio.utils import colormaps
from torch import nn

from ..metrics import psnr, ssim


def image_metrics_and_images(outputs: Dict[str, torch.Tensor], image: torch.Tensor, lpips: Optional[nn.Module]
                             ) -> Tuple[Dict[str, float], Dict[str, torch.Tensor]]:
    """outputs: one rendered view (rgb [H, W, 3], accumulation and depth [H, W, 1]); image: its ground truth
    [H, W, 3] in [0, 1] -> metrics {psnr, ssim[, lpips]} and images {img (truth | render), accumulation, depth}."""
    rgb = outputs["rgb"].clamp(0, 1)
    metrics = {"psnr": psnr(float(torch.mean((rgb - image) ** 2)), 1.0), "ssim": ssim(rgb, image)}
    if lpips is not None:
        pair = (rgb.movedim(-1, 0)[None], image.movedim(-1, 0)[None])  # [1, 3, H, W]
        metrics["lpips"] = float(lpips.to(rgb.device)(*pair))
    images = {
        "img": torch.cat([image, rgb], dim=1),
        "accumulation": colormaps.apply_colormap(outputs["accumulation"]),
        "depth": colormaps.apply_depth_colormap(outputs["depth"], accumulation=outputs["accumulation"]),
    }
    return metrics, images


def over_background(image: torch.Tensor, background: torch.Tensor) -> torch.Tensor:
    """Ground truth [..., 3 | 4] -> [..., 3]: RGBA composited over ``background`` [3], RGB as it is."""
    if image.shape[-1] == 4:
        return image[..., :3] * image[..., 3:] + background * (1 - image[..., 3:])
    return image[..., :3]


def lpips_if_weights_on_disk() -> Optional[nn.Module]:
    """torchmetrics' LPIPS (AlexNet) when torchvision's AlexNet weights are already in torch's hub cache, else
    None: building it would download them."""
    try:
        from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity
        from torchvision.models import AlexNet_Weights
    except ImportError:
        return None
    weights = Path(torch.hub.get_dir()) / "checkpoints" / Path(AlexNet_Weights.IMAGENET1K_V1.url).name
    return LearnedPerceptualImagePatchSimilarity(net_type="alex", normalize=True) if weights.is_file() else None
