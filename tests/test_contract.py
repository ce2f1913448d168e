"""The contract every encoder keeps: shapes, dtypes, derivatives, config round trip, clear errors."""

import json

import pytest
import torch
from torch.func import functional_call

from inr_enc import ENCODERS, NETWORKS, build_encoder, load_config
from inr_enc.config import available_configs
from inr_enc.field import build_field
from inr_enc.field.schema import resolve_training

# One small config per otype, with its input dims, sized for gradcheck in float64.
SMALL = {
    "Identity": ({"otype": "Identity", "scale": 2.0, "offset": 0.5}, 3),
    "Frequency": ({"otype": "Frequency", "n_frequencies": 3}, 2),
    "OneBlob": ({"otype": "OneBlob", "n_bins": 4}, 2),
    "TriangleWave": ({"otype": "TriangleWave", "n_frequencies": 3}, 2),
    "SphericalHarmonics": ({"otype": "SphericalHarmonics", "degree": 5}, 3),
    "Composite": ({"otype": "Composite", "nested": [
        {"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 5, "base_resolution": 4, "n_dims_to_encode": 2},
        {"otype": "Frequency", "n_frequencies": 2}]}, 3),
    "Grid": ({"otype": "Grid", "type": "Hash", "n_levels": 3, "log2_hashmap_size": 6, "base_resolution": 3}, 3),
    "HashGrid": ({"otype": "HashGrid", "n_levels": 3, "log2_hashmap_size": 5, "base_resolution": 4,
                  "interpolation": "Smoothstep"}, 2),
    "DenseGrid": ({"otype": "DenseGrid", "n_levels": 2, "base_resolution": 3, "per_level_scale": 1.5}, 2),
    "TiledGrid": ({"otype": "TiledGrid", "n_levels": 3, "base_resolution": 3}, 3),
    "NeRF": ({"otype": "NeRF", "n_frequencies": 3}, 3),
    "RandomFourier": ({"otype": "RandomFourier", "n_features": 8, "sigma": 2.0}, 2),
    "LearnableFourier": ({"otype": "LearnableFourier", "n_features": 6, "n_hidden": 4, "n_output": 3, "sigma": 1.0}, 2),
    "ShiftedBasis": ({"otype": "ShiftedBasis", "n_bases": 6, "basis": "gaussian", "width": 0.2, "axes": "diagonal"}, 2),
    "Hybrid": ({"otype": "Hybrid", "n_levels": 3, "split_level": 1, "log2_hashmap_size": 5, "base_resolution": 3,
                "n_frequencies": 2}, 2),
    "LatentGrid": ({"otype": "LatentGrid", "resolution": [4, 4], "n_latent_channels": 2, "n_hidden_channels": 2,
                    "n_features": 2, "scale_factors": [2, 1, 1], "n_frequencies": 1}, 2),
    "Progressive": ({"otype": "Progressive", "nested": {"otype": "NeRF", "n_frequencies": 3}, "end_step": 0}, 2),
}


def test_every_registered_otype_is_covered():
    assert set(SMALL) == set(ENCODERS)


@pytest.mark.parametrize("registry", [ENCODERS, NETWORKS], ids=["encodings", "networks"])
def test_every_registered_class_names_its_source(registry):
    """Each class states its own one-line ``source`` (paper with year, or tcnn file), which docs/reference.md shows;
    an inherited one does not count (a subclass such as HashGrid names its own)."""
    def own_source(cls):
        source = vars(cls).get("source")
        return isinstance(source, str) and source.strip() and "\n" not in source

    assert [otype for otype, cls in registry.items() if not own_source(cls)] == []


def _randomised(encoder):
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in encoder.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return encoder


SLOW_GRADCHECKS = {"LatentGrid"}  # its conv upsampler's second derivatives: minutes on 2 cores


@pytest.mark.parametrize("otype", [pytest.param(otype, marks=pytest.mark.slow) if otype in SLOW_GRADCHECKS else otype
                                   for otype in sorted(SMALL)])
def test_gradcheck_and_gradgradcheck(otype):
    config, d = SMALL[otype]
    enc = _randomised(build_encoder(config, d)).double()
    x = (0.05 + 0.9 * torch.rand(5, d, dtype=torch.float64,
                                 generator=torch.Generator().manual_seed(1))).requires_grad_()
    names = [n for n, _ in enc.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in enc.named_parameters()]

    def fn(x, *params):
        return functional_call(enc, dict(zip(names, params)), (x,))

    assert torch.autograd.gradcheck(fn, (x, *params), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradgradcheck(fn, (x, *params), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_shapes_and_dtypes(otype):
    config, d = SMALL[otype]
    enc = build_encoder(config, d)
    x = torch.rand(2, 3, d)
    out = enc(x)
    assert out.shape == (2, 3, enc.n_output_dims) and out.dtype == torch.float32
    assert enc(x.half()).dtype == torch.float32
    assert enc(x.bfloat16()).dtype == torch.float32
    assert enc(torch.rand(d)).shape == (enc.n_output_dims,)
    assert enc(torch.rand(0, d)).shape == (0, enc.n_output_dims)
    enc64 = build_encoder(config, d).double()
    assert enc64(x.double()).dtype == torch.float64
    torch.testing.assert_close(enc64(x.double()).float(), enc(x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_config_round_trip(otype):
    config, d = SMALL[otype]
    enc = _randomised(build_encoder(config, d))
    resolved = json.loads(json.dumps(enc.config))  # the resolved config is plain JSON
    rebuilt = build_encoder(resolved, d)
    rebuilt.load_state_dict(enc.state_dict())
    x = torch.rand(17, d)
    assert torch.equal(rebuilt(x), enc(x))
    assert rebuilt.config == enc.config


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_first_derivative_wrt_input_is_finite(otype):
    config, d = SMALL[otype]
    enc = build_encoder(config, d)
    x = torch.rand(4, d, requires_grad=True)
    (grad,) = torch.autograd.grad(enc(x).sum(), x)
    assert grad.shape == x.shape and torch.isfinite(grad).all()


def test_seeded_init_repeats():
    a = build_encoder({"otype": "HashGrid", "n_levels": 2, "seed": 7}, 2)
    b = build_encoder({"otype": "HashGrid", "n_levels": 2, "seed": 7}, 2)
    c = build_encoder({"otype": "HashGrid", "n_levels": 2, "seed": 8}, 2)
    assert torch.equal(a.params, b.params) and not torch.equal(a.params, c.params)
    assert a.params.abs().max() <= 1e-4


BAD_CONFIGS = [
    ({"otype": "HashGrids"}, 3, "unknown encoding otype 'HashGrids'; valid otypes: Composite"),
    ({"n_levels": 4}, 3, "unknown encoding otype None"),
    ({"otype": "HashGrid", "n_level": 4}, 3, "unknown config key 'n_level' (did you mean 'n_levels'?)"),
    ({"otype": "HashGrid", "n_features_per_level": 3}, 3, "'n_features_per_level' must be 1, 2, 4 or 8"),
    ({"otype": "HashGrid", "n_levels": 0}, 3, "'n_levels' must be in [1, 128], got 0"),
    ({"otype": "HashGrid", "per_level_scale": 0.5}, 3, "'per_level_scale' must be >= 1.0"),
    ({"otype": "HashGrid", "interpolation": "Cubic"}, 3, "'interpolation' must be one of Linear, Nearest, Smoothstep"),
    ({"otype": "HashGrid"}, 8, "'n_input_dims' must be in [1, 7], got 8"),
    ({"otype": "HashGrid", "log2_hashmap_size": "19"}, 3, "'log2_hashmap_size' must be an integer"),
    ({"otype": "DenseGrid", "n_levels": 16, "per_level_scale": 2.0}, 3, "tcnn's uint32 offsets allow at most"),
    ({"otype": "SphericalHarmonics"}, 2, "n_input_dims must be 3, got 2"),
    ({"otype": "SphericalHarmonics", "degree": 9}, 3, "'degree' must be in [1, 8], got 9"),
    ({"otype": "OneBlob", "n_bins": 12}, 1, "'n_bins' must be a power of 2"),
    ({"otype": "Frequency", "n_frequencies": 0}, 1, "'n_frequencies' must be in [1, 64], got 0"),
    ({"otype": "NeRF", "scale": "tau"}, 1, "'scale' must be one of pi, 2pi, 1"),
    ({"otype": "RandomFourier", "sigma": -1.0}, 2, "'sigma' must be >= 0.0"),
    ({"otype": "LearnableFourier", "n_features": 7}, 2, "'n_features' (cos and sin halves) must be even"),
    ({"otype": "Composite", "nested": []}, 2, "'nested' must be a non-empty list"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 3}]}, 2,
     "take 3 dims, more than the 2"),
    ({"otype": "Composite", "nested": [{"otype": "Identity"}, {"otype": "Frequency"}]}, 2,
     "for a single nested encoding"),
    ({"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1, "bogus": 1}]}, 2,
     "unknown config key 'bogus'"),
    ({"otype": "Composite", "reduction": "Sum",
      "nested": [{"otype": "Identity", "n_dims_to_encode": 1}, {"otype": "Frequency"}]},
     2, "needs nested encodings of equal width"),
]


@pytest.mark.parametrize("config, d, message", BAD_CONFIGS)
def test_bad_configs_raise_specific_value_errors(config, d, message):
    with pytest.raises(ValueError) as info:
        build_encoder(config, d)
    assert message in str(info.value)


def test_unknown_key_lists_valid_keys():
    with pytest.raises(ValueError,
                       match="valid keys: base_resolution, fixed_point_pos, hash, interpolation, log2_hashmap_size"):
        build_encoder({"otype": "HashGrid", "levels": 4}, 3)


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_bad_inputs_raise_specific_value_errors(otype):
    config, d = SMALL[otype]
    enc = build_encoder(config, d)
    with pytest.raises(ValueError, match=rf"input must have shape \[\.\.\., {d}\], got \[4, {d + 1}\]"):
        enc(torch.rand(4, d + 1))
    with pytest.raises(ValueError, match="input must be floating point, got dtype torch.int64"):
        enc(torch.ones(4, d, dtype=torch.long))
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.rand(4, d)
        x[2, 0] = bad
        with pytest.raises(ValueError, match="input contains NaN or inf"):
            enc(x)
    with pytest.raises(ValueError, match="input must be a torch.Tensor"):
        enc([[0.5] * d])


def test_otype_is_case_insensitive_like_tcnn():
    assert build_encoder({"otype": "hashgrid", "n_levels": 2}, 2).config["otype"] == "HashGrid"


@pytest.mark.parametrize("name", available_configs())
def test_every_bundled_config_builds_a_field(name):
    config = load_config(name)
    n_input_dims = 1 if name.endswith("audio") else 2
    field = build_field(n_input_dims, 3, {"encoding": config["encoding"], "network": config["network"]})
    assert field(torch.rand(4, n_input_dims)).shape == (4, 3)
    assert set(config) <= {"encoding", "network", "training", "seed"}
    resolve_training(config.get("training"))


def test_load_config_errors(tmp_path):
    with pytest.raises(ValueError, match="no config file or named config 'nope'"):
        load_config("nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_config(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="a config must be a mapping"):
        load_config(listed)
