"""Hybrid (Hyb-NeRF) encoding and mip-NeRF's cone-traced features, against independent references:
tcnn's grid layout (reference.py), standalone HashGrid/DenseGrid encoders, Monte-Carlo expectations in float64,
and mip-NeRF's frustum moments written from their defining integrals."""

import math
from pathlib import Path

import numpy as np
import pytest
import reference
import torch
import yaml
from torch.func import functional_call

from inr_enc.encoders.grid import DenseGrid, HashGrid
from inr_enc.encoders.hybrid import Hybrid
from inr_enc.nerf.frustum import frustum_gaussian

GRID_KEYS = ("n_levels", "n_features_per_level", "log2_hashmap_size", "base_resolution", "per_level_scale")


def _randomised(encoder, seed=0, scale=0.5):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in encoder.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return encoder


def _spd(n, d, std, seed, dtype=torch.float64):
    """n random symmetric positive definite [d, d] matrices with entries of size ~std^2."""
    a = torch.randn(n, d, d, generator=torch.Generator().manual_seed(seed), dtype=dtype) * std
    return a @ a.transpose(1, 2) + std**2 * 0.1 * torch.eye(d, dtype=dtype)


def _points(n, d, seed, dtype=torch.float32):
    return 0.1 + 0.8 * torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("coarse", ["Fourier", "Dense"])
