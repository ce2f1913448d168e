"""tcnn's networks and weight layout (issue 16): PCG32 against O'Neill's published vectors, tcnn's initial weights
against a transcription of its host loop, n_params against tcnn's constructors, params round trips, and forward
passes against slow float64 references that read the flat params as tcnn lays them out."""

import math
import struct

import numpy as np
import pytest
import torch
from reference import encode_point, level_layout

from inr_enc import load_tcnn_params, tcnn_n_params, tcnn_params
from inr_enc.encoders import build_encoder
from inr_enc.field import Field
from inr_enc.networks import MLP, TcnnMLP, build_network
from inr_enc.networks.tcnn_mlp import tcnn_input_columns
from inr_enc.ops.pcg32 import Pcg32

M64 = (1 << 64) - 1


class SlowPcg32:
    """pcg32.h transcribed with Python integers, one number at a time."""

    def __init__(self, initstate, initseq=1):
        self.state, self.inc = 0, ((initseq << 1) | 1) & M64
        self.next_uint()
        self.state = (self.state + initstate) & M64
        self.next_uint()

    def next_uint(self):
        old = self.state
        self.state = (old * 0x5851F42D4C957F2D + self.inc) & M64
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF

    def next_float(self):
        return struct.unpack("<f", struct.pack("<I", (self.next_uint() >> 9) | 0x3F800000))[0] - 1.0


def test_pcg32_gives_the_published_pcg32_demo_outputs():
    rng = Pcg32(42, 54)  # pcg32-demo: pcg32_srandom_r(&rng, 42u, 54u), rounds 1 and 5
    assert [hex(v) for v in rng.next_uints(6)] == ["0xa15c02b7", "0x7b47f409", "0xba1d3330", "0x83d2f293",
                                                   "0xbfa4784b", "0xcbed606e"]
    rng.next_uints(614)
    assert [hex(v) for v in rng.next_uints(6)] == ["0xfcef7cd6", "0x1b488b5a", "0xd0daf7ea", "0x1d9a70f7",
                                                   "0x241a37cf", "0x9a3857b7"]


def test_pcg32_draws_in_blocks_as_one_at_a_time():
    fast, slow = Pcg32(1337), SlowPcg32(1337)
    drawn = np.concatenate([fast.next_floats(n) for n in (1, 1000, 3, 2049)])
    assert drawn.tolist() == [slow.next_float() for _ in range(len(drawn))]


def slow_tcnn_init(seed, shapes, sine=False):
    """tcnn's initialize_params (gpu_matrix.h): per matrix, float32 scale, values rnd*2*scale - scale in float32."""
    rng, f32, matrices = SlowPcg32(seed), np.float32, []
    for i, (rows, cols) in enumerate(shapes):
        if sine:
            scale = f32(30) / f32(cols) if i == 0 else np.sqrt(f32(6) / f32(cols))
        else:
            scale = np.sqrt(f32(6) / f32(rows + cols))
        matrices.append(np.array([f32(f32(rng.next_float()) * f32(2) * scale - scale) for _ in range(rows * cols)],
                                 dtype=np.float32).reshape(rows, cols))
    return matrices


