"""MLP activations and initialisations against SIREN's and SPDER's formulas; the Field config."""

import math

import pytest
import torch

from inr_enc.field import Field
from inr_enc.networks import MLP, spder, spder_arctan


def test_siren_initialisation_bounds():
    mlp = MLP(2, 3, {"activation": "Sine", "n_neurons": 256, "n_hidden_layers": 3, "omega_0": 30.0})
    first, hidden = mlp.layers[0].weight, mlp.layers[1].weight
    assert first.abs().max() <= 1 / 2 and first.abs().max() > 0.95 / 2  # U(+-1/fan_in), fan_in = 2
    bound = math.sqrt(6 / 256) / 30
    assert hidden.abs().max() <= bound and hidden.abs().max() > 0.95 * bound
    assert hidden.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)


def test_sine_forward_is_sin_of_scaled_preactivation_on_signed_inputs():
    mlp = MLP(2, 1, {"activation": "Sine", "n_neurons": 4, "n_hidden_layers": 1, "first_omega_0": 3000.0}).double()
    x = torch.rand(5, 2, dtype=torch.float64)
    w0, b0, w1, b1 = (p.detach() for p in mlp.parameters())
    expected = torch.sin(3000.0 * ((2 * x - 1) @ w0.T + b0)) @ w1.T + b1
    torch.testing.assert_close(mlp(x), expected)
    assert mlp.config["input_map"] == "signed" and mlp.config["first_omega_0"] == 3000.0


def test_relu_mlp_with_tcnn_keys():
    mlp = MLP(3, 2, {"otype": "CutlassMLP", "n_neurons": 8, "n_hidden_layers": 2, "activation": "ReLU",
                     "output_activation": "Sigmoid"}).double()
    x = torch.rand(4, 3, dtype=torch.float64)
    (w0, b0), (w1, b1), (w2, b2) = ((layer.weight, layer.bias) for layer in mlp.layers)
    h = torch.relu(x @ w0.T + b0)
    h = torch.relu(h @ w1.T + b1)
    torch.testing.assert_close(mlp(x), torch.sigmoid(h @ w2.T + b2))
    assert mlp.config["input_map"] == "none" and len(mlp.layers) == 3


def test_spder_values_and_derivatives():
    z = torch.tensor([-2.0, -0.3, 0.0, 1e-8, 0.7, 4.0], dtype=torch.float64, requires_grad=True)
    y = spder(z)
    torch.testing.assert_close(y, torch.sin(z) * torch.sqrt(z.abs()).detach().clamp(min=1e-6), atol=1e-9, rtol=0)
    (first,) = torch.autograd.grad(y.sum(), z, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), z)
    assert torch.isfinite(first).all() and torch.isfinite(second).all()
    # Away from 0: d/dz sin(z) sqrt|z| = cos(z) sqrt|z| + sin(z) sign(z) / (2 sqrt|z|).
    zz = z.detach()[[0, 1, 4, 5]]
    exact = torch.cos(zz) * zz.abs().sqrt() + torch.sin(zz) * zz.sign() / (2 * zz.abs().sqrt())
    torch.testing.assert_close(first.detach()[[0, 1, 4, 5]], exact)
    assert abs(first[2].item()) <= 1e-6  # the exact derivative at 0 is 0


def test_spder_arctan_variant_is_selected_by_key():
    mlp = MLP(1, 1, {"activation": "SPDER", "spder_variant": "arctan", "n_neurons": 4, "n_hidden_layers": 1}).double()
    x = torch.rand(6, 1, dtype=torch.float64)
    w0, b0, w1, b1 = (p.detach() for p in mlp.parameters())
    torch.testing.assert_close(mlp(x), spder_arctan(30.0 * ((2 * x - 1) @ w0.T + b0)) @ w1.T + b1)
    z = torch.linspace(-3, 3, 7, dtype=torch.float64)
    torch.testing.assert_close(spder_arctan(z), torch.sin(z) * torch.atan(z))


@pytest.mark.parametrize("config, message", [
    ({"activation": "Swish"}, "'activation' must be one of"),
    ({"n_neuron": 3}, "unknown config key 'n_neuron' (did you mean 'n_neurons'?)"),
    ({"activation": "ReLU", "omega_0": 10.0}, "apply to Sine and SPDER, not ReLU"),
    ({"activation": "Sine", "spder_variant": "arctan"}, "'spder_variant' applies to SPDER"),
    ({"otype": "Transformer"}, "'otype' must be one of MLP, FullyFusedMLP, CutlassMLP"),
])
def test_bad_network_configs(config, message):
    with pytest.raises(ValueError) as info:
        MLP(2, 1, config)
    assert message in str(info.value)


def test_field_composes_encoder_and_network():
    field = Field(2, 3, {"encoding": {"otype": "Frequency", "n_frequencies": 2}, "network": {"n_neurons": 8}})
    x = torch.rand(5, 2)
    torch.testing.assert_close(field(x), field.network(field.encoder(x)))
    assert field.network.n_input_dims == 8 and field.config["encoding"]["otype"] == "Frequency"
    rebuilt = Field(2, 3, field.config)
    rebuilt.load_state_dict(field.state_dict())
    assert torch.equal(rebuilt(x), field(x))
    with pytest.raises(ValueError, match="unknown config key 'encoder'"):
        Field(2, 3, {"encoder": {}})


def test_inference_in_row_chunks_gives_the_batched_numbers():
    from inr_enc.networks.base import INFERENCE_ROWS

    for activation in ("ReLU", "Sine"):
        config = {"n_neurons": 32, "n_hidden_layers": 2, "activation": activation, "output_activation": "Sigmoid"}
        net = MLP(5, 3, config)
        x = torch.rand(2 * INFERENCE_ROWS + 17, 5)
        with torch.enable_grad():  # one pass over every row (with autograd, never chunked)
            whole = net(x).detach()
        with torch.no_grad():
            chunked = net(x)
        # the same arithmetic per row; BLAS may block a matmul differently for another row count (last bits)
        torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-7)
