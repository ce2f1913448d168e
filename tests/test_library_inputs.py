"""Every encoder on every finite input: finite outputs and derivatives, or the ValueError it documents (issue 13,
item 9); the guards change nothing on ordinary inputs; config-derived buffers refuse a state dict of another
config."""

import math

import numpy as np
import pytest
import torch
from test_contract import SMALL

from inr_enc import ENCODERS, Encoder, build_encoder
from inr_enc.encoders import hybrid, latent_grid, nerf, random_fourier, shifted_basis
from inr_enc.field import Field

F32, F64 = torch.float32, torch.float64
EXTREMES = {  # per compute dtype: the inputs, the smallest subnormal, the largest floats
    F32: [0.0, 1.0, -1.0, 1e3, 1e10, 3e38, -3e38, -1e30, 2.0**-149],
    F64: [0.0, 1.0, -1.0, 1e3, 1e10, 3e38, -3e38, -1e30, 2.0**-149, 1e300, 1.7e308, -1.7e308, 2.0**-1074],
}


def raises_for(otype: str, value: float, dtype: torch.dtype) -> bool:
    """The documented decision: every encoder is finite on every finite input except Identity, whose
    x * scale + offset (SMALL: scale 2, offset 0.5) is not representable once it overflows: ValueError."""
    return otype == "Identity" and abs(value) * 2 > torch.finfo(dtype).max


def rows(value: float, d: int, dtype: torch.dtype) -> torch.Tensor:
    """value everywhere; +-value alternating (diagonal axes: u + v and u - v); value with ordinary neighbours."""
    alternating = [value if i % 2 == 0 else -value for i in range(d)]
    return torch.tensor([[value] * d, alternating, [value] + [0.3] * (d - 1), [0.6] * (d - 1) + [value]], dtype=dtype)


def _finite_derivatives(enc: Encoder, x: torch.Tensor) -> None:
    params = [p for p in enc.parameters() if p.requires_grad]
    x = x.clone().requires_grad_()
    y = enc(x)
    assert torch.isfinite(y).all()
    weights = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)
    grads = torch.autograd.grad((y * weights).sum(), [x, *params], create_graph=True, allow_unused=True)
    assert all(torch.isfinite(g).all() for g in grads if g is not None), "first derivatives"
    if grads[0].requires_grad:
        second = torch.autograd.grad((grads[0] * x.detach().sign()).sum(), [x, *params], allow_unused=True)
        assert all(torch.isfinite(g).all() for g in second if g is not None), "second derivatives"


@pytest.mark.parametrize("module_dtype, input_dtype", [(F32, F32), (F64, F64), (F64, F32)])
@pytest.mark.parametrize("otype", sorted(ENCODERS))
def test_every_finite_input_encodes_finitely_or_raises_as_documented(otype, module_dtype, input_dtype):
    config, d = SMALL[otype]
    enc = build_encoder(config, d).to(module_dtype)
    for value in EXTREMES[input_dtype]:
        x = rows(value, d, input_dtype)
        if raises_for(otype, value, input_dtype):
            with pytest.raises(ValueError, match=r"Identity: .*overflows.*\|x\| <= about"):
                enc(x)
        else:
            _finite_derivatives(enc, x)