@pytest.mark.parametrize("otype, n_in, n_out, neurons, hidden, activation", [
    ("FullyFusedMLP", 3, 5, 16, 2, "ReLU"),
    ("CutlassMLP", 32, 1, 32, 1, "Sine"),
    ("CutlassMLP", 7, 20, 24, 0, "Tanh"),
])
def test_initial_weights_are_tcnns_bit_for_bit(otype, n_in, n_out, neurons, hidden, activation):
    config = {"otype": otype, "n_neurons": neurons, "n_hidden_layers": hidden, "activation": activation, "seed": 42}
    net = TcnnMLP(n_in, n_out, config)
    pad_in, pad_out = -(-n_in // 16) * 16, -(-n_out // 16) * 16
    widths = [pad_in] + [neurons] * hidden + [pad_out]
    expected = slow_tcnn_init(42, list(zip(widths[1:], widths[:-1])), sine=activation == "Sine")
    assert [tuple(layer.weight.shape) for layer in net.layers] == [m.shape for m in expected]
    for layer, matrix in zip(net.layers, expected):
        assert np.array_equal(layer.weight.detach().numpy(), matrix)


def grid_params(n_dims, config):
    layout = level_layout(n_dims, "Hash", config["n_levels"], config["log2_hashmap_size"], config["base_resolution"],
                          config["per_level_scale"])
    return layout, (layout[-1][3] + layout[-1][2]) * config["n_features_per_level"]


GRID = {"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 8, "base_resolution": 4,
        "per_level_scale": 2.0}


@pytest.mark.parametrize("otype, neurons, hidden", [("FullyFusedMLP", 64, 2), ("CutlassMLP", 40, 3),
                                                   ("CutlassMLP", 8, 0)])
@pytest.mark.parametrize("encoding, n_encoded", [({"otype": "Identity"}, 3),
                                                 ({"otype": "Frequency", "n_frequencies": 6}, 36),
                                                 (GRID, 6)])
def test_n_params_equals_tcnns_for_every_network_otype(otype, neurons, hidden, encoding, n_encoded):
    # tcnn's constructors: [W, pad16(in)], (hidden - 1) x [W, W], [pad16(out), W]; no hidden layer:
    # [pad16(out), pad16(in)]
    n_out = 3
    pad_in, pad_out = -(-n_encoded // 16) * 16, -(-n_out // 16) * 16
    network = (pad_out * pad_in if hidden == 0
               else neurons * pad_in + (hidden - 1) * neurons * neurons + pad_out * neurons)
    encoding_params = grid_params(3, GRID)[1] if encoding is GRID else 0
    field = Field(3, n_out, {"encoding": encoding,
                             "network": {"otype": otype, "n_neurons": neurons, "n_hidden_layers": hidden}})
    assert tcnn_n_params(field.network) == network
    assert tcnn_n_params(field.encoder) == encoding_params
    assert tcnn_n_params(field) == network + encoding_params
    assert TcnnMLP.parameter_count(n_encoded, n_out, field.network.config, field.encoder.spec) == network


def test_padded_inputs_hold_the_constants_tcnns_encodings_write():
    # network_with_input_encoding.h and composite.h: pad to 16; Identity/Frequency/OneBlob/SH/TriangleWave write 1,
    # grids 0; a Composite pads each nested output to the next one's alignment (a grid's: n_features_per_level)
    spec = build_encoder({"otype": "Composite", "nested": [
        {"otype": "Identity", "n_dims_to_encode": 1},
        {**GRID, "n_features_per_level": 4, "n_levels": 2}]}, 3).spec
    assert tcnn_input_columns(12, spec) == [None] + [1.0] * 3 + [None] * 8 + [0.0] * 4
    # tcnn's Composite output would be 12 wide here (3 padded dims), inr_enc's is 9: the tcnn backend is not offered
    # for it
    assert build_encoder(spec.config, 3).tcnn_config() is None
    assert tcnn_input_columns(5, None) == [None] * 5 + [1.0] * 11
    # SphericalHarmonics writes its padding first (spherical_harmonics.h kernel_sh)
    assert (tcnn_input_columns(9, build_encoder({"otype": "SphericalHarmonics", "degree": 3}, 3).spec)
            == [1.0] * 7 + [None] * 9)
    assert tcnn_input_columns(6, build_encoder(GRID, 3).spec) == [None] * 6 + [0.0] * 10
    summed = build_encoder({"otype": "Composite", "reduction": "Sum", "nested": [
        {"otype": "Identity", "n_dims_to_encode": 2}, {"otype": "Frequency", "n_frequencies": 1}]}, 3).spec
    assert tcnn_input_columns(2, summed) == [None] * 2 + [2.0] * 14
    mixed = {"otype": "Composite", "reduction": "Sum", "nested": [  # SH's ones would add to Identity's values
        {"otype": "SphericalHarmonics", "degree": 3, "n_dims_to_encode": 3}, {"otype": "Identity"}]}
    with pytest.raises(ValueError, match="tcnn would reduce padded dims with values here"):
        Field(12, 1, {"encoding": mixed, "network": {"otype": "CutlassMLP", "n_neurons": 8, "n_hidden_layers": 1}})


def field_configs():
    return [
        ({"encoding": GRID, "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 2,
                                        "output_activation": "Sigmoid"}}, 3),
        ({"encoding": {"otype": "Frequency", "n_frequencies": 2},
          "network": {"otype": "CutlassMLP", "n_neurons": 12, "n_hidden_layers": 1, "activation": "Softplus"}}, 2),
        ({"encoding": {"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": 1}, GRID]},
          "network": {"otype": "CutlassMLP", "n_neurons": 8, "n_hidden_layers": 2, "activation": "Squareplus"}}, 3),
    ]


