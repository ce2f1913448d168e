"""inr_enc.metrics: PSNR by its formula, and SSIM in row bands equal to torchmetrics' whole-image SSIM (the number
nerfstudio reports), checked against skimage's reference implementation of Wang et al. 2004 as well."""

import math

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity
from torchmetrics.functional.image import structural_similarity_index_measure

from inr_enc import metrics


def pair(shape, seed):
    generator = torch.Generator().manual_seed(seed)
    a = torch.rand(shape, generator=generator)
    return a, (a + 0.1 * torch.randn(shape, generator=generator)).clamp(0, 1)


def test_psnr_is_its_formula():
    assert metrics.psnr(0.01, 1.0) == pytest.approx(20.0)
    assert metrics.psnr(0.25, 2.0) == pytest.approx(10 * math.log10(16))
    assert metrics.psnr(0.0, 1.0) == math.inf


@pytest.mark.parametrize("shape, band", [((40, 50, 3), 256), ((263, 20, 3), 256), ((40, 50, 1), 7), ((23, 30, 3), 5),
                                         ((6, 7, 3), 256)])
def test_banded_ssim_equals_torchmetrics_on_the_whole_image(shape, band, monkeypatch):
    monkeypatch.setattr(metrics, "ROW_BAND", band)  # bands of 5 and 7 rows: every seam and the thin last band
    a, b = pair(shape, seed=sum(shape))
    whole = structural_similarity_index_measure(a.permute(2, 0, 1)[None], b.permute(2, 0, 1)[None], data_range=1.0)
    assert metrics.ssim(a, b) == pytest.approx(float(whole), abs=1e-6)


def test_ssim_agrees_with_skimage_away_from_the_border():
    # skimage with its Gaussian window (sigma 1.5, no sample covariance correction) on the valid region only: the
    # same per-pixel formula; the two means differ only by the reflect-padded border, a few % of the pixels here
    a, b = pair((200, 180, 3), seed=3)
    _, full = structural_similarity(a.numpy(), b.numpy(), channel_axis=2, data_range=1.0, gaussian_weights=True,
                                    sigma=1.5, use_sample_covariance=False, full=True)
    ours = metrics.ssim(a, b)
    assert ours == pytest.approx(float(np.mean(full)), abs=1e-4)


def test_ssim_is_none_where_reflect_padding_cannot_pad():
    a, b = pair((5, 9, 3), seed=1)
    assert metrics.ssim(a, b) is None