# n_frequencies 32 for pi 2^k: at 63 and more the second derivative (pi 2^(F-1))^2 passes float32's largest value
# at any input (a config bound, not an input one); scale "1" at 64 reaches the saturation bound's floor, 2.
@pytest.mark.parametrize("config, d", [
    ({"otype": "NeRF", "n_frequencies": 64, "scale": "1"}, 2),
    ({"otype": "NeRF", "n_frequencies": 32, "scale": "2pi"}, 2),
    ({"otype": "Frequency", "n_frequencies": 32}, 1), ({"otype": "TriangleWave", "n_frequencies": 64}, 1),
    ({"otype": "OneBlob", "n_bins": 1 << 12}, 1), ({"otype": "OneBlob", "n_bins": 1}, 1),
    ({"otype": "SphericalHarmonics", "degree": 8}, 3), ({"otype": "Identity"}, 2),
    ({"otype": "RandomFourier", "n_features": 16, "sigma": 1e5}, 3), ({"otype": "RandomFourier", "sigma": 0.0}, 2),
    *[({"otype": "ShiftedBasis", "n_bases": 8, "basis": b, "axes": "diagonal"}, 2) for b in shifted_basis.BASES],
    ({"otype": "Hybrid", "n_levels": 2, "split_level": 2, "coarse": "Dense", "base_resolution": 3}, 2),
    ({"otype": "LatentGrid", "resolution": [4, 4], "n_latent_channels": 2, "n_hidden_channels": 2, "n_features": 2,
      "scale_factors": [2, 1, 1], "n_frequencies": 8, "patches": [2, 2]}, 2),
])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_extreme_configs_stay_finite(config, d, dtype):
    enc = build_encoder(config, d).to(dtype)
    for value in EXTREMES[dtype]:
        _finite_derivatives(enc, rows(value, d, dtype))


def test_hybrid_fourier_with_cov_stays_finite():
    config, d = SMALL["Hybrid"]
    enc = build_encoder({**config, "fine_cov": "Erf"}, d)
    for value in EXTREMES[F32]:
        x = rows(value, d, F32).requires_grad_()
        cov = torch.eye(d).expand(x.shape[0], d, d) * 1e-3
        y = enc(x, cov)
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.isfinite(y).all() and torch.isfinite(g).all()


def test_identity_that_cannot_overflow_never_raises():
    enc = build_encoder({"otype": "Identity", "scale": -1.0, "offset": 0.0}, 1)
    x = torch.tensor([[torch.finfo(F32).max], [-torch.finfo(F32).max]])
    assert torch.equal(enc(x), -x)


def _guards_off(monkeypatch):
    """The unmodified formulas: no guard_input, no period reduction, no saturation, no axis clamp."""
    for cls in ENCODERS.values():
        if "guard_input" in vars(cls):
            monkeypatch.setattr(cls, "guard_input", Encoder.guard_input)
    for module in (nerf, random_fourier, hybrid, latent_grid):
        monkeypatch.setattr(module, "saturate", lambda x, rate: x)
    monkeypatch.setattr(nerf, "reduce_period", lambda x, period: x)
    monkeypatch.setattr(shifted_basis, "axis_range", lambda basis, width, dtype: (-math.inf, math.inf))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("otype", sorted(ENCODERS))
def test_guards_change_nothing_on_ordinary_inputs(otype, dtype, monkeypatch):
    """Bit for bit, on inputs in (-2, 2) (x mod 2 is x itself there; every saturation bound is far beyond)."""
    config, d = SMALL[otype]
    enc = build_encoder(config, d).to(dtype)
    gen = torch.Generator().manual_seed(3)
    x = torch.cat([torch.rand(64, d, generator=gen, dtype=dtype) * 3.98 - 1.99,
                   torch.tensor([[0.0] * d, [1.0] * d, [-1.0] * d, [2.0**-149] * d], dtype=dtype)])
    guarded = enc(x)
    _guards_off(monkeypatch)
    assert torch.equal(guarded, enc(x))


def test_saturating_guards_change_nothing_far_beyond_ordinary_inputs(monkeypatch):
    gen = torch.Generator().manual_seed(4)
    x = (torch.rand(128, 2, generator=gen, dtype=F64) * 2 - 1) * torch.tensor([[1e6], [12.0]], dtype=F64).repeat(64, 1)
    encoders = [build_encoder(SMALL[otype][0], 2).double() for otype in ("RandomFourier", "LearnableFourier", "Hybrid")]
    encoders += [build_encoder({"otype": "NeRF", "n_frequencies": 8, "scale": "1"}, 2).double()]
    encoders += [build_encoder({"otype": "ShiftedBasis", "n_bases": 8, "basis": b}, 2).double()
                 for b in shifted_basis.BASES]
    guarded = [enc(x) for enc in encoders]
    _guards_off(monkeypatch)
    for enc, out in zip(encoders, guarded):
        assert torch.equal(out, enc(x)), enc.otype


