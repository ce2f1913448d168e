"""Parameter-free and Fourier encodings against their published formulas, evaluated independently."""

import math

import numpy as np
import pytest
import torch
from reference import tcnn_sh_degree4
from scipy.integrate import quad
from scipy.special import lpmv

from inr_enc import build_encoder

RNG = np.random.default_rng(0)


def test_frequency_order_and_values():
    # tcnn: output j encodes dim j // 2F at frequency 2^((j // 2) mod F) * pi, sin for even j, cos for odd j.
    n_freq, d = 4, 3
    enc = build_encoder({"otype": "Frequency", "n_frequencies": n_freq}, d)
    x = RNG.random((20, d)).astype(np.float32)
    out = enc(torch.from_numpy(x)).numpy()
    assert out.shape == (20, d * 2 * n_freq)
    for j in range(d * 2 * n_freq):
        dim, k = j // (2 * n_freq), (j // 2) % n_freq
        angle = np.float32(x[:, dim] * np.float32(2.0**k)) * np.float32(math.pi)  # tcnn's float32 angle
        expected = np.sin(angle.astype(np.float64)) if j % 2 == 0 else np.cos(angle.astype(np.float64))
        np.testing.assert_allclose(out[:, j], expected, atol=2e-6)


def test_frequency_documented_example():
    # tcnn DOCUMENTATION.md: with 4 frequencies x becomes sin(pi x), cos(pi x), sin(2 pi x), ..., cos(8 pi x).
    x = 0.3
    out = build_encoder({"otype": "Frequency", "n_frequencies": 4}, 1)(torch.tensor([[x]], dtype=torch.float64))
    expected = [f(math.pi * 2**k * x) for k in range(4) for f in (math.sin, math.cos)]
    np.testing.assert_allclose(out[0].numpy(), expected, atol=1e-12)


def test_triangle_wave():
    n_freq, d = 5, 2
    enc = build_encoder({"otype": "TriangleWave", "n_frequencies": n_freq}, d)
    x = RNG.random((50, d))
    out = enc(torch.from_numpy(x)).numpy()
    for j in range(d * n_freq):
        dim, k = j // n_freq, j % n_freq
        v = x[:, dim] * 2.0 ** (k - 1) + k / 4
        np.testing.assert_allclose(out[:, j], 4 * np.abs(v - np.floor(v) - 0.5) - 1, atol=1e-12)


def _quartic_mass(x, lo, hi, n_bins):
    """Mass in [lo, hi] of the normalised kernel 15/16 (1 - u^2)^2 / r, u = (t - x) / r, r = 1 / n_bins,
    wrapped around [0, 1] (copies at x - 1 and x + 1), by numerical quadrature."""
    r = 1.0 / n_bins

    def density(t):
        return sum(15 / 16 * max(0.0, 1 - ((t - c) / r) ** 2) ** 2 / r for c in (x - 1, x, x + 1))

    return quad(density, lo, hi, points=[x - r, x, x + r], limit=200)[0]


@pytest.mark.parametrize("n_bins", [1, 4, 16])
def test_one_blob_is_the_binned_quartic_kernel(n_bins):
    enc = build_encoder({"otype": "OneBlob", "n_bins": n_bins}, 2)
    x = RNG.random((6, 2))
    x[0] = [0.0, 1.0]
    out = enc(torch.from_numpy(x)).numpy()
    for i in range(x.shape[0]):
        for dim in range(2):
            expected = [_quartic_mass(x[i, dim], b / n_bins, (b + 1) / n_bins, n_bins) for b in range(n_bins)]
            np.testing.assert_allclose(out[i, dim * n_bins : (dim + 1) * n_bins], expected, atol=1e-7)
    np.testing.assert_allclose(out.reshape(-1, 2, n_bins).sum(-1), 1.0, atol=1e-12)


def _real_sh(band, m, direction):
    """Real SH with the Condon-Shortley phase from scipy's associated Legendre functions, in angles."""
    x, y, z = direction
    theta, phi = math.acos(z), math.atan2(y, x)
    k = math.sqrt((2 * band + 1) / (4 * math.pi) * math.factorial(band - abs(m)) / math.factorial(band + abs(m)))
    p = lpmv(abs(m), band, math.cos(theta))
    if m == 0:
        return k * p
    return math.sqrt(2) * k * p * (math.cos(m * phi) if m > 0 else math.sin(-m * phi))


