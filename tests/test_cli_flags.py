"""inr-fit's flags (--set overrides, `inr-fit configs`, --version, --help stating every default) and the provenance
every run records."""

import json
import platform

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import yaml
from runs import TINY, write_tiny_config

from inr_enc import __version__
from inr_enc.cli import HELP_DEFAULTS, build_parser
from inr_enc.cli import main as inr_fit
from inr_enc.config.files import apply_overrides, available_configs, load_config
from inr_enc.field.schema import TRAINING_DEFAULTS


@pytest.fixture
def tiny(tmp_path):
    config = write_tiny_config(tmp_path, steps=4)
    image = tmp_path / "img.png"
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8))
    return config, image


def test_overrides_reach_nested_keys_with_yaml_types():
    config = apply_overrides(TINY, ["encoding.n_frequencies=5", "training.lr=1e-3", "training.betas=[0.9, 0.99]",
                                    "network.otype=MLP", "seed=7", "training.lazy_tables=false"])
    assert config["encoding"]["n_frequencies"] == 5 and config["training"]["lr"] == 1e-3
    assert isinstance(config["training"]["lr"], float) and config["training"]["betas"] == [0.9, 0.99]
    assert config["network"]["otype"] == "MLP" and config["seed"] == 7 and config["training"]["lazy_tables"] is False
    assert TINY["encoding"]["n_frequencies"] == 3  # a copy
    assert apply_overrides({}, ["network.n_neurons=8"]) == {"network": {"n_neurons": 8}}
    for bad, message in (("encoding", "expected KEY=VALUE"), ("encoding..x=1", "expected KEY=VALUE"),
                         ("encoding.otype.x=1", "encoding.otype is a value"), ("seed=[1", "not a YAML value")):
        with pytest.raises(ValueError, match=message):
            apply_overrides(TINY, [bad])


@pytest.mark.slow
def test_set_changes_the_run_and_a_misspelt_key_exits_2(tmp_path, tiny, capsys):
    config, image = tiny
    out = tmp_path / "run"
    assert inr_fit(["image", str(image), "--config", str(config), "--out", str(out), "--quiet",
                    "--set", "encoding.n_frequencies=2", "network.n_neurons=32"]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["encoding"]["n_frequencies"] == 2 and saved["network"]["n_neurons"] == 32
    assert inr_fit(["image", str(image), "--config", str(config), "--out", str(tmp_path / "bad"), "--quiet",
                    "--set", "encoding.n_frequences=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown config key 'n_frequences'" in err[0] and "did you mean 'n_frequencies'" in err[0]
    assert not (tmp_path / "bad").exists()
    assert inr_fit(["image", "--resume", str(out), "--set", "seed=3"]) == 2
    assert "drop --set" in capsys.readouterr().err


def test_configs_lists_every_named_config_with_its_source(capsys):
    assert inr_fit(["configs"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == available_configs()
    by_name = {line.split()[0]: line for line in lines}
    assert "tiny-cuda-nn" in by_name["hashgrid"] and "Sitzmann" in by_name["siren-audio"]
    assert all(len(line) < 180 for line in lines)
    for name in available_configs():  # the listed ones load
        load_config(name)


def test_version_and_help_state_the_defaults(capsys):
    with pytest.raises(SystemExit) as exit_:
        inr_fit(["--version"])
    assert exit_.value.code == 0 and __version__ in capsys.readouterr().out
    parser = build_parser()
    for action in parser._actions:
        if action.option_strings and action.dest not in ("help", "version"):
            assert "default" in (action.help or ""), action.option_strings
    for key, value in HELP_DEFAULTS.items():  # what --help says is what the schema fills in
        assert value == TRAINING_DEFAULTS[key] or (key == "batch_size" and TRAINING_DEFAULTS[key] is None)


def test_metrics_and_config_record_what_ran(tmp_path, tiny):
    _, image = tiny
    out, config = tmp_path / "run", tmp_path / "grid.yaml"
    grid = {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 10, "base_resolution": 4, "per_level_scale": 1.5}
    config.write_text(yaml.safe_dump({**yaml.safe_load(write_tiny_config(tmp_path, steps=4).read_text()),
                                      "encoding": grid}))
    assert inr_fit(["image", str(image), "--config", str(config), "--out", str(out), "--quiet", "--device", "cpu"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    saved = yaml.safe_load((out / "config.yaml").read_text())
    expected = {"device": "cpu", "threads": torch.get_num_threads(), "inr_enc": __version__,
                "torch": torch.__version__, "python": platform.python_version()}
    for record in (metrics["provenance"], saved["provenance"]):
        assert {k: record[k] for k in expected} == expected
        assert record["encoders"] == {"encoder": "cpp"}  # the C++ grid kernel, on a CPU input
    assert inr_fit(["image", "--resume", str(out), "--steps", "6", "--quiet"]) == 0  # a saved run with provenance
    assert json.loads((out / "metrics.json").read_text())["steps"] == 6
