"""A seeded fuzzer over every named config: a mutated run config either resolves (and then its Field builds and
evaluates) or raises a one-line ValueError naming the section and key; never TypeError, OverflowError, a torch
error or a huge allocation. Plus the cases it found, and config/memory.py."""

import random

import pytest
import torch
from fuzz import FIRST_SEED, NAMED, NAMES, mutate
from test_contract import SMALL

from inr_enc import build_encoder
from inr_enc.config import memory
from inr_enc.encoders import RandomFourier, encoder_spec
from inr_enc.field import Field
from inr_enc.field.schema import estimate_run_memory, resolve_field, resolve_run, resolve_training
from inr_enc.networks import MLP

TASK = {"kind": "image", "path": "photo.png", "train_split": False}
LIMIT = 2 * 2**30  # every build in this file stays below it
N_CASES = 400  # mutated configs


@pytest.fixture(autouse=True)
def low_memory_limit():
    memory.set_memory_limit(LIMIT)
    yield
    memory.set_memory_limit(None)


def signal_of(name):
    """(n_input_dims, n_output_dims, coordinate_shape) of a small signal for this named config."""
    return (1, 1, [64]) if "audio" in name else (2, 3, [16, 16])


def check_outcome(name, config, done):
    """A resolved run builds and evaluates; anything else is a one-line ValueError naming a section and key."""
    n_in, n_out, shape = signal_of(name)
    context = f"config {name!r} mutated by {done}: {config!r}"[:2000]
    try:
        run = resolve_run(config, TASK, n_in, n_out, shape)
    except ValueError as error:
        message = str(error)
        assert message and "\n" not in message and ":" in message, f"unclear message {message!r} for {context}"
        return "refused"
    except Exception as error:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{type(error).__name__}: {error} for {context}")
    try:
        field = Field(n_in, n_out, {"encoding": run["encoding"], "network": run["network"]}, backend="torch")
        out = field(torch.rand(5, n_in, generator=torch.Generator().manual_seed(0)))
    except Exception as error:  # noqa: BLE001
        pytest.fail(f"resolved, then {type(error).__name__}: {error} building or evaluating {context}")
    assert out.shape == (5, n_out), context
    return "built"


@pytest.mark.parametrize("seed", range(N_CASES))
def test_a_mutated_named_config_resolves_or_raises_a_value_error(seed):
    rng = random.Random(FIRST_SEED + seed)
    name = rng.choice(NAMES)
    config, done = mutate(rng, NAMED[name])
    check_outcome(name, config, [f"seed {seed}", *done])


def test_the_mutations_reach_the_checks_and_leave_some_configs_valid():
    outcomes = set()
    for seed in range(0, N_CASES, 10):
        rng = random.Random(FIRST_SEED + seed)
        name = rng.choice(NAMES)
        config, done = mutate(rng, NAMED[name])
        outcomes.add(check_outcome(name, config, [f"seed {seed}", *done]))
    assert outcomes == {"refused", "built"}


def run_of(config, **options):
    return resolve_run(config, TASK, 2, 3, [16, 16], **options)