def test_spherical_harmonics_on_unit_directions():
    directions = RNG.normal(size=(30, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    enc = build_encoder({"otype": "SphericalHarmonics", "degree": 8}, 3)
    out = enc(torch.from_numpy((directions + 1) / 2)).numpy()
    for i, v in enumerate(directions):
        expected = [_real_sh(band, m, v) for band in range(8) for m in range(-band, band + 1)]
        np.testing.assert_allclose(out[i], expected, atol=1e-9)


def test_spherical_harmonics_match_tcnn_polynomials_without_renormalising():
    points = RNG.random((25, 3))  # not unit directions after 2x - 1: the polynomials are used as they are
    out = build_encoder({"otype": "SphericalHarmonics", "degree": 4}, 3)(torch.from_numpy(points)).numpy()
    for i, p in enumerate(points):
        np.testing.assert_allclose(out[i], tcnn_sh_degree4(*(2 * p - 1)), atol=1e-12)


def tcnn_sh_float32(x, y, z):
    """tcnn's sh_enc up to degree 4 with the literal float32 constants it prints (common_device.h), in float32."""
    c = [np.float32(k) for k in (0.28209479177387814, 0.48860251190291987, 1.0925484305920792, 0.94617469575755997,
                                 0.31539156525251999, 0.54627421529603959, 0.59004358992664352, 2.8906114426405538,
                                 0.45704579946446572, 0.3731763325901154, 1.4453057213202769)]
    xx, yy, zz, one = x * x, y * y, z * z, np.ones_like(x)
    return np.stack([
        c[0] * one, -c[1] * y, c[1] * z, -c[1] * x,
        c[2] * x * y, -c[2] * y * z, c[3] * zz - c[4], -c[2] * x * z, c[5] * xx - c[5] * yy,
        c[6] * y * (-3 * xx + yy), c[7] * x * y * z, c[8] * y * (1 - 5 * zz), c[9] * z * (5 * zz - 3),
        c[8] * x * (1 - 5 * zz), c[10] * z * (xx - yy), c[6] * x * (-xx + 3 * yy)], 1)


def test_spherical_harmonics_in_float32_give_tcnns_printed_constants():
    points = RNG.random((25, 3)).astype(np.float32)
    out = build_encoder({"otype": "SphericalHarmonics", "degree": 4}, 3)(torch.from_numpy(points)).numpy()
    assert out.dtype == np.float32 and out.shape == (25, 16)
    np.testing.assert_array_equal(out[:, 0], np.float32(0.28209479177387814))  # degree 0: the constant itself
    expected = tcnn_sh_float32(*(2 * points - 1).T)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-6)  # a few float32 roundings (ulp 2.4e-7 below 3)


def test_identity_scale_offset():
    x = torch.rand(7, 4)
    out = build_encoder({"otype": "Identity", "scale": 2.0, "offset": -1.0}, 4)(x)
    torch.testing.assert_close(out, 2 * x - 1)


@pytest.mark.parametrize("scale, factor", [("pi", math.pi), ("2pi", 2 * math.pi), ("1", 1.0)])
def test_nerf_encoding_order_and_scale(scale, factor):
    enc = build_encoder({"otype": "NeRF", "n_frequencies": 3, "scale": scale, "include_input": True}, 2)
    x = RNG.random((5, 2))
    out = enc(torch.from_numpy(x)).numpy()
    for i, p in enumerate(x):
        expected = list(p)
        for k in range(3):
            expected += [math.sin(factor * 2**k * v) for v in p] + [math.cos(factor * 2**k * v) for v in p]
        np.testing.assert_allclose(out[i], expected, atol=1e-12)
    no_input = build_encoder({"otype": "NeRF", "n_frequencies": 3, "scale": scale, "include_input": False}, 2)
    assert no_input.n_output_dims == 12


def test_random_fourier_features():
    enc = build_encoder({"otype": "RandomFourier", "n_features": 4096, "sigma": 10.0, "seed": 3}, 2)
    b = enc.frequencies.double().numpy()
    assert b.shape == (4096, 2)
    assert b.std() == pytest.approx(10.0, rel=0.03) and abs(b.mean()) < 0.5
    x = RNG.random((4, 2))
    out = enc(torch.from_numpy(x)).numpy()
    proj = 2 * math.pi * x @ b.T
    np.testing.assert_allclose(out, np.concatenate([np.cos(proj), np.sin(proj)], 1), atol=1e-9)
    same = build_encoder({"otype": "RandomFourier", "n_features": 4096, "seed": 3}, 2)
    other = build_encoder({"otype": "RandomFourier", "n_features": 4096, "seed": 4}, 2)
    assert torch.equal(same.frequencies, enc.frequencies) and not torch.equal(other.frequencies, enc.frequencies)
    assert "frequencies" in enc.state_dict()


def test_learnable_fourier_formula_and_training():
    enc = build_encoder({"otype": "LearnableFourier", "n_features": 8, "sigma": 2.0, "n_hidden": 5, "n_output": 3}, 2)
    x = RNG.random((6, 2))
    w = enc.frequencies.detach().double().numpy()
    proj = 2 * math.pi * x @ w.T
    r = np.concatenate([np.cos(proj), np.sin(proj)], 1) / math.sqrt(8)
    pre = r @ enc.hidden_weight.detach().double().numpy().T + enc.hidden_bias.detach().double().numpy()
    gelu = 0.5 * pre * (1 + np.vectorize(math.erf)(pre / math.sqrt(2)))
    expected = gelu @ enc.output_weight.detach().double().numpy().T + enc.output_bias.detach().double().numpy()
    np.testing.assert_allclose(enc(torch.from_numpy(x)).detach().numpy(), expected, atol=1e-6)
    enc(torch.rand(10, 2)).square().sum().backward()
    assert enc.frequencies.grad is not None and enc.frequencies.grad.abs().sum() > 0


def test_composite_concatenates_slices_in_order():
    cfg = {
        "otype": "Composite",
        "nested": [
            {"n_dims_to_encode": 3, "otype": "TriangleWave", "n_frequencies": 12},
            {"n_dims_to_encode": 5, "otype": "OneBlob", "n_bins": 4},
            {"otype": "Identity"},
        ],
    }
    enc = build_encoder(cfg, 10)  # tcnn's Neural Radiance Caching example: the Identity takes the last 2 dims
    assert enc.n_output_dims == 3 * 12 + 5 * 4 + 2
    x = torch.rand(9, 10)
    expected = torch.cat([
        build_encoder({"otype": "TriangleWave"}, 3)(x[:, :3]),
        build_encoder({"otype": "OneBlob", "n_bins": 4}, 5)(x[:, 3:8]),
        x[:, 8:],
    ], dim=-1)
    torch.testing.assert_close(enc(x), expected)
    assert enc.config["nested"][2]["n_dims_to_encode"] == 2


@pytest.mark.parametrize("reduction", ["Sum", "Product"])
def test_composite_reductions(reduction):
    cfg = {"otype": "Composite", "reduction": reduction, "nested": [
        {"otype": "Frequency", "n_frequencies": 2, "n_dims_to_encode": 1},
        {"otype": "TriangleWave", "n_frequencies": 4, "n_dims_to_encode": 1},
    ]}
    x = torch.rand(6, 2)
    a = build_encoder({"otype": "Frequency", "n_frequencies": 2}, 1)(x[:, :1])
    b = build_encoder({"otype": "TriangleWave", "n_frequencies": 4}, 1)(x[:, 1:])
    torch.testing.assert_close(build_encoder(cfg, 2)(x), a + b if reduction == "Sum" else a * b)


def test_composite_dims_to_encode_begin():
    cfg = {"otype": "Composite", "nested": [
        {"otype": "Identity", "scale": 2.0, "n_dims_to_encode": 1, "dims_to_encode_begin": 2},
        {"otype": "Identity", "offset": 1.0, "n_dims_to_encode": 2, "dims_to_encode_begin": 0}]}
    x = torch.rand(5, 3)
    torch.testing.assert_close(build_encoder(cfg, 3)(x), torch.stack([2 * x[:, 2], x[:, 0] + 1, x[:, 1] + 1], 1))


def test_composite_unspecified_entry_takes_the_dims_left_in_order():
    cfg = {"otype": "Composite",
           "nested": [{"otype": "Identity"}, {"otype": "Identity", "scale": 2.0, "n_dims_to_encode": 1}]}
    x = torch.rand(5, 3)
    torch.testing.assert_close(build_encoder(cfg, 3)(x), torch.stack([x[:, 0], x[:, 1], 2 * x[:, 2]], 1))