def test_periodic_encodings_equal_the_float64_formula_at_any_magnitude():
    """Independent references in numpy float64: sin(2^k pi x), the triangle wave, NeRF's sin(s 2^k x); at
    magnitudes to 1e3 the reduced phase is the right one (within numpy's own phase rounding)."""
    x = np.random.default_rng(5).uniform(-1e3, 1e3, (200, 1))
    x[:4, 0] = [0.0, 1.0, -1.0, 1.5]
    t = torch.from_numpy(x)
    k = np.arange(3)
    phase = x[:, :, None] * 2.0**k * np.pi  # [N, 1, F]
    frequency = np.stack([np.sin(phase), np.cos(phase)], -1).reshape(len(x), -1)
    np.testing.assert_allclose(build_encoder({"otype": "Frequency", "n_frequencies": 3}, 1)(t).numpy(), frequency,
                               atol=1e-9)
    v = x[:, :, None] * 2.0 ** (k - 1) + k / 4
    triangle = (4 * np.abs(v - np.floor(v) - 0.5) - 1).reshape(len(x), -1)
    np.testing.assert_allclose(build_encoder({"otype": "TriangleWave", "n_frequencies": 3}, 1)(t).numpy(), triangle,
                               atol=1e-9)
    for scale, s in (("pi", np.pi), ("2pi", 2 * np.pi)):
        angles = x * s * 2.0**k  # [N, F] (d = 1)
        ref = np.concatenate([x, np.stack([np.sin(angles), np.cos(angles)], -1).reshape(len(x), -1)], -1)
        enc = build_encoder({"otype": "NeRF", "n_frequencies": 3, "scale": scale}, 1)
        np.testing.assert_allclose(enc(t).numpy(), ref, atol=1e-9)


def test_float32_huge_inputs_get_the_true_periodic_value():
    """A float32 |x| >= 2^24 is an even integer: sin(2^k pi x) = 0, cos = 1, the triangle wave as at 0."""
    x = torch.tensor([[3e38], [-3e38], [2.0**24], [-1e30]])
    out = build_encoder({"otype": "Frequency", "n_frequencies": 4}, 1)(x)
    assert torch.equal(out[:, 0::2], torch.zeros(4, 4)) and torch.equal(out[:, 1::2], torch.ones(4, 4))
    tri = build_encoder({"otype": "TriangleWave", "n_frequencies": 4}, 1)
    assert torch.equal(tri(x), tri(torch.zeros(1, 1)).expand(4, 4))


def test_fourier_features_equal_the_float64_formula():
    enc = build_encoder({"otype": "RandomFourier", "n_features": 16, "sigma": 3.0}, 2).double()
    x = np.random.default_rng(6).uniform(-10, 10, (50, 2))
    projected = 2 * np.pi * x @ enc.frequencies.numpy().T
    ref = np.concatenate([np.cos(projected), np.sin(projected)], -1)
    np.testing.assert_allclose(enc(torch.from_numpy(x)).numpy(), ref, atol=1e-10)


def test_one_blob_far_outside_is_zero_and_sph_saturates():
    blob = build_encoder({"otype": "OneBlob", "n_bins": 4}, 1)
    for value in (3.0, 4.5, -2.0, -7.0, 1e10, -1e30, 3e38):
        assert torch.equal(blob(torch.tensor([[value]])), torch.zeros(1, 4))
    sh = build_encoder({"otype": "SphericalHarmonics", "degree": 3}, 3)
    bound = (1 + 512) / 2  # |2x - 1| <= 512 in float32
    assert torch.equal(sh(torch.full((1, 3), 1e30)), sh(torch.full((1, 3), bound)))


def test_composite_guards_its_slices_for_tcnn():
    enc = build_encoder({"otype": "Composite", "nested": [
        {"otype": "Frequency", "n_frequencies": 2, "n_dims_to_encode": 1},
        {"otype": "OneBlob", "n_bins": 4, "n_dims_to_encode": 1}, {"otype": "Identity"}]}, 3)
    x = torch.tensor([[1e10 + 1024.5, 1e10, 1e30]])
    expected = torch.tensor([[torch.fmod(x[0, 0], 2.0).item(), 4.0, 1e30]])
    assert torch.equal(enc.guard_input(x, "tcnn"), expected)
    assert enc.guard_input(x, "torch") is x  # on torch each nested encoder guards its own slice