@pytest.mark.parametrize("config, n_dims", field_configs())
def test_params_round_trip_bit_for_bit(config, n_dims):
    field = Field(n_dims, 4, config)
    # the documented order, stated here: each network matrix row-major, then the encoding's table
    expected = [layer.weight.detach().reshape(-1) for layer in field.network.layers]
    expected += [field.encoder.params.detach()] if hasattr(field.encoder, "params") else [
        p.detach().reshape(-1) for p in field.encoder.parameters()]
    assert torch.equal(tcnn_params(field), torch.cat(expected))
    values = torch.randn(tcnn_n_params(field), dtype=torch.float32)
    values[::7] = torch.tensor([float("inf"), -0.0, 1e-45, 3.4e38])[torch.arange(len(values[::7])) % 4]
    load_tcnn_params(field, values)
    back = tcnn_params(field)
    assert torch.equal(back.view(torch.int32), values.view(torch.int32))
    other = Field(n_dims, 4, config)  # and into a fresh module: the same outputs
    load_tcnn_params(other, tcnn_params(field))
    x = torch.rand(9, n_dims)
    assert torch.equal(torch.nan_to_num(other(x)), torch.nan_to_num(field(x)))


TCNN_ACTIVATIONS = {  # common_device.h warp_activation, in float64
    "ReLU": lambda z: np.maximum(z, 0), "None": lambda z: z, "Sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "Softplus": lambda z: np.log(np.exp(10 * z) + 1) / 10,
    "Squareplus": lambda z: 0.5 * (10 * z + np.sqrt(100 * z * z + 4)) / 10,
    "SiLU": lambda z: z / (1 + np.exp(-z)), "LeakyReLU": lambda z: np.where(z > 0, z, 0.01 * z),
    "Sine": np.sin, "Tanh": np.tanh, "Exponential": np.exp,
}


