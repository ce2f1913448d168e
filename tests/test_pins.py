"""PINs hierarchical network: level k reads only bands of levels <= k, levels accumulate, schedule."""

import pytest
import torch

from inr_enc.field import Field


def pins_field(n_levels=3, **network):
    # Frequency with 6 frequencies on 2 dims: output j has band (j // 2) mod 6 (tcnn's layout)
    config = {"encoding": {"otype": "Frequency", "n_frequencies": 6},
              "network": {"otype": "PINs", "n_levels": n_levels, "n_neurons": 16, "n_hidden_layers": 2, **network}}
    return Field(2, 3, config).double()


def reference_level(j: int, n_levels: int = 3, n_bands: int = 6) -> int:
    band = (j // 2) % n_bands
    return band * n_levels // n_bands  # bands {0,1} -> 0, {2,3} -> 1, {4,5} -> 2


@pytest.mark.parametrize("level", [0, 1, 2])
def test_level_k_reads_only_bands_of_levels_up_to_k(level):
    field = pins_field()
    encoded = field.encoder(torch.rand(20, 2, dtype=torch.float64))
    # [3, 20, 24]
    jacobian = torch.autograd.functional.jacobian(lambda h: field.network(h, level=level).sum(0), encoded)
    used = jacobian.abs().sum(dim=(0, 1)) > 0
    for j in range(24):
        assert bool(used[j]) == (reference_level(j) <= level), j


def test_levels_accumulate_residuals():
    field = pins_field()
    h = field.encoder(torch.rand(10, 2, dtype=torch.float64))
    net = field.network
    # level 1 = level 0 + head_1(body_1([level-0/1 inputs, hidden_0])): recompute by hand from the parts
    in0 = h[:, [j for j in range(24) if reference_level(j) == 0]]
    in1 = h[:, [j for j in range(24) if reference_level(j) <= 1]]
    hidden0 = net.bodies[0](in0)
    expected = net.heads[0](hidden0) + net.heads[1](net.bodies[1](torch.cat([in1, hidden0], -1)))
    assert torch.allclose(net(h, level=1), expected, atol=1e-12)


def test_coarse_levels_use_a_smaller_network():
    field = pins_field()
    field(torch.rand(5, 2, dtype=torch.float64), level=0).sum().backward()
    used = {".".join(name.split(".")[:2]) for name, p in field.network.named_parameters() if p.grad is not None}
    assert used == {"bodies.0", "heads.0"}


@pytest.mark.parametrize("window", ["hard", "cosine"])
def test_schedule_switches_levels_on(window):
    field = pins_field(window=window, start_step=0, end_step=100)
    x = torch.rand(8, 2, dtype=torch.float64)
    field.network.set_step(0)
    assert torch.equal(field(x), field(x, level=0))
    field.network.set_step(100)
    assert torch.allclose(field(x), field(x, level=2), atol=1e-12)
    field.network.set_step(50)  # alpha = 1: levels 0 and 1 fully on, level 2 off
    assert torch.allclose(field(x), field(x, level=1), atol=1e-12)


@pytest.mark.parametrize("config, match", [
    ({"encoding": {"otype": "RandomFourier", "n_features": 4}, "network": {"otype": "PINs"}}, "frequency bands"),
    ({"encoding": {"otype": "Frequency", "n_frequencies": 2}, "network": {"otype": "PINs", "n_levels": 3}}, "n_levels"),
    ({"encoding": {"otype": "Frequency"}, "network": {"otype": "PINs", "activation": "Sine"}}, "non-periodic"),
    ({"encoding": {"otype": "Frequency"}, "network": {"otype": "PINS", "n_neuron": 3}}, "n_neurons"),
    ({"encoding": {"otype": "Frequency"}, "network": {"otype": "Transformer"}},
     "unknown network otype .Transformer.; valid otypes: CutlassMLP"),
])
def test_bad_configs(config, match):
    with pytest.raises(ValueError, match=match):
        Field(2, 1, config)


def test_level_on_a_plain_mlp_or_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match="no levels"):
        Field(2, 1, {"encoding": {"otype": "Frequency"}})(torch.rand(3, 2), level=0)
    with pytest.raises(ValueError, match=r"level must be an int in \[0, 2\]"):
        pins_field()(torch.rand(3, 2, dtype=torch.float64), level=3)
