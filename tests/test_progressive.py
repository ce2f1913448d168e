"""Progressive (coarse-to-fine) encoding: windows, schedule, band layout of each banded encoder."""

import math

import pytest
import torch

from inr_enc import build_encoder
from inr_enc.ops.schedules import band_weights, schedule_alpha


def barf_weight(alpha_barf: float, k: int) -> float:
    """BARF (Lin et al. 2021, eq. 14) with bands k = 0..L-1 and alpha in [0, L]."""
    t = min(max(alpha_barf - k, 0.0), 1.0)
    return (1 - math.cos(t * math.pi)) / 2


@pytest.mark.parametrize("alpha", [0.0, 0.25, 1.0, 1.5, 2.7, 4.0])
def test_cosine_window_is_barfs_with_bands_numbered_from_one(alpha):
    got = band_weights(alpha, 5, "cosine")
    expected = [barf_weight(alpha + 1, k) for k in range(5)]  # band k here is BARF's band k + 1
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("window", ["cosine", "hard"])
def test_alpha_zero_passes_only_the_lowest_band_and_alpha_max_passes_all(window):
    assert band_weights(0.0, 6, window).tolist() == [1, 0, 0, 0, 0, 0]
    assert band_weights(5.0, 6, window).tolist() == [1] * 6


def test_hard_window_switches_whole_bands():
    assert band_weights(2.99, 5, "hard").tolist() == [1, 1, 1, 0, 0]


def test_schedule_is_linear_between_start_and_end():
    assert schedule_alpha(0, 100, 300, 5) == 0.0
    assert schedule_alpha(100, 100, 300, 5) == 0.0
    assert schedule_alpha(200, 100, 300, 5) == 2.0
    assert schedule_alpha(300, 100, 300, 5) == 4.0
    assert schedule_alpha(10_000, 100, 300, 5) == 4.0
    assert schedule_alpha(0, 0, 0, 5) == 4.0  # no schedule: everything on from the start


def reference_frequency_band(j: int, n_frequencies: int) -> int:
    # tcnn's Frequency: output j is dim j // 2F, frequency index (j // 2) mod F
    return (j // 2) % n_frequencies


@pytest.mark.parametrize("window", ["cosine", "hard"])
def test_progressive_frequency_scales_each_output_by_its_band_weight(window):
    nested = {"otype": "Frequency", "n_frequencies": 4}
    enc = build_encoder({"otype": "Progressive", "nested": nested, "window": window, "start_step": 0,
                         "end_step": 30}, 2)
    plain = build_encoder(nested, 2)
    x = torch.rand(50, 2, dtype=torch.float64)
    enc.set_step(13)  # alpha = 3 * 13 / 30 = 1.3
    alpha = 3 * 13 / 30
    for j in range(enc.n_output_dims):
        k = reference_frequency_band(j, 4)
        weight = (1.0 if k <= alpha else 0.0) if window == "hard" else barf_weight(alpha + 1, k)
        assert torch.allclose(enc(x)[:, j], plain(x)[:, j] * weight, atol=1e-12)


def test_nerf_raw_input_is_always_on_and_bands_follow_frequencies():
    enc = build_encoder({"otype": "Progressive", "nested": {"otype": "NeRF", "n_frequencies": 3}, "end_step": 10}, 2)
    x = torch.rand(7, 2, dtype=torch.float64)
    out = enc(x)  # step 0: raw input and the lowest frequency only
    assert torch.equal(out[:, :2], x)
    assert torch.allclose(out[:, 2:6], torch.cat([torch.sin(2 * math.pi * x), torch.cos(2 * math.pi * x)], -1))
    assert torch.all(out[:, 6:] == 0)


def test_grid_unit_is_a_level_and_unused_levels_get_no_gradient():
    nested = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 8,
              "base_resolution": 2}
    enc = build_encoder({"otype": "Progressive", "nested": nested, "window": "hard", "end_step": 3}, 2)
    enc.set_step(1)  # levels 0 and 1 on
    out = enc(torch.rand(64, 2))
    assert torch.all(out[:, 4:] == 0) and torch.any(out[:, :4] != 0)
    out.sum().backward()
    grad = enc.nested.params.grad.reshape(-1, 2)
    level2_start = int(enc.nested.levels.offset[2])
    assert torch.all(grad[level2_start:] == 0) and torch.any(grad[:level2_start] != 0)


def test_step_is_saved_with_the_model():
    config = {"otype": "Progressive", "nested": {"otype": "Frequency", "n_frequencies": 4}, "end_step": 9}
    trained = build_encoder(config, 1)
    trained.set_step(6)
    restored = build_encoder(config, 1)
    restored.load_state_dict(trained.state_dict())
    x = torch.rand(5, 1)
    assert restored.alpha == trained.alpha == 2.0 and torch.equal(restored(x), trained(x))


@pytest.mark.parametrize("config, match", [
    ({"nested": {"otype": "RandomFourier"}}, "no frequency bands"),
    ({"nested": None}, "'nested'"),
    ({"nested": {"otype": "Frequency"}, "window": "linear"}, "'window'"),
    ({"nested": {"otype": "Frequency"}, "start_step": 10, "end_step": 5}, "end_step"),
])
def test_bad_configs(config, match):
    with pytest.raises(ValueError, match=match):
        build_encoder({"otype": "Progressive", **config}, 2)


def test_triangle_wave_bands_are_dim_major_frequencies():
    # tcnn's TriangleWave: output j is dim j // F at frequency index j mod F
    nested = {"otype": "TriangleWave", "n_frequencies": 3}
    enc = build_encoder({"otype": "Progressive", "nested": nested, "window": "hard", "end_step": 2}, 2)
    enc.set_step(1)
    x = torch.rand(9, 2, dtype=torch.float64)
    keep = torch.tensor([float(j % 3 <= 1) for j in range(6)], dtype=torch.float64)
    assert torch.equal(enc(x), build_encoder(nested, 2)(x) * keep)
