"""The run-config schema (field/schema.py): a whole run is checked before anything is built, resolving a config
allocates nothing, and what it resolves is exactly what the built encoders and networks report."""

import pytest
from test_contract import SMALL

from inr_enc import ENCODERS, build_encoder
from inr_enc.encoders import encoder_spec
from inr_enc.field import Field
from inr_enc.field.schema import resolve_field, resolve_run, resolve_training

TASK = {"kind": "image", "path": "photo.png", "train_split": False}


def run_of(config, **options):
    return resolve_run(config, TASK, 2, 3, [64, 48], **options)


@pytest.mark.parametrize("otype", sorted(SMALL))
def test_resolving_agrees_with_the_built_encoder(otype):
    config, d = SMALL[otype]
    spec, encoder = encoder_spec(config, d), build_encoder(config, d)
    bands = encoder.output_bands()
    assert spec.config == encoder.config and spec.n_output_dims == encoder.n_output_dims
    assert spec.n_bands == (None if bands is None else int(bands.max()) + 1)
    assert encoder_spec(spec.config, d) == spec  # a resolved config resolves to itself


@pytest.mark.parametrize("encoding, network", [
    ({"otype": "NeRF", "n_frequencies": 4}, {"otype": "PINs", "n_levels": 2, "n_neurons": 8}),
    ({"otype": "LatentGrid", "resolution": [8, 8], "n_latent_channels": 2, "n_hidden_channels": 2, "n_features": 2},
     {"otype": "PatchMLP", "patches": [2, 2], "n_neurons": 4}),
    ({"otype": "ShiftedBasis", "n_bases": 4}, {"otype": "Separable"}),
    (None, {"otype": "cutlassmlp", "n_neurons": 8, "activation": "Sine"}),
])
def test_resolving_a_field_agrees_with_the_built_field(encoding, network):
    config = {"encoding": encoding, "network": network}
    assert resolve_field(config, 2, 3) == Field(2, 3, config).config


def test_resolving_allocates_nothing():
    # built, each of these would need tens of GB to TB; resolved, they are dicts
    huge = [{"otype": "RandomFourier", "n_features": 10**10},
            {"otype": "LatentGrid", "resolution": [10**6, 10**6]},
            {"otype": "ShiftedBasis", "n_bases": 2**21}]
    for encoding in huge:
        field = resolve_field({"encoding": encoding, "network": {"n_neurons": 10**6}}, 2, 3)
        assert field["encoding"]["otype"] == encoding["otype"] and field["network"]["n_neurons"] == 10**6
        with pytest.raises(ValueError, match=r"^run: parameters, a training step.* need .* more than"):
            run_of({"encoding": encoding, "network": {"n_neurons": 10**6}})  # the run's memory estimate refuses


def test_a_run_resolves_every_section_and_fills_seeds():
    run = run_of({"encoding": {"otype": "Composite", "nested": [{"otype": "RandomFourier", "n_dims_to_encode": 1},
                                                                {"otype": "LatentGrid"}]}},
                 seed=5, training={"steps": 7}, config_name="mine")
    assert run["seed"] == 5 and run["config_name"] == "mine" and run["task"] == TASK
    nested = run["encoding"]["nested"]
    assert nested[0]["seed"] == 5 and nested[1]["seed"] == 5
    assert nested[1]["resolution"] == [48000]  # nested: its own default; only the top encoding follows the signal
    assert run["network"]["otype"] == "MLP" and run["network"]["seed"] == 5
    assert run["training"] == resolve_training({"steps": 7})
    sized = run_of({"encoding": {"otype": "LatentGrid"}})
    assert sized["encoding"]["resolution"] == [64, 48]  # the signal's size, where left null


def test_seeds_take_torch_generators_whole_range():
    largest = 2**64 - 1  # torch.Generator.manual_seed accepts it
    run = run_of({"encoding": {"otype": "RandomFourier"}}, seed=largest)
    assert run["seed"] == largest and run["encoding"]["seed"] == largest and run["network"]["seed"] == largest
    with pytest.raises(ValueError, match=r"config: 'seed' must be in \[0, 18446744073709551615\]"):
        run_of({}, seed=2**64)


@pytest.mark.parametrize("config, message", [
    ({"network": True}, "'network' must be a mapping"),
    ({"training": 5}, "'training' must be a mapping"),
    ({"encoding": "x"}, "'encoding' must be a mapping"),
    ({"encodings": {}}, "unknown config key 'encodings' (did you mean 'encoding'?)"),
    ({"seed": 2**70}, "'seed' must be in [0, 18446744073709551615]"),
    ({"seed": -1}, "'seed' must be in [0, "),
    ({"training": {"betas": [5, 7]}}, "'betas' must both be in [0, 1)"),
    ({"training": {"lr": float("nan")}}, "'lr' must be a finite number"),
    ({"training": {"solver": "closed-form"}}, "needs network otype Separable"),
    ({"encoding": {"otype": "HashGrid", "n_levels": 0}}, "HashGrid: 'n_levels' must be in [1, 128]"),
    ({"network": {"otype": "PINs"}}, "PINs: needs an encoding with frequency bands"),
    ({"network": {"otype": "Sparse"}}, "unknown network otype 'Sparse'"),
    ({"encoding": {"otype": "Hybrid", "coarse": "Dense", "split_level": 4, "base_resolution": 2**20,
                   "per_level_scale": 1.0,
                   "n_levels": 8}}, "Hybrid: needs"),  # the coarse dense table beyond tcnn's uint32 offsets
])
def test_bad_run_configs_name_the_section_and_key(config, message):
    with pytest.raises(ValueError) as info:
        run_of(config)
    assert message in str(info.value)


def test_a_saved_run_resolves_to_itself():
    run = run_of({"encoding": {"otype": "HashGrid", "n_levels": 2}, "training": {"steps": 3}}, config_name="x")
    assert resolve_run(run, run["task"], 2, 3, [64, 48], saved=True) == run
    with pytest.raises(ValueError, match="unknown config key 'task'"):
        run_of(run)  # a config file has no task section


def test_every_registered_encoding_resolves_without_building(monkeypatch):
    def no_build(self, config):
        raise AssertionError("built")

    for cls in ENCODERS.values():
        monkeypatch.setattr(cls, "_build", no_build)
    for otype, (config, d) in SMALL.items():
        assert encoder_spec(config, d).config["otype"] == ENCODERS[otype].otype
    with pytest.raises(AssertionError, match="built"):
        build_encoder({"otype": "Identity"}, 2)
