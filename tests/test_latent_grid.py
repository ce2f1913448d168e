"""RECOMBINER's LatentGrid and PatchMLP against the paper's layer list, slow float64 formulas and plain MLPs."""

import json
import math

import pytest
import torch
from torch import nn
from torch.func import functional_call

from inr_enc.config import load_config
from inr_enc.encoders.latent_grid import LatentGrid
from inr_enc.networks import MLP
from inr_enc.networks.patch_mlp import PatchMLP

TINY = {"n_latent_channels": 3, "n_hidden_channels": 2, "n_features": 2, "scale_factors": [2, 1, 1], "n_frequencies": 2}



def _randomise(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return module


def _tent_read(feature_map, resolution, point):
    """Slow reference: sum over every pixel of value * prod_i max(0, 1 - |p_i - index_i|), with
    p_i = clamp(x_i * res_i - 0.5, 0, res_i - 1); map axes are the coordinate dims reversed."""
    d = len(resolution)
    pos = [min(max(point[i] * resolution[i] - 0.5, 0.0), resolution[i] - 1.0) for i in range(d)]
    out = torch.zeros(feature_map.shape[0], dtype=torch.float64)
    for flat in range(math.prod(resolution)):
        index = [(flat // math.prod(resolution[:i])) % resolution[i] for i in range(d)]
        weight = math.prod(max(0.0, 1.0 - abs(pos[i] - index[i])) for i in range(d))
        if weight:
            out += weight * feature_map[(slice(None), *reversed(index))]
    return out


def test_upsampler_matches_the_papers_layer_list(one_thread):
    enc = LatentGrid(2, {})
    assert enc.latent.shape == (128, 16, 16) and enc.n_output_dims == 16 + 16
    kinds = [type(layer) for layer in enc.upsampler]
    assert kinds == [nn.Upsample, nn.Conv2d, nn.LeakyReLU, nn.Upsample, nn.Conv2d, nn.LeakyReLU, nn.Upsample, nn.Conv2d]
    ups, convs = enc.upsampler[0::3], enc.upsampler[1::3]
    assert [u.scale_factor for u in ups] == [4, 2, 2] and all(u.mode == "nearest" for u in ups)
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (128, 64, (5, 5), (2, 2)), (64, 64, (3, 3), (1, 1)), (64, 16, (3, 3), (1, 1))]
    assert enc.feature_map().shape == (16, 256, 256)
    # The map from the paper's list written out with torch.nn.functional (an independent path), on a smaller grid.
    enc = LatentGrid(2, {"resolution": [48, 32]})
    convs = enc.upsampler[1::3]
    h = enc.latent.detach()[None].double()
    for i, (conv, scale) in enumerate(zip(convs, (4, 2, 2))):
        h = h.repeat_interleave(scale, dim=2).repeat_interleave(scale, dim=3)
        h = nn.functional.conv2d(h, conv.weight.double(), conv.bias.double(), padding=conv.kernel_size[0] // 2)
        h = nn.functional.leaky_relu(h, 0.01) if i < 2 else h
    feature_map = enc.feature_map(torch.float64)
    assert feature_map.shape == (16, 32, 48)
    torch.testing.assert_close(feature_map, h[0].detach(), rtol=1e-10, atol=1e-12)


def test_default_init_is_seeded():
    a, b, c = LatentGrid(1, {"seed": 3}), LatentGrid(1, {"seed": 3}), LatentGrid(1, {"seed": 4})
    assert a.latent.shape == (128, 3000) and a.config["resolution"] == [48000] and a.n_output_dims == 16 + 16
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.latent, c.latent) and not torch.equal(a.upsampler[1].weight, c.upsampler[1].weight)
    assert a.latent.std().item() == pytest.approx(0.1, rel=0.02)
    for conv in a.upsampler[1::3]:
        bound = 1 / math.sqrt(conv.weight[0].numel())
        assert conv.weight.abs().max() <= bound and conv.weight.abs().max() > 0.9 * bound


@pytest.mark.parametrize("d, resolution", [(2, [12, 8]), (2, [10, 7]), (1, [18])])
def test_pixel_centres_read_the_maps_pixels(d, resolution):
    enc = _randomise(LatentGrid(d, {**TINY, "resolution": resolution, "scale_factors": [2, 1, 2]})).double()
    feature_map = enc.feature_map(torch.float64).detach()
    assert feature_map.shape == (2, *reversed(resolution))  # [10, 7] with downsample 4: [8, 12] cropped to [7, 10]
    centres = torch.cartesian_prod(*[(torch.arange(r, dtype=torch.float64) + 0.5) / r for r in resolution])
    centres = centres.reshape(-1, d)
    out = enc(centres)[:, 2 * d * 2:]
    for point, value in zip(centres.tolist(), out):
        index = [round(point[i] * resolution[i] - 0.5) for i in range(d)]
        torch.testing.assert_close(value, feature_map[(slice(None), *reversed(index))], rtol=0, atol=1e-12)


@pytest.mark.parametrize("d, resolution", [(2, [6, 5]), (1, [9])])
def test_interpolation_matches_slow_tent_formula(d, resolution):
    enc = _randomise(LatentGrid(d, {**TINY, "resolution": resolution})).double()
    feature_map = enc.feature_map(torch.float64).detach()
    x = torch.rand(40, d, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 1.2 - 0.1
    x[:4] = torch.tensor([0.0, 1.0, 0.5 / resolution[0], 1 - 0.25 / resolution[0]], dtype=torch.float64)[:, None]
    out = enc(x)[:, 2 * d * 2:]
    for point, value in zip(x.tolist(), out):
        torch.testing.assert_close(value, _tent_read(feature_map, resolution, point), rtol=0, atol=1e-12)


@pytest.mark.parametrize("d, patches", [(2, None), (2, [4, 2]), (1, [3])])
def test_fourier_features_match_recombiners_formula(d, patches):
    n = 5
    enc = LatentGrid(d, {**TINY, "resolution": 8, "n_frequencies": n, "patches": patches}).double()
    counts = patches or [1] * d
    x = torch.rand(20, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out = enc(x)
    assert out.shape == (20, 2 * d * n + 2)
    for point, row in zip(x.tolist(), out.tolist()):
        local = [point[i] * counts[i] - math.floor(point[i] * counts[i]) for i in range(d)]
        phases = [math.pi * 1024 ** (k / (n - 1)) * (2 * local[i] - 1) for i in range(d) for k in range(n)]
        expected = [math.cos(p) for p in phases] + [math.sin(p) for p in phases]
        assert row[: 2 * d * n] == pytest.approx(expected, abs=1e-9)
    assert LatentGrid(2, {}).config["n_frequencies"] == 4 and LatentGrid(1, {}).config["n_frequencies"] == 8


def test_features_are_continuous_across_patch_borders_while_patch_mlp_jumps():
    config = {"resolution": [64, 64], "n_latent_channels": 8, "n_hidden_channels": 8}
    enc = LatentGrid(2, config).double()
    local = LatentGrid(2, {**config, "patches": [4, 4]}).double()
    net = PatchMLP(enc.n_output_dims, 3, {"patches": [4, 4], "input_map": "none"}).double()
    gaps, jumps = [], []
    for eps in (1e-5, 1e-6, 1e-7):  # the Fourier part's top frequency is 1024 half-periods over [-1, 1]
        x = torch.tensor([[0.25 - eps, 0.4], [0.25 + eps, 0.4]], dtype=torch.float64)  # border of patches 0 and 1
        features = enc(x)
        gaps.append((features[0] - features[1]).abs().max().item())
        assert torch.equal(local(x)[:, -16:], features[:, -16:])  # one stitched latent grid whatever the patches
        out = net(features, x)
        jumps.append((out[0] - out[1]).abs().max().item())
    assert 0 < gaps[0] < 0.5 and gaps[1] < gaps[0] / 5 and gaps[2] < gaps[1] / 5
    assert min(jumps) > 1e-2


def _slow_patch_mlp(net, h, coords, mlp_config):
    """Each sample through a plain MLP holding its patch's weights (patch from a Python loop over cells)."""
    out = []
    for hi, ci in zip(h, coords.tolist()):
        cells = [min(int(c * n), n - 1) for c, n in zip(ci, net.patches)]
        patch = sum(cell * math.prod(net.patches[:i]) for i, cell in enumerate(cells))
        mlp = MLP(net.n_input_dims, net.n_output_dims, mlp_config).double()
        with torch.no_grad():
            for layer_index, layer in enumerate(mlp.layers):
                layer.weight.copy_(getattr(net, f"layers_{layer_index}_weight")[patch])
                layer.bias.copy_(getattr(net, f"layers_{layer_index}_bias")[patch])
        out.append(mlp(hi[None])[0])
    return torch.stack(out)


@pytest.mark.parametrize("patches, d", [([3, 2], 2), (4, 1)])
def test_patch_mlp_routes_each_sample_to_its_patch(patches, d):
    config = {"n_neurons": 6, "n_hidden_layers": 2, "activation": "Sine", "omega_0": 5.0}
    net = PatchMLP(5, 2, {**config, "patches": patches}).double()
    gen = torch.Generator().manual_seed(4)
    coords = torch.rand(30, d, dtype=torch.float64, generator=gen) ** 2  # uneven group sizes
    coords[:3] = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)[:, None]
    h = torch.randn(30, 5, dtype=torch.float64, generator=gen)
    expected = _slow_patch_mlp(net, h, coords, config)
    torch.testing.assert_close(net(h, coords), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(net(h.reshape(5, 6, 5), coords.reshape(5, 6, d)), expected.reshape(5, 6, 2))
    assert net.config["otype"] == "PatchMLP" and net.config["n_neurons"] == 6
    weights = net.layers_0_weight
    assert len({tuple(w.flatten().tolist()) for w in weights}) == weights.shape[0]  # every patch drawn apart
    rebuilt = PatchMLP(5, 2, json.loads(json.dumps(net.config))).double()
    rebuilt.load_state_dict(net.state_dict())
    torch.testing.assert_close(rebuilt(h, coords), expected, rtol=1e-12, atol=1e-12)


def test_patch_mlp_gradient_reaches_only_the_used_patches_weights():
    net = PatchMLP(3, 1, {"patches": [2, 2], "n_neurons": 4, "n_hidden_layers": 1})
    coords = torch.tensor([[0.1, 0.7], [0.3, 0.9]])  # both in patch 0 + 2 * 1 = 2
    net(torch.randn(2, 3), coords).sum().backward()
    norms = net.layers_0_weight.grad.flatten(1).norm(dim=1)
    assert norms[2] > 0 and torch.count_nonzero(norms) == 1


def _gradchecks(module, inputs, extra=(), fast_mode=False):
    """gradcheck and gradgradcheck of module(inputs[0], *extra) w.r.t. inputs[0] and the named parameters in
    inputs[1]."""
    first, params = inputs
    names = list(params)

    def fn(first, *values):
        return functional_call(module, dict(zip(names, values)), (first, *extra))

    args = (first, *params.values())
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6, fast_mode=fast_mode)
    assert torch.autograd.gradgradcheck(fn, args, eps=1e-6, atol=1e-5, fast_mode=fast_mode)


def test_gradcheck_tiny_latent_grid_and_patch_mlp(one_thread):
    enc = _randomise(LatentGrid(2, {**TINY, "resolution": [4, 4]})).double()
    x = (0.05 + 0.9 * torch.rand(3, 2, dtype=torch.float64,
                                 generator=torch.Generator().manual_seed(5))).requires_grad_()
    params = {n: p.detach().clone().requires_grad_() for n, p in enc.named_parameters()}
    _gradchecks(enc, (x, {}))  # full Jacobians w.r.t. x
    _gradchecks(enc, (x, params), fast_mode=True)  # and every parameter, through random projections
    net = PatchMLP(3, 2, {"patches": [2, 2], "n_neurons": 3, "n_hidden_layers": 1, "omega_0": 2.0}).double()
    h = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    coords = torch.rand(6, 2, dtype=torch.float64)
    _gradchecks(net, (h, {n: p.detach().clone().requires_grad_() for n, p in net.named_parameters()}), (coords,))


@pytest.mark.parametrize("config, d, message", [
    ({"resolution": [0, 4]}, 2, "'resolution' must be >= 1, got 0"),
    ({"resolution": [4, 4, 4]}, 2, "'resolution' must have 2 entries"),
    ({"scale_factors": [4, 4]}, 2, "'scale_factors' must list the 3 upsampling factors"),
    ({"scale_factors": [4, 0, 2]}, 2, "'scale_factors' must be >= 1, got 0"),
    ({"n_frequencies": -1}, 2, "'n_frequencies' must be in [0, 64], got -1"),
    ({"n_features": 0}, 2, "'n_features' must be >= 1, got 0"),
    ({"patches": [2, 0]}, 2, "'patches' must be >= 1, got 0"),
    ({"n_latent_channel": 4}, 2, "unknown config key 'n_latent_channel' (did you mean 'n_latent_channels'?)"),
    ({}, 3, "'n_input_dims' must be in [1, 2], got 3"),
])
def test_bad_latent_grid_configs_raise(config, d, message):
    with pytest.raises(ValueError) as info:
        LatentGrid(d, config)
    assert message in str(info.value)


@pytest.mark.parametrize("config, message", [
    ({"patches": [4, 0]}, "'patches' must be >= 1, got 0"),
    ({"patches": []}, "'patches' must list 1 to 3 patch counts"),
    ({"otype": "MLP"}, "'otype' must be PatchMLP"),
    ({"n_neuron": 8}, "unknown config key 'n_neuron'"),
    ({"activation": "Cosine"}, "'activation' must be one of"),
])
def test_bad_patch_mlp_configs_raise(config, message):
    with pytest.raises(ValueError) as info:
        PatchMLP(4, 1, config)
    assert message in str(info.value)


def test_patch_mlp_rejects_mismatched_coords():
    net = PatchMLP(4, 1, {"patches": [2, 2]})
    with pytest.raises(ValueError, match=r"expected h \[\.\.\., 4\] and coords \[\.\.\., 2\]"):
        net(torch.rand(5, 4), torch.rand(5, 1))
    assert net(torch.rand(0, 4), torch.rand(0, 2)).shape == (0, 1)


@pytest.mark.parametrize("name, d", [("recombiner", 2), ("recombiner-patches", 2), ("recombiner-audio", 1)])
def test_bundled_configs_build(name, d):
    config = load_config(name)
    enc = LatentGrid(d, {k: v for k, v in config["encoding"].items() if k != "otype"})
    network = config["network"]
    assert network["input_map"] == "none" and network["n_neurons"] == 32 and network["n_hidden_layers"] == 3
    net = (PatchMLP if network["otype"] == "PatchMLP" else MLP)(enc.n_output_dims, 3 if d == 2 else 1, network)
    x = torch.rand(7, d)
    features = enc(x)
    out = net(features, x) if isinstance(net, PatchMLP) else net(features)
    assert out.shape == (7, 3 if d == 2 else 1) and torch.isfinite(out).all()
    if isinstance(net, PatchMLP):
        assert net.patches == enc.patches