def slow_network(params, padded_input, neurons, hidden, n_out, activation, output_activation):
    """tcnn's MLP on one padded input, reading row-major matrices from the flat params in order."""
    widths = [len(padded_input)] + [neurons] * hidden + [-(-n_out // 16) * 16]
    h, offset = np.asarray(padded_input, dtype=np.float64), 0
    for i, (cols, rows) in enumerate(zip(widths[:-1], widths[1:])):
        out = np.array([sum(params[offset + r * cols + c] * h[c] for c in range(cols)) for r in range(rows)])
        offset += rows * cols
        h = TCNN_ACTIVATIONS[activation if i < hidden else output_activation](out)
    return h[:n_out], offset


SH3 = ({"encoding": {"otype": "SphericalHarmonics", "degree": 3},
        "network": {"otype": "CutlassMLP", "n_neurons": 8, "n_hidden_layers": 1, "activation": "Tanh"}}, 3)


@pytest.mark.parametrize("config, n_dims", [*field_configs()[:2], SH3])
def test_a_field_computes_what_tcnns_layout_says(config, n_dims):
    # NetworkWithInputEncoding: network params first, then the encoding's; the encoding's output padded as tcnn pads
    field = Field(n_dims, 4, config).double()
    params = torch.randn(tcnn_n_params(field), dtype=torch.float64) * 0.5
    load_tcnn_params(field, params)
    net = field.network.config
    x = torch.rand(5, n_dims, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    got = field(x).detach().numpy()
    flat = params.numpy()
    for point, row in zip(x.numpy(), got):
        if config["encoding"] is GRID:
            n_net = tcnn_n_params(field.network)
            layout, _ = grid_params(n_dims, GRID)
            encoded = encode_point(point.astype(np.float32), flat[n_net:], 2, layout, "Hash")
            padded = list(encoded) + [0.0] * (16 - len(encoded))
        elif config["encoding"]["otype"] == "SphericalHarmonics":  # its values (tested elsewhere) after 7 ones
            padded = [1.0] * 7 + field.encoder(torch.tensor(point[None])).reshape(-1).tolist()
        else:  # Frequency (tcnn's): sin(2^l pi x), then cos, per dim; padded with 1
            encoded = [math.sin(2 ** level * math.pi * xi + shift) for xi in point for level in range(2)
                       for shift in (0, math.pi / 2)]
            padded = encoded + [1.0] * (16 - len(encoded))
        expected, n_net = slow_network(flat, padded, net["n_neurons"], net["n_hidden_layers"], 4, net["activation"],
                                       net["output_activation"])
        assert n_net == tcnn_n_params(field.network)
        # the grid interpolates with float32 weights (tcnn's arithmetic): ~1e-7 of each feature, summed over the
        # first layer's 16 inputs; the other encodings are float64 throughout
        tolerance = 1e-5 if config["encoding"] is GRID else 1e-9
        np.testing.assert_allclose(row, expected, rtol=tolerance, atol=tolerance)


def test_every_tcnn_activation_as_tcnn_computes_it():
    for activation, formula in TCNN_ACTIVATIONS.items():
        net = build_network(2, {"otype": "CutlassMLP", "n_neurons": 4, "n_hidden_layers": 1, "activation": activation,
                                "output_activation": activation}, build_encoder({"otype": "Identity"}, 3)).double()
        x = torch.rand(3, 3, dtype=torch.float64) * 2 - 1
        expected = [slow_network(tcnn_params(net).double().numpy(), list(p) + [1.0] * 13, 4, 1, 2, activation,
                                 activation)[0] for p in x.numpy()]
        np.testing.assert_allclose(net(x).detach().numpy(), expected, rtol=1e-9, atol=1e-12, err_msg=activation)


def test_padded_outputs_and_zero_padded_inputs_get_no_gradient():
    field = Field(3, 2, {"encoding": GRID,
                         "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1}})
    field(torch.rand(64, 3)).sum().backward()
    first, last = (layer.weight.grad for layer in field.network.layers)
    assert torch.all(first[:, 6:] == 0) and torch.all(last[2:] == 0)
    assert torch.all(first[:, :6].abs().sum(0) > 0) and torch.all(last[:2].abs().sum(1) > 0)


def test_inr_enc_mlp_and_bad_params_are_refused():
    with pytest.raises(ValueError,
                       match="tcnn has no layout for a MLP network; tcnn's networks are otype FullyFusedMLP"):
        tcnn_params(MLP(3, 2, {}))
    field = Field(3, 2, {"encoding": GRID,
                         "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1}})
    with pytest.raises(ValueError, match=f"expected a flat float array of {tcnn_n_params(field)} values"):
        load_tcnn_params(field, torch.zeros(tcnn_n_params(field) - 1))
    with pytest.raises(ValueError, match="tcnn has no layout for a RandomFourier encoding"):
        tcnn_params(build_encoder({"otype": "RandomFourier"}, 2))


@pytest.mark.parametrize("network, message", [
    ({"otype": "FullyFusedMLP", "n_neurons": 20}, "FullyFusedMLP takes 16, 32, 64 or 128 'n_neurons'"),
    ({"otype": "FullyFusedMLP", "n_hidden_layers": 0}, "'n_hidden_layers' must be"),
    ({"otype": "CutlassMLP", "activation": "SPDER"}, "'activation' must be one of None, ReLU"),
    ({"otype": "FullyFusedMLP", "activation": "Sine"}, "tcnn's FullyFusedMLP has no Sine hidden activation"),
])
def test_tcnn_network_configs_are_checked(network, message):
    with pytest.raises(ValueError, match=message):
        Field(2, 1, {"network": network})


def test_tcnn_defaults_and_names_as_tcnn_reads_them():
    net = build_network(1, {"otype": "megakernelmlp", "activation": "relu"}, build_encoder({"otype": "Identity"}, 2))
    assert isinstance(net, TcnnMLP)
    assert net.config == {"otype": "FullyFusedMLP", "n_neurons": 128, "n_hidden_layers": 5, "activation": "ReLU",
                          "output_activation": "None", "seed": 1337}
    # a config naming inr_enc MLP's keys under a tcnn otype (what inr_enc wrote before 0.2.0) builds that MLP
    legacy = build_network(1, {"otype": "FullyFusedMLP", "bias": True}, build_encoder({"otype": "Identity"}, 2))
    assert type(legacy) is MLP and legacy.layers[0].bias is not None