@pytest.mark.parametrize("config, message", [
    ({"network": {"n_neurons": 1e19}}, "network: 'n_neurons' must be at most 9223372036854775807 (int64), got 1e+19"),
    ({"network": {"n_hidden_layers": 2**64}}, "network: 'n_hidden_layers' must be in [0, 1024]"),
    ({"network": {"n_neurons": float("nan")}}, "network: 'n_neurons' must be an integer, got nan"),
    ({"network": {"n_neurons": float("inf")}}, "network: 'n_neurons' must be an integer, got inf"),
    ({"network": {"n_neurons": [64]}}, "network: 'n_neurons' must be an integer, got [64]"),
    ({"network": {"n_neurons": 10**6}},
     "run: parameters, a training step, evaluation and the signal (parameters 14.6 TiB"),
    ({"network": True}, "config: 'network' must be a mapping"),
    ({"training": 5}, "config: 'training' must be a mapping"),
    ({"encoding": "x"}, "config: 'encoding' must be a mapping"),
    ({"training": {"lr": 1e300}}, "training: 'lr' must be in (0, 10], got 1e+300"),
    ({"training": {"eps": 1e300}}, "training: 'eps' must be in [0, 1], got 1e+300"),
    ({"training": {"ridge": float("inf")}}, "training: 'ridge' must be a finite number, got inf"),
    ({"training": {"betas": [0.9, "x"]}}, "training: 'betas' must be a finite number, got 'x'"),
    ({"encoding": {"otype": "Hybrid", "per_level_scale": 1.7e6}}, "Hybrid: the finest level's resolution"),
    ({"encoding": {"otype": "HashGrid", "base_resolution": 2**40}}, "HashGrid: the finest level's resolution"),
    ({"encoding": {"otype": "DenseGrid", "n_levels": 128, "per_level_scale": 2.0}}, "DenseGrid: the finest level's"),
    ({"encoding": {"otype": "HashGrid", "n_levels": 16, "log2_hashmap_size": 28, "n_features_per_level": 8}},
     "run: parameters, a training step"),
    ({"encoding": {"otype": "RandomFourier", "n_features": 1e10}}, "run: parameters, a training step"),
    ({"encoding": {"otype": "RandomFourier", "sigma": 1e300}}, "RandomFourier: 'sigma' must be in [0, 100000]"),
    ({"encoding": {"otype": "Identity", "scale": 1e300}}, "Identity: 'scale' must be in [-1e+06, 1e+06]"),
    ({"encoding": {"otype": "ShiftedBasis", "n_bases": 1e9}}, "ShiftedBasis: 'n_bases' must be at most 2097152"),
    ({"encoding": {"otype": "ShiftedBasis", "width": 1e-300}}, "ShiftedBasis: 'width' must be at least 1e-09"),
    ({"encoding": {"otype": "LatentGrid", "resolution": [1e6, 1e6]}}, "run: parameters, a training step"),
    ({"encoding": {"otype": "LatentGrid", "scale_factors": [2**20, 1, 1]}}, "run: parameters, a training step"),
    ({"encoding": {"otype": "Composite", "nested": [5, {"otype": "Identity"}]}},
     "Composite: 'nested' entry 0 must be an encoding config (a mapping), got int 5"),
    ({"encoding": {"otype": "Progressive", "nested": [{"otype": "NeRF"}]}},
     "Progressive: 'nested' must be the config (a mapping) of the encoder to schedule, got list"),
    ({"network": {"otype": "PatchMLP", "patches": [1000, 1000]}},
     "network: 'patches' [1000, 1000] make 1000000 patches"),
    ({"network": {"omega_0": 1e300, "activation": "Sine"}}, "network: 'omega_0' must be in (0, 100000]"),
])
def test_the_fuzzers_findings_are_value_errors_naming_the_key(config, message):
    with pytest.raises(ValueError) as info:
        run_of(config)
    assert message in str(info.value)


def test_the_memory_estimate_refuses_and_max_memory_lifts_it():
    config = {"encoding": {"otype": "Frequency", "n_frequencies": 4}, "network": {"n_neurons": 512}}
    parts = estimate_run_memory(resolve_field(config, 2, 3) | {"training": resolve_training({})}, 2, 3, 256)
    width = 2 + 16 + 2 * 512 + 3  # coordinates, encoding, hidden layers, output
    assert parts == {"parameters": 4 * 4 * (17 * 512 + 513 * 512 + 513 * 3), "training step": 4 * 3 * 256 * width,
                     "evaluation": 4 * 256 * width, "signal": 4 * 256 * (2 + 2 * 3)}
    with pytest.raises(ValueError,
                       match=r"^run: .* together need 8.3 MiB, more than the limit 8.0 MiB; pass --max-mem"):
        run_of(config, max_memory=8 * 2**20)
    assert run_of(config, max_memory=memory.parse_bytes("8G"))["network"]["n_neurons"] == 512
    with pytest.raises(ValueError, match="more than the memory limit 2.0 GiB"):  # set_memory_limit's, by default
        run_of({**config, "network": {"n_neurons": 2**14}})


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_encoder_parameter_counts_match_the_built_encoder(otype):
    config, d = SMALL[otype]
    assert_count_matches(build_encoder(config, d), encoder_spec(config, d))


@pytest.mark.parametrize("config, d", [
    ({"otype": "Hybrid", "n_levels": 4, "split_level": 2, "coarse": "Dense", "log2_hashmap_size": 6,
      "base_resolution": 3}, 3),
    ({"otype": "Hybrid", "n_levels": 3, "split_level": 3, "log2_hashmap_size": 6}, 2),
    ({"otype": "LatentGrid", "resolution": [37], "n_latent_channels": 3, "n_hidden_channels": 2, "n_features": 2}, 1),
    ({"otype": "Progressive", "nested": {"otype": "HashGrid", "n_levels": 3, "log2_hashmap_size": 7}}, 2),
    ({"otype": "Composite", "nested": [{"otype": "LatentGrid", "resolution": [9], "n_dims_to_encode": 1,
                                        "n_latent_channels": 2, "n_hidden_channels": 2, "n_features": 2},
                                       {"otype": "RandomFourier", "n_features": 5}]}, 3),
])
def test_more_encoder_parameter_counts(config, d):
    assert_count_matches(build_encoder(config, d), encoder_spec(config, d))


