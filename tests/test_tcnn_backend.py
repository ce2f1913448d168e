"""The tiny-cuda-nn backend: which configs tcnn can run, forced-backend errors, and (with CUDA + tcnn) parity."""

import pytest
import torch
from test_contract import SMALL

from inr_enc import build_encoder
from inr_enc.encoders.tcnn import tcnn_available
from inr_enc.field import Field

# tcnn's own spelling of each SMALL config (DOCUMENTATION.md / encodings/*.h keys), written out by hand.
TCNN_CONFIGS = {
    "Identity": {"otype": "Identity", "scale": 2.0, "offset": 0.5},
    "Frequency": {"otype": "Frequency", "n_frequencies": 3},
    "OneBlob": {"otype": "OneBlob", "n_bins": 4},
    "TriangleWave": {"otype": "TriangleWave", "n_frequencies": 3},
    "SphericalHarmonics": {"otype": "SphericalHarmonics", "degree": 5},
    "Composite": {"otype": "Composite", "reduction": "Concatenation", "nested": [
        {"otype": "HashGrid", "type": "Hash", "n_levels": 2, "n_features_per_level": 2, "log2_hashmap_size": 5,
         "base_resolution": 4, "per_level_scale": 2.0, "interpolation": "Linear", "hash": "CoherentPrime",
         "n_dims_to_encode": 2, "dims_to_encode_begin": 0},
        {"otype": "Frequency", "n_frequencies": 2, "n_dims_to_encode": 1, "dims_to_encode_begin": 2}]},
    "Grid": {"otype": "Grid", "type": "Hash", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6,
             "base_resolution": 3, "per_level_scale": 2.0, "interpolation": "Linear", "hash": "CoherentPrime"},
    "HashGrid": {"otype": "HashGrid", "type": "Hash", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 5,
                 "base_resolution": 4, "per_level_scale": 2.0, "interpolation": "Smoothstep", "hash": "CoherentPrime"},
    "DenseGrid": {"otype": "DenseGrid", "type": "Dense", "n_levels": 2, "n_features_per_level": 2,
                  "log2_hashmap_size": 19,
                  "base_resolution": 3, "per_level_scale": 1.5, "interpolation": "Linear", "hash": "CoherentPrime"},
    "TiledGrid": {"otype": "TiledGrid", "type": "Tiled", "n_levels": 3, "n_features_per_level": 2,
                  "log2_hashmap_size": 19,
                  "base_resolution": 3, "per_level_scale": 2.0, "interpolation": "Linear", "hash": "CoherentPrime"},
    # not tcnn encodings
    "NeRF": None, "RandomFourier": None, "LearnableFourier": None, "Progressive": None, "ShiftedBasis": None,
    "Hybrid": None, "LatentGrid": None,
}


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_tcnn_config_is_tcnns_spelling(otype):
    config, dims = SMALL[otype]
    assert build_encoder(config, dims).tcnn_config() == TCNN_CONFIGS[otype]


@pytest.mark.parametrize("config, dims", [
    ({"otype": "HashGrid"}, 1),  # tcnn's default build compiles 2..4 dim grids only
    ({"otype": "HashGrid"}, 5),
    ({"otype": "HashGrid", "hash": "Prime"}, 3),
    ({"otype": "Composite", "nested": [{"otype": "NeRF", "n_dims_to_encode": 1}, {"otype": "Identity"}]}, 2),
])
def test_configs_tcnn_cannot_run_stay_on_torch(config, dims):
    encoder = build_encoder(config, dims)
    assert encoder.tcnn_config() is None
    with pytest.raises(ValueError, match="no equivalent"):
        build_encoder(config, dims, backend="tcnn")(torch.rand(4, dims))


def test_forcing_tcnn_on_cpu_names_the_reason():
    encoder = build_encoder({"otype": "HashGrid", "n_levels": 2}, 3, backend="tcnn")
    with pytest.raises(ValueError, match="backend 'tcnn' unavailable: .*CUDA"):
        encoder(torch.rand(4, 3))


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="'backend' must be one of auto, torch, cpp, triton, tcnn"):
        build_encoder({"otype": "Frequency"}, 2, backend="cuda")


def test_progressive_hands_the_backend_to_its_nested_encoder():
    encoder = build_encoder({"otype": "Progressive", "nested": {"otype": "HashGrid", "n_levels": 2}}, 3, backend="tcnn")
    assert encoder.backend == "tcnn" and encoder.nested.backend == "tcnn"  # the setting stays what was asked for
    with pytest.raises(ValueError, match="HashGrid: backend 'tcnn' unavailable: .*CUDA"):
        encoder(torch.rand(4, 3))


needs_tcnn = pytest.mark.skipif(not (torch.cuda.is_available() and tcnn_available()),
                                reason="needs CUDA and tinycudann")


@needs_tcnn
@pytest.mark.parametrize("otype", [k for k, v in TCNN_CONFIGS.items() if v is not None])
def test_tcnn_matches_torch_on_the_same_parameters(otype):
    config, dims = SMALL[otype]
    reference = build_encoder(config, dims, backend="torch").cuda()
    with torch.no_grad():
        for p in reference.parameters():
            p.uniform_(-1, 1)
    fast = build_encoder(config, dims, backend="tcnn").cuda()
    fast.load_state_dict(reference.state_dict())
    x_ref = torch.rand(1000, dims, device="cuda", requires_grad=True)
    x_fast = x_ref.detach().clone().requires_grad_()
    expected, got = reference(x_ref), fast(x_fast)
    assert got.dtype == torch.float32 and fast._tcnn_modules
    assert set(fast.state_dict()) == set(reference.state_dict())  # the tcnn module is not part of the model
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    weights = torch.randn_like(expected)
    (expected * weights).sum().backward()
    (got * weights).sum().backward()
    torch.testing.assert_close(x_fast.grad, x_ref.grad, rtol=1e-3, atol=1e-3)
    for p_ref, p_fast in zip(reference.parameters(), fast.parameters()):
        torch.testing.assert_close(p_fast.grad, p_ref.grad, rtol=1e-3, atol=1e-4)


@needs_tcnn
def test_auto_uses_tcnn_for_grids_only():
    grid = build_encoder({"otype": "HashGrid", "n_levels": 2}, 3).cuda()
    frequency = build_encoder({"otype": "Frequency"}, 3).cuda()  # tcnn has no second derivatives for it
    x = torch.rand(64, 3, device="cuda")
    grid(x), frequency(x)
    assert grid._tcnn_modules and not frequency._tcnn_modules


@needs_tcnn
def test_field_uses_tcnn_on_cuda():
    field = Field(3, 1, {"encoding": {"otype": "HashGrid", "n_levels": 4}}).cuda()
    field(torch.rand(256, 3, device="cuda")).sum().backward()
    assert field.encoder._tcnn_modules and field.encoder.params.grad is not None