# Fixed buffers: RandomFourier's B is drawn from the config; a state dict of another config must not load silently.

def _rf(sigma=1.0, seed=1337, n_features=8):
    return build_encoder({"otype": "RandomFourier", "n_features": n_features, "sigma": sigma, "seed": seed}, 2)


def test_random_fourier_refuses_weights_of_another_config():
    with pytest.raises(ValueError, match=r"RandomFourier: .*'frequencies'.*sigma.*sigma=1\.0"):
        _rf(sigma=1.0).load_state_dict(_rf(sigma=10.0).state_dict())
    with pytest.raises(ValueError, match=r"RandomFourier: .*seed.*seed=1"):
        _rf(seed=1).load_state_dict(_rf(seed=2).state_dict())
    with pytest.raises(ValueError, match=r"RandomFourier: .*n_features"):
        _rf(n_features=8).load_state_dict(_rf(n_features=4).state_dict(), strict=False)


def test_config_buffers_are_declared_where_state_dicts_hold_them():
    """RandomFourier's B is the one persistent buffer an encoder derives from its config (Progressive's step is
    training state; grid levels and bands are not saved)."""
    declared = {cls.otype: dict(cls.config_buffers) for cls in ENCODERS.values() if cls.config_buffers}
    assert declared == {"RandomFourier": {"frequencies": ("n_features", "sigma", "seed")}}
    for otype, (config, d) in SMALL.items():
        enc = build_encoder(config, d)
        buffers = {name.rpartition(".")[2] for name, _ in enc.named_buffers() if name in enc.state_dict()}
        assert buffers <= {"frequencies", "step"}, (otype, buffers)


def test_random_fourier_loads_its_own_weights():
    x = torch.rand(5, 2)
    source = _rf(sigma=10.0)
    saved = source.state_dict()
    enc = _rf(sigma=10.0)
    result = enc.load_state_dict(saved)
    assert result.missing_keys == result.unexpected_keys == []
    assert torch.equal(enc.frequencies, saved["frequencies"]) and torch.equal(enc(x), source(x))
    wide = _rf(sigma=10.0).double()
    wide.load_state_dict(saved)  # dtype differs, values the same
    assert wide.frequencies.dtype == torch.float64 and torch.equal(wide.frequencies.float(), saved["frequencies"])
    torch.testing.assert_close(wide(x.double()).float(), source(x), rtol=0, atol=1e-5)  # float32's phase rounding
    narrow = _rf(sigma=10.0)
    narrow.load_state_dict(wide.state_dict())
    assert narrow.frequencies.dtype == torch.float32 and torch.equal(narrow.frequencies, saved["frequencies"])
    kept = _rf(sigma=10.0)
    result = kept.load_state_dict({}, strict=False)  # missing: nn.Module's rules (reported, own buffer kept)
    assert result.missing_keys == ["frequencies"] and torch.equal(kept.frequencies, saved["frequencies"])


def test_a_field_holding_random_fourier_loads_by_its_prefix():
    config = {"encoding": {"otype": "RandomFourier", "n_features": 8, "sigma": 10.0}, "network": {"n_neurons": 8}}
    saved = Field(2, 3, config).state_dict()
    Field(2, 3, config).load_state_dict(saved)
    other = {**config, "encoding": {**config["encoding"], "sigma": 1.0}}
    with pytest.raises(ValueError, match=r"'encoder\.frequencies'"):
        Field(2, 3, other).load_state_dict(saved)
    nested = {"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1}, config["encoding"]]}
    composite = build_encoder(nested, 3)
    build_encoder(nested, 3).load_state_dict(composite.state_dict())
    nested["nested"][1] = other["encoding"]
    with pytest.raises(ValueError, match=r"'encoders\.1\.frequencies'"):
        build_encoder(nested, 3).load_state_dict(composite.state_dict())