@pytest.mark.parametrize("fine_cov", ["Mean", "Erf"])
def test_zero_covariance_equals_point_encoding(coarse, fine_cov):
    config = {"n_levels": 5, "split_level": 2, "coarse": coarse, "fine_cov": fine_cov, "log2_hashmap_size": 10,
              "base_resolution": 4, "per_level_scale": 1.8, "n_frequencies": 6}
    enc = _randomised(Hybrid(3, config))
    x = torch.rand(4, 16, 3, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(enc(x, torch.zeros(4, 16, 3, 3)), enc(x), atol=1e-6, rtol=0)
    assert enc(torch.rand(0, 3), torch.zeros(0, 3, 3)).shape == (0, 10)
    assert enc(torch.rand(3).double(), torch.eye(3).double() * 1e-4).shape == (10,)


def test_fourier_ipe_matches_monte_carlo_float64():
    # Only coarse levels; E[enc(X)] for X ~ N(mu, cov) by 2^17 samples, against the closed form enc(mu, cov).
    enc = _randomised(Hybrid(2, {"n_levels": 2, "split_level": 2, "n_frequencies": 4, "base_resolution": 4}))
    enc = enc.double()
    with torch.no_grad():
        enc.frequencies.mul_(4.0)  # |b| ~ 2 cycles: damping exp(-2 pi^2 b^T cov b) well inside (0, 1)
    gen = torch.Generator().manual_seed(3)
    mus, covs = _points(3, 2, 4, torch.float64), _spd(3, 2, 0.08, 5)
    closed = enc(mus, covs).detach()
    for mu, cov, expected in zip(mus, covs, closed):
        z = torch.randn(1 << 17, 2, generator=gen, dtype=torch.float64)
        samples = enc(mu + z @ torch.linalg.cholesky(cov).T).detach()
        standard_error = samples.std(0) / math.sqrt(samples.shape[0])
        assert (samples.mean(0) - expected).abs().le(5 * standard_error + 1e-12).all()
    assert (closed - enc(mus).detach()).abs().max() > 0.05  # the covariance matters at this size


def test_fourier_ipe_closed_form_1d():
    # One level, one frequency f (cycles), identity linear map: features [cos(w x), sin(w x)], w = 2 pi f;
    # for x ~ N(mu, s^2): E[sin(w x)] = sin(w mu) exp(-w^2 s^2 / 2), E[cos(w x)] = cos(w mu) exp(-w^2 s^2 / 2).
    enc = Hybrid(1, {"n_levels": 1, "split_level": 1, "n_frequencies": 1}).double()
    f = 3.7
    with torch.no_grad():
        enc.frequencies.fill_(f)
        enc.weight.copy_(torch.eye(2, dtype=torch.float64)[None])
        enc.bias.zero_()
    mu = torch.tensor([[0.2], [0.45], [0.9]], dtype=torch.float64)
    s = torch.tensor([0.01, 0.05, 0.1], dtype=torch.float64)
    out = enc(mu, (s**2)[:, None, None])
    w = 2 * math.pi * f
    for i in range(3):
        damp = math.exp(-(w**2) * s[i].item() ** 2 / 2)
        assert out[i, 0].item() == pytest.approx(math.cos(w * mu[i, 0].item()) * damp, abs=1e-12)
        assert out[i, 1].item() == pytest.approx(math.sin(w * mu[i, 0].item()) * damp, abs=1e-12)


def test_large_covariance_removes_high_frequencies():
    # Anti-aliasing: a footprint of std 0.1 keeps a 0.5-cycle feature (exp(-2 pi^2 0.25 0.01) = 0.95)
    # and removes an 8-cycle one (exp(-2 pi^2 64 0.01) ~ 3e-6).
    enc = Hybrid(1, {"n_levels": 2, "split_level": 2, "n_frequencies": 1}).double()
    with torch.no_grad():
        enc.frequencies.copy_(torch.tensor([0.5, 8.0], dtype=torch.float64).reshape(2, 1, 1))
        enc.weight.copy_(torch.eye(2, dtype=torch.float64).expand(2, 2, 2))
        enc.bias.fill_(0.25)
    x = torch.linspace(0.05, 0.95, 7, dtype=torch.float64)[:, None]
    out = enc(x, torch.full((7, 1, 1), 0.01, dtype=torch.float64)).reshape(7, 2, 2) - 0.25
    point = enc(x).reshape(7, 2, 2) - 0.25
    assert (out[:, 1].abs() < 1e-5).all() and (point[:, 1].abs().amax(1) > 0.1).all()
    torch.testing.assert_close(out[:, 0], point[:, 0] * math.exp(-2 * math.pi**2 * 0.25 * 0.01))


@pytest.mark.parametrize("d, extra", [(2, {"log2_hashmap_size": 8, "per_level_scale": 1.7}),
                                      (3, {"log2_hashmap_size": 10, "per_level_scale": 1.5, "base_resolution": 5})])
def test_fine_levels_equal_standalone_hashgrid(d, extra):
    cfg = {"n_levels": 6, "base_resolution": 4, "n_features_per_level": 2, **extra}
    split = 2
    hybrid = _randomised(Hybrid(d, {**cfg, "split_level": split}, backend="torch"))  # one path for both: bitwise
    grid = HashGrid(d, cfg, backend="torch")
    layout = reference.level_layout(d, "Hash", cfg["n_levels"], cfg["log2_hashmap_size"], cfg["base_resolution"],
                                    cfg["per_level_scale"])
    first = layout[split][3] * 2  # offset of level `split` in the HashGrid's table, in floats
    assert hybrid.params.numel() == grid.params.numel() - first
    with torch.no_grad():
        grid.params[first:] = hybrid.params
    assert any(size == 2 ** cfg["log2_hashmap_size"] for _, _, size, _ in layout[split:])  # some levels hash
    x = torch.rand(200, d, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(hybrid(x)[:, 2 * split:], grid(x)[:, 2 * split:], atol=0, rtol=0)
    slow = reference.encode_point(x[0].tolist(), grid.params.detach().numpy(), 2, layout, "Hash")
    np.testing.assert_allclose(hybrid(x[:1])[0, 2 * split:].detach().numpy(), slow[2 * split:], atol=1e-6)


def test_dense_coarse_levels_equal_densegrid_on_one_schedule():
    cfg = {"n_levels": 5, "base_resolution": 3, "per_level_scale": 1.9, "log2_hashmap_size": 8}
    hybrid = _randomised(Hybrid(2, {**cfg, "split_level": 3, "coarse": "Dense"}, backend="torch"))
    dense = DenseGrid(2, {**cfg, "n_levels": 3}, backend="torch")
    with torch.no_grad():
        dense.params.copy_(hybrid.coarse_params)
    x = torch.rand(100, 2, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(hybrid(x)[:, :6], dense(x), atol=0, rtol=0)
    # Coarse (dense) and fine (hash) levels follow one schedule: the HashGrid's level scales.
    hash_layout = reference.level_layout(2, "Hash", 5, 8, 3, 1.9)
    dense_layout = reference.level_layout(2, "Dense", 3, 8, 3, 1.9)
    assert [lvl[:2] for lvl in dense_layout] == [lvl[:2] for lvl in hash_layout[:3]]
    assert hybrid.fine_levels.scale.tolist() == [lvl[0] for lvl in hash_layout[3:]]


@pytest.mark.parametrize("d", [2, 3])
def test_dense_coarse_with_cov_is_the_unscented_average(d):
    cfg = {"n_levels": 3, "base_resolution": 4, "per_level_scale": 2.0, "log2_hashmap_size": 8}
    hybrid = _randomised(Hybrid(d, {**cfg, "split_level": 3, "coarse": "Dense"})).double()
    dense = DenseGrid(d, cfg, backend="torch").double()
    with torch.no_grad():
        dense.params.copy_(hybrid.coarse_params)
    x, cov = _points(6, d, 7, torch.float64), _spd(6, d, 0.05, 8)
    x[0] = 0.02  # near a corner: some sigma points fall outside [0, 1] and are clamped
    out = hybrid(x, cov).detach().numpy()
    for i in range(6):  # sigma points x +- sqrt(d) L[:, j], equal weights 1 / (2d), clamped to [0, 1]
        chol = np.linalg.cholesky(cov[i].numpy())
        pts = [x[i].numpy() + sign * math.sqrt(d) * chol[:, j] for j in range(d) for sign in (1, -1)]
        expected = dense(torch.tensor(np.clip(pts, 0, 1))).detach().numpy().mean(0)
        np.testing.assert_allclose(out[i], expected, atol=1e-5)


def test_output_is_level_major():
    enc = Hybrid(2, {"n_levels": 4, "split_level": 2, "n_features_per_level": 2, "log2_hashmap_size": 8})
    layout = reference.level_layout(2, "Hash", 4, 8, 16, 2.0)
    with torch.no_grad():
        enc.weight.zero_()
        enc.bias.copy_(torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
        table = enc.params.view(-1, 2)
        start = layout[2][3]
        for level in (2, 3):  # each fine level's table constant: interpolation returns it
            _, _, size, offset = layout[level]
            table[offset - start: offset - start + size] = torch.tensor([2.0 * level, 2.0 * level + 1])
    out = enc(torch.rand(5, 2))
    torch.testing.assert_close(out, torch.arange(8.0).expand(5, 8))


def test_fine_erf_weighting_matches_zip_nerf():
    enc = _randomised(Hybrid(3, {"n_levels": 4, "split_level": 1, "fine_cov": "Erf", "log2_hashmap_size": 10,
                                 "base_resolution": 4}))
    point = Hybrid(3, {**enc.config, "fine_cov": "Mean"})
    point.load_state_dict(enc.state_dict())
    x = torch.rand(3, 3, dtype=torch.float64)
    cov = torch.diag_embed(torch.tensor([[1e-4, 4e-4, 1e-3], [1e-3, 1e-3, 1e-3], [0.0, 0.0, 3e-5]]))
    out, mean_only = enc.double()(x, cov).detach(), point.double()(x, cov).detach()
    torch.testing.assert_close(out[:, :2], mean_only[:, :2])  # coarse part unaffected by fine_cov
    layout = reference.level_layout(3, "Hash", 4, 10, 4, 2.0)
    for i in range(3):
        sigma2 = cov[i].trace().item() / 3
        for level in range(1, 4):
            n = layout[level][0]
            weight = math.erf(1 / math.sqrt(8 * sigma2 * n * n)) if sigma2 > 0 else 1.0
            cols = slice(2 * level, 2 * level + 2)
            torch.testing.assert_close(out[i, cols], weight * mean_only[i, cols])


def _frustum_reference(o, d, t0, t1, r, shape):
    """Moments of the uniform frustum from their integrals (density ~ t^2 for a cone, per-axis disk variance
    R^2 / 4 at radius R = r t), or of a cylinder (uniform t, radius r); cov = var_t d d^T + var_r (I - d d^T/|d|^2)."""
    if shape == "cone":
        mean_t = 3 * (t1**4 - t0**4) / (4 * (t1**3 - t0**3))
        var_t = 3 * (t1**5 - t0**5) / (5 * (t1**3 - t0**3)) - mean_t**2
        var_r = r**2 / 4 * 3 * (t1**5 - t0**5) / (5 * (t1**3 - t0**3))
    else:
        mean_t, var_t, var_r = (t0 + t1) / 2, (t1 - t0) ** 2 / 12, r**2 / 4
    dd = np.outer(d, d)
    return o + mean_t * d, var_t * dd + var_r * (np.eye(len(d)) - dd / d.dot(d))


@pytest.mark.parametrize("shape", ["cone", "cylinder"])
def test_frustum_gaussian_matches_mip_nerf_moments(shape):
    gen = torch.Generator().manual_seed(9)
    o, d = torch.randn(2, 20, 3, generator=gen, dtype=torch.float64)
    t0 = 0.5 + 3 * torch.rand(20, generator=gen, dtype=torch.float64)
    t1 = t0 + 0.01 + torch.rand(20, generator=gen, dtype=torch.float64)
    r = 0.001 + 0.01 * torch.rand(20, generator=gen, dtype=torch.float64)
    mean, cov = frustum_gaussian(o, d, t0, t1, r, shape)
    for i in range(20):
        ref_mean, ref_cov = _frustum_reference(o[i].numpy(), d[i].numpy(), t0[i].item(), t1[i].item(), r[i].item(),
                                               shape)
        np.testing.assert_allclose(mean[i].numpy(), ref_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(cov[i].numpy(), ref_cov, rtol=1e-7, atol=1e-14)
    assert torch.linalg.eigvalsh(cov).min() > 0
    with pytest.raises(ValueError, match="shape must be 'cone' or 'cylinder'"):
        frustum_gaussian(o, d, t0, t1, r, "sphere")


@pytest.mark.parametrize("coarse", ["Fourier", "Dense"])
def test_gradcheck_with_and_without_cov(coarse):
    config = {"n_levels": 3, "split_level": 1, "coarse": coarse, "fine_cov": "Erf", "log2_hashmap_size": 4,
              "base_resolution": 2, "n_frequencies": 2}
    enc = _randomised(Hybrid(2, config)).double()
    x = _points(3, 2, 10, torch.float64).requires_grad_()
    cov = _spd(3, 2, 0.02, 11).requires_grad_()
    names = [n for n, _ in enc.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in enc.named_parameters()]

    def fn(x, cov, *params):
        return functional_call(enc, dict(zip(names, params)), (x, cov))

    def fn_point(x, *params):
        return functional_call(enc, dict(zip(names, params)), (x,))

    assert torch.autograd.gradcheck(fn, (x, cov, *params), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(fn_point, (x, *params), eps=1e-6, atol=1e-6)
    if coarse == "Fourier":
        assert torch.autograd.gradgradcheck(fn, (x, cov, *params), eps=1e-6, atol=1e-5)


def test_zero_cov_gradients_are_finite():
    enc = Hybrid(3, {"n_levels": 3, "split_level": 1, "coarse": "Dense", "fine_cov": "Erf", "log2_hashmap_size": 8})
    x, cov = torch.rand(5, 3, requires_grad=True), torch.zeros(5, 3, 3, requires_grad=True)
    gx, gcov = torch.autograd.grad(enc(x, cov).sum(), (x, cov))
    assert torch.isfinite(gx).all() and torch.isfinite(gcov).all()


@pytest.mark.parametrize("config, message", [
    ({"n_levels": 4, "split_level": 5}, "'split_level' must be in [0, 4], got 5"),
    ({"split_level": -1}, "'split_level' must be in [0, 16], got -1"),
    ({"coarse": "Wavelet"}, "'coarse' must be one of Fourier, Dense"),
    ({"fine_cov": "Blur"}, "'fine_cov' must be one of Mean, Erf"),
    ({"n_frequencies": 0}, "'n_frequencies' must be >= 1"),
    ({"n_features_per_level": 3}, "'n_features_per_level' must be 1, 2, 4 or 8"),
    ({"split_levels": 2}, "unknown config key 'split_levels' (did you mean 'split_level'?)"),
])
def test_bad_configs_raise(config, message):
    with pytest.raises(ValueError) as info:
        Hybrid(3, config)
    assert message in str(info.value)


def test_bad_covariances_raise():
    enc = Hybrid(2, {"n_levels": 3, "split_level": 1, "log2_hashmap_size": 8})
    x = torch.rand(4, 5, 2)
    for bad, message in [
        (torch.zeros(4, 5, 2, 3), r"cov must have shape \[4, 5, 2, 2\]"),
        (torch.zeros(5, 2, 2), r"cov must have shape \[4, 5, 2, 2\]"),
        (torch.zeros(4, 5, 2), r"got \[4, 5, 2\]"),
        (torch.zeros(4, 5, 2, 2, dtype=torch.long), "cov must be a floating point torch.Tensor, got dtype torch.int64"),
        ([[0.0]], "cov must be a floating point torch.Tensor, got list"),
        (torch.full((4, 5, 2, 2), float("nan")), "cov contains NaN or inf"),
    ]:
        with pytest.raises(ValueError, match=message):
            enc(x, bad)
    with pytest.raises(ValueError, match="input contains NaN or inf"):
        enc(torch.full((4, 5, 2), float("nan")), torch.zeros(4, 5, 2, 2))
    dense = Hybrid(2, {"n_levels": 2, "split_level": 1, "coarse": "Dense"})
    with pytest.raises(ValueError, match="needs a positive semi-definite cov"):
        dense(torch.rand(1, 2), -torch.eye(2)[None])


def test_memory_against_pure_hashgrid():
    cfg = {"n_levels": 8, "log2_hashmap_size": 12, "base_resolution": 8, "per_level_scale": 1.6}
    enc = Hybrid(3, {**cfg, "split_level": 3, "n_frequencies": 8})
    layout = reference.level_layout(3, "Hash", 8, 12, 8, 1.6)
    fine = sum(size for _, _, size, _ in layout[3:]) * 2
    coarse = 3 * (8 * 3 + 2 * 16 + 2)  # per level: B [8, 3], linear [2, 16] and bias [2]
    assert enc.memory_bytes() == {"coarse": 4 * coarse, "fine": 4 * fine, "total": 4 * (coarse + fine),
                                  "hashgrid": 4 * HashGrid(3, cfg).params.numel()}
    assert sum(p.numel() for p in enc.parameters()) == coarse + fine


def test_bundled_config_is_lighter_than_the_hashgrid_one():
    configs = Path(__file__).resolve().parent.parent / "inr_enc" / "configs"
    hybrid_cfg = yaml.safe_load((configs / "hybrid.yaml").read_text())
    hash_cfg = yaml.safe_load((configs / "hashgrid.yaml").read_text())
    assert hybrid_cfg["network"] == hash_cfg["network"] and hybrid_cfg["training"] == hash_cfg["training"]
    encoding = {k: v for k, v in hybrid_cfg["encoding"].items() if k != "otype"}
    enc = Hybrid(2, encoding)
    assert all(enc.config[key] == hash_cfg["encoding"][key] for key in GRID_KEYS)
    assert enc.memory_bytes()["hashgrid"] == 4 * HashGrid(2, hash_cfg["encoding"]).params.numel()
    assert enc.memory_bytes()["total"] < enc.memory_bytes()["hashgrid"]
