"""Grid encodings against tcnn's formulas, evaluated by the slow reference in reference.py."""

import math

import numpy as np
import pytest
import reference
import torch

from inr_enc import build_encoder
from inr_enc.ops.grid.layout import grid_levels


def _with_random_table(encoder, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        encoder.params.copy_(torch.randn(encoder.params.shape, generator=gen))
    return encoder


def _layout_of(encoder):
    cfg = encoder.config
    return reference.level_layout(
        encoder.n_input_dims, cfg["type"], cfg["n_levels"], cfg["log2_hashmap_size"],
        cfg["base_resolution"], cfg["per_level_scale"],
    )


def test_instant_ngp_default_parameter_count():
    # tcnn defaults in 3D: resolutions 16, 32, 64 fit densely (4096, 32768, 262144 entries); the 13 finer
    # levels hold 2^19 entries each; 2 features per entry.
    enc = build_encoder({"otype": "HashGrid"}, 3)
    assert enc.params.numel() == 2 * (16**3 + 32**3 + 64**3 + 13 * 2**19) == 14_229_504
    assert enc.n_output_dims == 32


@pytest.mark.parametrize(
    "otype, n_dims, extra",
    [
        ("HashGrid", 2, {"log2_hashmap_size": 15, "per_level_scale": 1.5}),
        ("HashGrid", 3, {"n_levels": 8, "log2_hashmap_size": 14, "per_level_scale": 1.3819128799677762}),
        ("HashGrid", 1, {"log2_hashmap_size": 6}),
        ("HashGrid", 7, {"n_levels": 3, "base_resolution": 2, "log2_hashmap_size": 12}),
        ("DenseGrid", 2, {"n_levels": 5, "base_resolution": 4}),
        ("DenseGrid", 3, {"n_levels": 4, "base_resolution": 4}),
        ("TiledGrid", 2, {"n_levels": 6, "base_resolution": 8}),
        ("TiledGrid", 4, {"n_levels": 3, "base_resolution": 3}),
    ],
)
def test_layout_matches_tcnn_formulas(otype, n_dims, extra):
    enc = build_encoder({"otype": otype, **extra}, n_dims)
    layout = _layout_of(enc)
    sizes = [size for _, _, size, _ in layout]
    assert enc.params.numel() == sum(sizes) * enc.config["n_features_per_level"]
    assert [lvl.item() for lvl in enc.levels.offset] == [offset for *_, offset in layout]
    if otype != "TiledGrid":  # tiled levels are capped at base_resolution^d after the alignment, as in tcnn
        assert all(size % 8 == 0 for size in sizes)


def test_level_scale_is_computed_in_float32():
    # 16 levels from 16 to 512 (per_level_scale = 2^(5/15)): level 3's scale is 31.000004 in float32, so tcnn
    # gives it 33 vertices per axis; a float64 computation (31.0 exactly) would give 32 and change the layout.
    per_level_scale = math.exp((math.log(512) - math.log(16)) / 15)
    enc = build_encoder({"otype": "DenseGrid", "n_levels": 4, "per_level_scale": per_level_scale}, 2)
    scale, resolution, size, _ = _layout_of(enc)[3]
    assert scale == pytest.approx(31.000004, abs=1e-6) and resolution == 33
    assert math.ceil(16 * per_level_scale**3 - 1) + 1 == 32
    assert enc.levels.scale[3].item() == scale
    assert size == 33 * 33 + 7  # aligned to 8


def test_dense_hash_switch():
    # 2D, T = 2^10: resolution 16 (256 entries) and 32 (1024 entries) index densely; 64 (4096 > 1024) hashes.
    enc = build_encoder({"otype": "HashGrid", "n_levels": 3, "log2_hashmap_size": 10, "base_resolution": 16}, 2)
    assert [size for _, _, size, _ in _layout_of(enc)] == [256, 1024, 1024]
    assert enc.levels.n_dense == 2
    # A point on level 2: entry index = XOR of corner * prime, mod 2^10 (checked with the level-2 reference below).
    _with_random_table(enc)
    x = torch.tensor([[0.3, 0.7]])
    expected = reference.encode_point(x[0].tolist(), enc.params.detach().numpy(), 2, _layout_of(enc), "Hash")
    np.testing.assert_allclose(enc(x)[0].detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_hash_of_a_known_corner():
    # Level 0 of a 2D hash grid whose table is smaller than the dense level: resolution 16, size 8 (T=3).
    # Vertex (3, 5) holds table entry (3 * 1 XOR 5 * 2654435761) mod 8.
    enc = build_encoder({"otype": "HashGrid", "n_levels": 1, "log2_hashmap_size": 3, "n_features_per_level": 1}, 2)
    with torch.no_grad():
        enc.params.copy_(torch.arange(8, dtype=torch.float32))
    expected_entry = ((3 * 1) ^ ((5 * 2654435761) % 2**32)) % 8
    # Vertex k sits at x = (k - 0.5) / scale because of tcnn's 0.5 offset; float32 rounding leaves weight ~1 on it.
    x = torch.tensor([[2.5 / 15, 4.5 / 15]])
    assert enc(x).item() == pytest.approx(float(expected_entry), abs=1e-5)


@pytest.mark.parametrize("interpolation", ["Linear", "Smoothstep", "Nearest"])
@pytest.mark.parametrize(
    "otype, n_dims, extra",
    [
        ("HashGrid", 2, {"n_levels": 6, "log2_hashmap_size": 8, "base_resolution": 4, "per_level_scale": 1.7}),
        ("HashGrid", 3, {"n_levels": 5, "log2_hashmap_size": 9, "base_resolution": 3, "n_features_per_level": 4}),
        ("DenseGrid", 3, {"n_levels": 3, "base_resolution": 3}),
        ("TiledGrid", 2, {"n_levels": 4, "base_resolution": 5, "n_features_per_level": 1}),
        ("HashGrid", 5, {"n_levels": 3, "log2_hashmap_size": 7, "base_resolution": 2}),
    ],
)
def test_encoding_matches_reference(otype, n_dims, extra, interpolation):
    enc = _with_random_table(build_encoder({"otype": otype, "interpolation": interpolation, **extra}, n_dims))
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(40, n_dims, generator=gen)
    x[0] = 0.0
    x[1] = 1.0
    out = enc(x).detach().numpy()
    layout = _layout_of(enc)
    for i in range(x.shape[0]):
        expected = reference.encode_point(
            x[i].tolist(), enc.params.detach().numpy(), enc.config["n_features_per_level"], layout,
            enc.config["type"], interpolation,
        )
        np.testing.assert_allclose(out[i], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("otype", ["HashGrid", "DenseGrid", "TiledGrid"])
def test_inputs_outside_unit_cube_wrap_like_tcnn(otype):
    enc = _with_random_table(build_encoder({"otype": otype, "n_levels": 4, "base_resolution": 4,
                                            "log2_hashmap_size": 6}, 2))
    x = torch.tensor([[-0.3, 1.7], [-5.0, 2.5], [1e6, -1e6], [-3e9, 3e9], [-1e-8, 1.0 + 1e-7]])
    out = enc(x)
    layout = _layout_of(enc)
    for i in range(x.shape[0]):
        expected = reference.encode_point(x[i].tolist(), enc.params.detach().numpy(), 2, layout, enc.config["type"])
        np.testing.assert_allclose(out[i].detach().numpy(), expected, rtol=1e-5, atol=1e-5)


def test_params_layout_is_level_major_feature_minor():
    enc = build_encoder({"otype": "DenseGrid", "n_levels": 2, "base_resolution": 2, "per_level_scale": 2.0}, 1)
    # Level 0: resolution 2, 8 entries (aligned); level 1: scale 3, resolution 4, 8 entries; F = 2.
    assert enc.params.numel() == (8 + 8) * 2
    with torch.no_grad():
        enc.params.zero_()
        enc.params[8 * 2 + 2 * 2 + 1] = 1.0  # level 1, entry 2, feature 1
    # Level 1 position = x * 3 + 0.5; x = 0.5 -> 2.0: entry 2 with weight 1.
    out = enc(torch.tensor([[0.5]]))
    assert out.tolist() == [[0.0, 0.0, 0.0, 1.0]]


@pytest.mark.parametrize("n_features", [1, 2, 4, 8])
@pytest.mark.parametrize("interpolation", ["Linear", "Smoothstep", "Nearest"])
def test_table_gradient_matches_reference(n_features, interpolation):
    config = {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 7, "n_features_per_level": n_features,
              "interpolation": interpolation}
    enc = _with_random_table(build_encoder(config, 3))
    x = torch.rand(64, 3, generator=torch.Generator().manual_seed(2))
    grad_out = torch.randn(64, enc.n_output_dims, generator=torch.Generator().manual_seed(3))
    enc(x).backward(grad_out)
    n_entries = enc.params.numel() // n_features
    expected = reference.table_gradient(x.tolist(), grad_out.numpy(), n_entries, n_features, _layout_of(enc), "Hash",
                                        interpolation)
    np.testing.assert_allclose(enc.params.grad.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_overflowing_inputs_stay_finite():
    # tcnn's x * scale overflows to inf here and its weights become NaN; ours stay finite and in bounds.
    enc = _with_random_table(build_encoder({"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 6}, 2))
    out = enc(torch.tensor([[3e38, -3e38], [-3.4e38, 1e37]]))
    assert torch.isfinite(out).all()
    assert out.abs().max() <= enc.params.abs().max() * 1.0001


def test_layout_uses_the_c_library_float_functions_like_tcnn_host_code():
    # glibc's log2f(13.063945f) is one ulp from the correctly rounded value; with it level 2 has 512 vertices
    # per axis (scale 510.99988), with the correctly rounded value 513 (511.00006). tcnn's host code calls log2f.
    enc = build_encoder({"otype": "DenseGrid", "n_levels": 3, "base_resolution": 3,
                         "per_level_scale": 13.063944816589355}, 3)
    layout = _layout_of(enc)
    assert [s.item() for s in enc.levels.scale] == [scale for scale, *_ in layout]
    assert enc.params.numel() == 2 * sum(size for _, _, size, _ in layout)


@pytest.mark.parametrize("n_levels, base", [(4, 16), (8, 4), (3, 3), (16, 2)])
def test_dense_default_per_level_scale(n_levels, base):
    enc = build_encoder({"otype": "DenseGrid", "n_levels": n_levels, "base_resolution": base}, 2)
    assert enc.config["per_level_scale"] == reference.dense_default_per_level_scale(n_levels, base)
    assert _layout_of(enc)[-1][1] in (256, 257)  # the finest level reaches ~256 vertices per axis


@pytest.mark.parametrize("d, extra", [(2, {"base_resolution": 6, "n_levels": 2, "per_level_scale": 1.5}),
                                      (1, {"base_resolution": 20, "n_levels": 2, "per_level_scale": 1.3})])
def test_negative_inputs_wrap_as_uint32_on_levels_whose_size_does_not_divide_2_32(d, extra):
    enc = _with_random_table(build_encoder({"otype": "DenseGrid", **extra}, d))
    layout = _layout_of(enc)
    assert any(2**32 % size for _, _, size, _ in layout)
    x = -torch.rand(16, d, generator=torch.Generator().manual_seed(5)) * 3
    out = enc(x).detach().numpy()
    for i in range(16):
        expected = reference.encode_point(x[i].tolist(), enc.params.detach().numpy(), 2, layout, "Dense")
        np.testing.assert_allclose(out[i], expected, rtol=1e-5, atol=1e-5)


def test_init_is_tcnn_uniform():
    p = build_encoder({"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 12}, 2).params.detach().double()
    assert p.abs().max() <= 1e-4 and p.min() < -0.99e-4 and p.max() > 0.99e-4
    assert abs(p.mean().item()) < 2e-6 and p.std().item() == pytest.approx(1e-4 / math.sqrt(3), rel=0.02)


def test_row_major_index_at_the_largest_non_overflowing_3d_resolution():
    # tcnn indexes a 3D level row-major up to 0x659 = 1625 vertices per axis; a tiled grid keeps the table small.
    config = {"otype": "TiledGrid", "n_levels": 2, "base_resolution": 2, "per_level_scale": 812.25,
              "n_features_per_level": 1}
    enc = _with_random_table(build_encoder(config, 3))
    layout = _layout_of(enc)
    assert layout[1][1] == 0x659
    x = torch.rand(20, 3, generator=torch.Generator().manual_seed(6))
    out = enc(x).detach().numpy()
    for i in range(20):
        expected = reference.encode_point(x[i].tolist(), enc.params.detach().numpy(), 1, layout, "Tiled")
        np.testing.assert_allclose(out[i], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("args", [(3, "Dense", 2, 19, 1300, 1.0), (2, "Dense", 3, 19, 40000, 1.5),
                                  (3, "Tiled", 2, 19, 1700, 1.0)])
def test_level_size_cap_in_layout(args):
    # 1300^3 and 40000^2 vertices exceed tcnn's 2^31 - 1 entries per level (checked on the layout alone).
    assert [(lvl.resolution, lvl.size, lvl.offset) for lvl in grid_levels(*args)] == [
        (resolution, size, offset) for _, resolution, size, offset in reference.level_layout(*args)
    ]


@pytest.mark.parametrize("n_features", [1, 4, 8])
def test_gradcheck_for_every_feature_width(n_features):
    config = {"otype": "HashGrid", "n_levels": 2, "log2_hashmap_size": 4, "base_resolution": 3,
              "n_features_per_level": n_features}
    enc = _with_random_table(build_encoder(config, 2)).double()
    x = (0.05 + 0.9 * torch.rand(4, 2, dtype=torch.float64,
                                 generator=torch.Generator().manual_seed(1))).requires_grad_()
    params = enc.params.detach().clone().requires_grad_()

    def fn(x, params):
        return torch.func.functional_call(enc, {"params": params}, (x,))

    assert torch.autograd.gradcheck(fn, (x, params), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradgradcheck(fn, (x, params), eps=1e-6, atol=1e-5)