@pytest.mark.parametrize("encoding, network, d", [
    ({"otype": "Identity"}, {"n_neurons": 7, "n_hidden_layers": 3}, 2),
    ({"otype": "Frequency", "n_frequencies": 2}, {"n_neurons": 5, "bias": False}, 2),
    ({"otype": "NeRF", "n_frequencies": 5}, {"otype": "PINs", "n_levels": 3, "n_neurons": 6, "n_hidden_layers": 2}, 3),
    ({"otype": "NeRF", "n_frequencies": 5, "include_input": False}, {"otype": "PINs", "n_levels": 2, "n_neurons": 4},
     2),
    ({"otype": "Progressive", "nested": {"otype": "NeRF", "n_frequencies": 4}}, {"otype": "PINs", "n_levels": 4}, 1),
    ({"otype": "HashGrid", "n_levels": 5, "log2_hashmap_size": 6}, {"otype": "PINs", "n_levels": 3, "n_neurons": 3}, 2),
    ({"otype": "TriangleWave", "n_frequencies": 7}, {"otype": "PINs", "n_levels": 3, "n_neurons": 3}, 2),
    ({"otype": "Identity"}, {"otype": "PatchMLP", "patches": [3, 2], "n_neurons": 4, "n_hidden_layers": 1}, 2),
    ({"otype": "ShiftedBasis", "n_bases": 5}, {"otype": "Separable"}, 2),
])
def test_network_parameter_counts_match_the_built_network(encoding, network, d):
    field = Field(d, 3, {"encoding": encoding, "network": network})
    spec = field.encoder.spec
    count = type(field.network).parameter_count(spec.n_output_dims, 3, field.network.config, spec)
    assert count == module_elements(field.network)


def module_elements(module):
    return sum(p.numel() for p in module.parameters()) + sum(b.numel() for b in module.buffers())


def assert_count_matches(encoder, spec):
    assert spec.cls.parameter_count(spec.n_input_dims, spec.config) == module_elements(encoder), encoder.config


def test_builds_refuse_before_allocating(monkeypatch):
    monkeypatch.setattr(RandomFourier, "_build", lambda self, config: pytest.fail("allocated"))
    with pytest.raises(ValueError, match=r"^RandomFourier: parameters and batch-independent activations need 74.5 GiB, "
                                         r"more than the memory limit 2.0 GiB"):
        build_encoder({"otype": "RandomFourier", "n_features": 10**10}, 2)
    with pytest.raises(ValueError, match=r"^LatentGrid: parameters and batch-independent activations need"):
        build_encoder({"otype": "LatentGrid", "resolution": [64], "scale_factors": [2**24, 1, 1]}, 1)
    with pytest.raises(ValueError, match=r"^MLP: parameters need 3.6 TiB"):
        MLP(2, 1, {"n_neurons": 10**6})


@pytest.mark.parametrize("text, nbytes", [("8G", 8 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29),
                                          ("2TB", 2 * 2**40),
                                          ("1024", 1024), (" 64 k ", 65536), ("1e9", 10**9), (4096, 4096)])
def test_parse_bytes(text, nbytes):
    assert memory.parse_bytes(text) == nbytes


@pytest.mark.parametrize("text", ["", "G", "abc", "-1G", "0", "8X", "1.5.5G", "inf", "nanG", True, None, 2.5, "9e30"])
def test_parse_bytes_refuses(text):
    with pytest.raises(ValueError, match="memory size must be"):
        memory.parse_bytes(text)


def test_memory_limit_default_env_and_override(monkeypatch):
    memory.set_memory_limit(None)
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    monkeypatch.setattr(memory, "_read_text", lambda path: None)  # no cgroup; test_memory_limits.py fakes them
    monkeypatch.setattr(memory.resource, "getrlimit", lambda which: (memory.resource.RLIM_INFINITY,) * 2)
    assert memory.memory_limit() == memory.physical_memory() > 0
    with pytest.raises(ValueError, match=r"^HashGrid: parameters need 3.0 TiB, more than this machine's .* GiB; "
                                         r"pass --max-memory"):
        memory.check_memory("HashGrid: parameters", 3 * 2**40)
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    assert memory.memory_limit() == 2**20
    with pytest.raises(ValueError, match=r"more than the memory limit \(INR_ENC_MAX_MEMORY\) 1.0 MiB"):
        memory.check_memory("x: y", 2**21)
    memory.check_memory("x: y", 2**21, limit=2**22)  # an explicit limit wins
    memory.set_memory_limit("4M")
    assert memory.memory_limit() == 4 * 2**20
    monkeypatch.setenv(memory.ENV_VAR, "lots")
    memory.set_memory_limit(None)
    with pytest.raises(ValueError, match="^INR_ENC_MAX_MEMORY: memory size must be"):
        memory.memory_limit()
