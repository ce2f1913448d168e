"""tiny-cuda-nn's and Instant-NGP's config files as they are: grid keys (n_features, stochastic_interpolation,
fixed_point_pos), the loss and optimizer sections (tcnn's formulas: losses, ExponentialDecay, Ema, Adam's l2_reg),
and their sample configs run through inr-fit. References are written here from tcnn's sources, independently
of inr_enc's code."""

import copy
import json
import math

import numpy as np
import pytest
import torch
import yaml

from inr_enc import Field, build_encoder
from inr_enc.cli import main as inr_fit
from inr_enc.field.schema import resolve_training
from inr_enc.field.tcnn_sections import training_from_tcnn
from inr_enc.optim.ema import WeightEma
from inr_enc.optim.losses import elementwise_loss
from inr_enc.optim.schedule import lr_factor
from inr_enc.optim.setup import make_optimizer

# tiny-cuda-nn data/config_hash.json and data/config_oneblob.json, and Instant-NGP configs/nerf/base.json (its
# image-fitting parts: the NeRF-only sections go to ns-train), retyped as data.
CONFIG_HASH = {
    "loss": {"otype": "RelativeL2"},
    "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15,
                  "l2_reg": 1e-6},
    "encoding": {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
                 "base_resolution": 16, "per_level_scale": 1.5, "fixed_point_pos": False},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 2},
}
CONFIG_ONEBLOB = {
    "loss": {"otype": "RelativeL2"},
    "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8, "l2_reg": 1e-8},
    "encoding": {"otype": "OneBlob", "n_bins": 64},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 128,
                "n_hidden_layers": 5},
}
NGP_BASE = {
    "loss": {"otype": "Huber"},
    "optimizer": {"otype": "Ema", "decay": 0.95, "nested": {
        "otype": "ExponentialDecay", "decay_start": 20000, "decay_interval": 10000, "decay_base": 0.33, "nested": {
            "otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15, "l2_reg": 1e-6}}},
    "encoding": {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 4, "log2_hashmap_size": 19,
                 "base_resolution": 16},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 1},
}


@pytest.mark.parametrize("name,config,expected", [
    ("config_hash", CONFIG_HASH,
     {"loss": "RelativeL2", "lr": 0.01, "betas": [0.9, 0.99], "eps": 1e-15, "l2_reg": 1e-6}),
    ("config_oneblob", CONFIG_ONEBLOB,
     {"loss": "RelativeL2", "lr": 0.01, "betas": [0.9, 0.99], "eps": 1e-8, "l2_reg": 1e-8}),
    ("ngp_base", NGP_BASE, {"loss": "Huber", "ema_decay": 0.95, "schedule": "exponential", "decay_start": 20000,
                            "decay_interval": 10000, "decay_base": 0.33, "decay_end": 10000000, "lr": 0.01}),
])
def test_sample_configs_run_through_inr_fit_as_they_are(tmp_path, name, config, expected):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config, indent="\t"))  # a JSON file, as tcnn's and Instant-NGP's are
    out = tmp_path / "out"
    image = tmp_path / "image.png"
    import imageio.v3 as iio
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    assert inr_fit(["image", str(image), "--config", str(path), "--steps", "3", "--eval-every", "3", "--quiet",
                    "--pictures", "none", "--out", str(out)]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert "loss" not in saved and "optimizer" not in saved  # shown resolved, in the training section
    for key, value in expected.items():
        assert saved["training"][key] == pytest.approx(value), key


def test_sections_that_have_no_counterpart_are_refused():
    with pytest.raises(ValueError, match="otype 'CrossEntropy' is not supported"):
        training_from_tcnn({"otype": "CrossEntropy"}, None)
    with pytest.raises(ValueError, match="otype 'SGD' is not supported"):
        training_from_tcnn(None, {"otype": "SGD", "learning_rate": 1e-3})
    with pytest.raises(ValueError, match="'relative_decay' is supported at tcnn's default"):
        training_from_tcnn(None, {"otype": "Adam", "relative_decay": 0.1})
    with pytest.raises(ValueError, match="unknown config key 'learning_rte'.*did you mean 'learning_rate'"):
        training_from_tcnn(None, {"otype": "Adam", "learning_rte": 1e-3})
    with pytest.raises(ValueError, match="'clipping_magnitude' is supported at tcnn's default 0.0 only"):
        training_from_tcnn(None, {"otype": "Adam", "clipping_magnitude": 1.0})
    with pytest.raises(ValueError, match="Ema appears twice"):
        training_from_tcnn(None, {"otype": "Ema", "nested": {"otype": "ema"}})
    # tcnn's defaults where a section leaves a key out (adam.h, loss.cu, optimizer.cu); otypes in any case
    adam = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "l2_reg": 1e-8}
    assert training_from_tcnn(None, {"otype": "Adam"}) == adam
    assert training_from_tcnn({}, {}) == {"loss": "RelativeL2", **adam}
    assert (training_from_tcnn({"otype": "Mape"}, {"otype": "EMA", "decay": 0.9})
            == {"loss": "MAPE", "ema_decay": 0.9, **adam})
    assert training_from_tcnn(None, {"otype": "Adam", "skip_zero_grad_non_matrix_params": True,
                                     "non_matrix_l2_reg": 0}) == adam


def test_a_key_given_twice_is_refused(tmp_path, capsys):
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump({**CONFIG_HASH, "training": {"lr": 1e-3}}))
    assert inr_fit(["image", "--config", str(path), "--steps", "1", "--out", str(tmp_path / "o")]) == 2
    assert "given both in 'training' and by tcnn's" in capsys.readouterr().err


def tcnn_loss_and_gradient(kind, p, t):
    """Per element, as tcnn's kernels write them (values, and the gradient before dividing by the count)."""
    d = p - t
    if kind in ("MSE", "RelativeL2"):
        denominator = 1.0 if kind == "MSE" else p * p + 0.01
        return d * d / denominator, 2 * d / denominator
    scale = {"L1": 1.0, "RelativeL1": 1 / (abs(p) + 0.01), "MAPE": 1 / (abs(t) + 0.01),
             "SMAPE": 1 / (0.5 * (abs(t) + abs(p)) + 0.01)}.get(kind)
    if scale is not None:
        return abs(d) * scale, math.copysign(scale, d)
    alpha = 0.1  # Instant-NGP's Huber, divided by 5
    if abs(d) > alpha:
        return (abs(d) - 0.5 * alpha) / 5, math.copysign(1.0, d) / 5
    return 0.5 / alpha * d * d / 5, d / alpha / 5


@pytest.mark.parametrize("kind", ["MSE", "L1", "RelativeL1", "RelativeL2", "MAPE", "SMAPE", "Huber"])
def test_losses_and_their_gradients_are_tcnns(kind):
    generator = torch.Generator().manual_seed(0)
    prediction = (torch.randn(64, 3, generator=generator, dtype=torch.float64) * 0.3).requires_grad_()
    target = torch.rand(64, 3, generator=generator, dtype=torch.float64)
    loss = elementwise_loss(kind, prediction, target)
    loss.sum().backward()
    for p, t, value, grad in zip(prediction.detach().flatten().tolist(), target.flatten().tolist(),
                                 loss.detach().flatten().tolist(), prediction.grad.flatten().tolist()):
        expected_value, expected_grad = tcnn_loss_and_gradient(kind, p, t)
        assert value == pytest.approx(expected_value, rel=1e-12, abs=1e-15)
        assert grad == pytest.approx(expected_grad, rel=1e-12, abs=1e-15)
    assert resolve_training({"loss": "L2"})["loss"] == "MSE"  # tcnn's name for it


def tcnn_decay_factors(base, start, interval, end, steps):
    """The factor of each step's rate, as tcnn's ExponentialDecay::step updates it before the nested step."""
    factor, seen = 1.0, []
    for step in range(steps):
        if step >= start and (step - start) % interval == 0 and step <= end:
            factor *= base
        seen.append(factor)
    return seen


@pytest.mark.parametrize("start,interval,end", [(3, 4, 11), (3, 4, 14), (0, 5, 40), (20, 10, 0), (5, 1, 5)])
def test_exponential_decay_follows_tcnns_steps(start, interval, end):
    training = resolve_training({"schedule": "exponential", "decay_base": 0.5, "decay_start": start,
                                 "decay_interval": interval, "decay_end": end})
    seen = tcnn_decay_factors(0.5, start, interval, end, 50)
    assert [lr_factor(training)(step) for step in range(50)] == pytest.approx(seen)


def test_each_optimiser_step_takes_the_decayed_rate():
    training = resolve_training({"schedule": "exponential", "decay_base": 0.5, "decay_start": 3, "decay_interval": 4,
                                 "decay_end": 14})
    seen = tcnn_decay_factors(0.5, 3, 4, 14, 25)
    model = torch.nn.Linear(2, 2)
    model.matrix_parameters = lambda: [model.weight]
    optimizer, scheduler = make_optimizer(model, {**training, "lr": 1.0})
    lrs = []
    for _ in range(25):  # the rate each optimiser step uses
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx(seen)


def test_the_moving_average_is_tcnns_debiased_ema():
    weight = torch.nn.Parameter(torch.zeros(5))
    average = WeightEma([weight], 0.9)
    history = []
    generator = torch.Generator().manual_seed(1)
    for t in range(1, 8):
        with torch.no_grad():
            weight.copy_(torch.randn(5, generator=generator))
        history.append(weight.detach().clone())
        average.update()
        # closed form: sum_k (1 - d) d^(t - k) w_k / (1 - d^t)
        expected = sum((1 - 0.9) * 0.9 ** (t - k) * w for k, w in enumerate(history, start=1)) / (1 - 0.9**t)
        with average.applied():
            torch.testing.assert_close(weight.detach(), expected)
        torch.testing.assert_close(weight.detach(), history[-1])  # the raw weights are back after the block


def test_l2_reg_applies_to_the_network_weight_matrices_only():
    """tcnn adds l2_reg * w to the gradients of its matrix weights: one Adam step with a zero loss gradient moves
    exactly those, by Adam's first step of that gradient g: lr * g / (|g| + eps)."""
    from inr_enc.field.batch import FieldBatch

    field = Field(2, 3, {key: CONFIG_HASH[key] for key in ("encoding", "network")})
    training = resolve_training({"l2_reg": 1e-6, "lr": 1e-3})
    optimizer, _ = make_optimizer(field, training)
    before = {name: p.detach().clone() for name, p in field.named_parameters()}
    (field(torch.rand(8, 2)) * 0).sum().backward()
    optimizer.step()
    for name, param in field.named_parameters():
        moved = (param.detach() - before[name]).abs()
        if name.endswith("weight") and name.startswith("network."):
            g = 1e-6 * before[name].double()
            expected = (1e-3 * g / (g.abs() + 1e-8)).abs().float()
            torch.testing.assert_close(moved, expected, rtol=1e-3, atol=1e-9)
        else:
            assert not moved.any(), name  # biases and the table: no gradient, no decay
    batch = FieldBatch([field, field])
    assert [p.shape for p in batch.matrix_parameters()] == [(2, *m.shape) for m in field.matrix_parameters()]


@pytest.mark.slow
def test_ema_runs_are_written_with_the_average_and_resume(tmp_path):
    config = copy.deepcopy(NGP_BASE)
    config["encoding"]["log2_hashmap_size"] = 12
    path = tmp_path / "ema.yaml"
    path.write_text(yaml.safe_dump(config))
    common = ["image", "--config", str(path), "--eval-every", "2", "--checkpoint-every", "2", "--quiet",
              "--pictures", "none"]
    assert inr_fit(common + ["--steps", "6", "--out", str(tmp_path / "straight")]) == 0
    assert inr_fit(common + ["--steps", "4", "--out", str(tmp_path / "resumed")]) == 0
    assert inr_fit(["image", "--resume", str(tmp_path / "resumed"), "--steps", "6", "--quiet"]) == 0
    straight = yaml.safe_load((tmp_path / "straight" / "metrics.json").read_text())
    resumed = yaml.safe_load((tmp_path / "resumed" / "metrics.json").read_text())
    assert resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-6)
    # the outputs hold the average: the saved model's weights are the checkpoint's average, not its raw weights
    checkpoint = torch.load(tmp_path / "straight" / "checkpoint.pt", weights_only=True)
    table = checkpoint["average"]["average"][0]
    from safetensors.torch import load_file
    stored = load_file(str(tmp_path / "straight" / "model.safetensors"))["encoder.params"].float()
    torch.testing.assert_close(stored, table, rtol=1e-3, atol=1e-6)  # float16 file
    assert not torch.allclose(stored, checkpoint["model"]["encoder.params"], rtol=1e-3, atol=1e-6)


def test_a_folder_run_of_another_signal_is_refused_and_groups_refuse_ema(tmp_path, capsys):
    import imageio.v3 as iio

    folder = tmp_path / "photos"
    folder.mkdir()
    iio.imwrite(folder / "a.png", np.zeros((12, 10, 3), dtype=np.uint8))
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({"encoding": {"otype": "Frequency", "n_frequencies": 2},
                                      "network": {"n_neurons": 8, "n_hidden_layers": 1}, "training": {"steps": 2}}))
    args = ["images", str(folder), "--config", str(config), "--quiet", "--pictures", "none",
            "--out", str(tmp_path / "o")]
    assert inr_fit(args) == 0
    iio.imwrite(folder / "a.png", np.zeros((20, 16, 3), dtype=np.uint8))  # another image under the same name
    assert inr_fit(args) == 2
    assert "holds a run of another config or signal" in capsys.readouterr().err
    ema = tmp_path / "ema.yaml"
    ema.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "optimizer": {"otype": "Ema", "decay": 0.9}}))
    assert inr_fit(["images", str(folder), "--config", str(ema), "--together", "2", "--out", str(tmp_path / "e")]) == 2
    assert "averages the weights" in capsys.readouterr().err


def test_grid_keys_as_tcnn_reads_them():
    by_features = build_encoder({"otype": "HashGrid", "n_features": 32, "n_features_per_level": 4}, 2)
    assert by_features.config["n_levels"] == 8 and by_features.n_output_dims == 32
    assert build_encoder({"otype": "HashGrid", "n_grid_features": 8}, 2).config["n_levels"] == 4
    assert build_encoder({"otype": "HashGrid"}, 2).config["n_levels"] == 16  # tcnn's default
    plain = build_encoder({"otype": "HashGrid", "stochastic_interpolation": False, "fixed_point_pos": False}, 3)
    assert "fixed_point_pos" not in plain.config and plain.config == build_encoder({"otype": "HashGrid"}, 3).config
    with pytest.raises(ValueError, match="give one of 'n_levels', 'n_features'"):
        build_encoder({"otype": "HashGrid", "n_features": 32, "n_levels": 16}, 2)
    with pytest.raises(ValueError, match="must be a multiple of 'n_features_per_level'"):
        build_encoder({"otype": "HashGrid", "n_features": 31}, 2)
    with pytest.raises(ValueError, match="'stochastic_interpolation': true is not implemented"):
        build_encoder({"otype": "HashGrid", "stochastic_interpolation": True}, 2)
    with pytest.raises(ValueError, match=r"unknown config key 'log2_hash_map_size' \(did you mean 'log2_hashmap_size'"):
        build_encoder({"otype": "HashGrid", "log2_hash_map_size": 12}, 2)  # tcnn would ignore the typo


# Instant-NGP configs/image/base.json (with its commented-out Ema lines) and the image configs that patch it,
# retyped as text: // comments and "parent" as Instant-NGP reads them (src/testbed.cu merge_parent_network_config)
NGP_IMAGE_BASE = """{
\t"loss": {"otype": "L2"},
\t"optimizer": {
\t\t// "otype": "Ema",
\t\t// "decay": 0.95,
\t\t// "nested": {
\t\t\t"otype": "ExponentialDecay", "decay_start": 20000, "decay_interval": 10000, "decay_base": 0.33,
\t\t\t"nested": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15,
\t\t\t           "l2_reg": 1e-6}
\t\t// }
\t},
\t"encoding": {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 24,
\t             "base_resolution": 16},
\t"network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
\t            "n_hidden_layers": 2}
}"""
NGP_IMAGE_CHILDREN = {
    "frequency.json": '{\n\t"parent" : "base.json",\n\t"encoding": {"otype": "Frequency", "n_frequencies": 16}\n}',
    "oneblob.json": '{\n\t"parent" : "base.json",\n\t"encoding": {"otype": "OneBlob", "n_bins": 32}\n}',
    "hashgrid.json": '{\n\t"parent" : "base.json"\n}',
}


def test_instant_ngp_image_configs_load_with_comments_and_parents(tmp_path):
    from inr_enc import load_config

    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "base.json").write_text(NGP_IMAGE_BASE)
    for name, text in NGP_IMAGE_CHILDREN.items():
        (tmp_path / "image" / name).write_text(text)
    base = load_config(tmp_path / "image" / "base.json")
    assert base["optimizer"]["otype"] == "ExponentialDecay" and "decay" not in base["optimizer"]  # commented out
    assert load_config(tmp_path / "image" / "hashgrid.json") == base  # the parent itself; "parent" leaves
    frequency = load_config(tmp_path / "image" / "frequency.json")
    # merged as Instant-NGP merges (RFC 7386); the HashGrid keys left over are marked, and Frequency ignores them as
    # tcnn does
    inherited = ["base_resolution", "log2_hashmap_size", "n_features_per_level", "n_levels"]
    assert frequency == {**base, "encoding": {**base["encoding"], "otype": "Frequency", "n_frequencies": 16,
                                              "__inherited__": inherited}}
    assert (build_encoder(frequency["encoding"], 2).config
            == build_encoder({"otype": "Frequency", "n_frequencies": 16}, 2).config)
    image = tmp_path / "image.png"
    import imageio.v3 as iio
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    for name in ("frequency.json", "oneblob.json"):
        out = tmp_path / name
        assert inr_fit(["image", str(image), "--config", str(tmp_path / "image" / name), "--steps", "2",
                        "--eval-every", "2", "--quiet", "--pictures", "none", "--out", str(out)]) == 0
        saved = yaml.safe_load((out / "config.yaml").read_text())
        assert saved["training"]["loss"] == "MSE" and saved["training"]["l2_reg"] == pytest.approx(1e-6)
        assert saved["network"]["otype"] == "FullyFusedMLP" and "bias" not in saved["network"]


def test_a_child_of_another_otype_keeps_the_parents_keys_it_reads(tmp_path):
    from inr_enc import load_config

    # instant-ngp configs/nerf/densegrid.json over base.json: DenseGrid reads the HashGrid's n_features_per_level 4
    (tmp_path / "base.json").write_text('{"encoding": {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 4,'
                                        ' "log2_hashmap_size": 19, "base_resolution": 16}}')
    (tmp_path / "dense.json").write_text('{"parent": "base.json", "encoding": {"otype": "DenseGrid", "n_levels": 8,'
                                         ' "base_resolution": 16, "per_level_scale": 1.405}}')
    dense = build_encoder(load_config(tmp_path / "dense.json")["encoding"], 3)
    assert type(dense).__name__ == "DenseGrid" and dense.config["n_features_per_level"] == 4
    (tmp_path / "typo.json").write_text('{"parent": "base.json", "encoding": {"otype": "DenseGrid", "n_levles": 8}}')
    with pytest.raises(ValueError, match=r"unknown config key 'n_levles' \(did you mean 'n_levels'"):
        build_encoder(load_config(tmp_path / "typo.json")["encoding"], 3)  # the child's own keys are still checked
    (tmp_path / "network.json").write_text('{"network": {"otype": "MLP", "bias": true, "n_neurons": 32}}')
    (tmp_path / "fused.json").write_text('{"parent": "network.json", "network": {"otype": "FullyFusedMLP"}}')
    from inr_enc.networks.registry import network_class
    fused = load_config(tmp_path / "fused.json")["network"]
    assert network_class(fused).__name__ == "TcnnMLP"  # the parent's MLP key (bias) does not pick MLP


def test_parent_patches_merge_keys_remove_nulls_and_refuse_cycles(tmp_path):
    from inr_enc import load_config

    (tmp_path / "base.json").write_text('{"a": {"b": 1, "c": 2}, "url": "http://x//y", /* block */ "d": [1]}')
    (tmp_path / "child.yaml").write_text("parent: base.json\na: {c: null, e: 3}\nd: [2]\n")
    assert load_config(tmp_path / "child.yaml") == {"a": {"b": 1, "e": 3}, "url": "http://x//y", "d": [2]}
    from inr_enc.config.files import merge_patch  # an otype where the parent names none merges, as RFC 7386
    assert (merge_patch({"n": {"width": 64}}, {"n": {"otype": "CutlassMLP"}})
            == {"n": {"width": 64, "otype": "CutlassMLP"}})
    assert merge_patch({"n": {"otype": "A", "k": 1}}, {"n": {"otype": None}}) == {"n": {"k": 1}}
    (tmp_path / "loop1.json").write_text('{"parent": "loop2.json"}')
    (tmp_path / "loop2.json").write_text('{"parent": "loop1.json"}')
    with pytest.raises(ValueError, match="'parent' configs form a cycle"):
        load_config(tmp_path / "loop1.json")
    (tmp_path / "orphan.json").write_text('{"parent": "missing.json"}')
    with pytest.raises(ValueError, match="'parent' must name a config file next to it, got 'missing.json'"):
        load_config(tmp_path / "orphan.json")


def test_lion_steps_as_the_paper_writes_them():
    from inr_enc.optim import Lion

    rng = np.random.default_rng(3)
    w0 = rng.normal(size=(4, 3))
    param = torch.nn.Parameter(torch.tensor(w0))
    optimizer = Lion([param], lr=0.01, betas=(0.8, 0.95), weight_decay=0.5)
    w, m = w0.copy(), np.zeros_like(w0)
    for _ in range(4):  # Chen et al. 2023, Algorithm 2, in float64
        g = rng.normal(size=w.shape)
        param.grad = torch.tensor(g)
        optimizer.step()
        c = 0.8 * m + 0.2 * g
        w = w - 0.01 * (np.sign(c) + 0.5 * w)
        m = 0.95 * m + 0.05 * g
        np.testing.assert_allclose(param.detach().numpy(), w, rtol=1e-12, atol=1e-15)


def test_a_lion_section_trains_and_its_keys_are_checked(tmp_path, capsys):
    # the keys the issue names for tcnn's config_lion.json (tcnn pull request #262, not merged at 6ee3546)
    config = {**CONFIG_HASH, "optimizer": {"otype": "ExponentialDecay", "decay_start": 2, "decay_interval": 1,
                                           "nested": {"otype": "Lion", "learning_rate": 1e-3, "beta1": 0.9,
                                                      "beta2": 0.99, "weight_decay": 0.1}}}
    config["encoding"] = {**config["encoding"], "n_levels": 4}
    assert training_from_tcnn(None, config["optimizer"]["nested"]) == {
        "solver": "lion", "lr": 1e-3, "weight_decay": 0.1, "betas": [0.9, 0.99]}
    path = tmp_path / "lion.json"
    path.write_text(json.dumps(config))
    image = tmp_path / "image.png"
    import imageio.v3 as iio
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    out = tmp_path / "out"
    assert inr_fit(["image", str(image), "--config", str(path), "--steps", "4", "--eval-every", "2", "--quiet",
                    "--pictures", "none", "--out", str(out)]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["training"]["solver"] == "lion" and saved["training"]["weight_decay"] == 0.1
    assert inr_fit(["image", "--resume", str(out), "--steps", "6", "--quiet"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 6
    lion = resolve_training({"solver": "lion"})  # the paper's rate and betas where the section leaves them out
    assert lion["lr"] == 1e-4 and lion["betas"] == [0.9, 0.99]
    with pytest.raises(ValueError, match="'weight_decay' x 'lr' must be below 1"):
        resolve_training({"solver": "lion", "lr": 1.0, "weight_decay": 2.0})
    with pytest.raises(ValueError, match="'weight_decay' is Lion's"):
        resolve_training({"weight_decay": 0.1})
    with pytest.raises(ValueError, match="solver lion takes 'weight_decay' .decoupled., not 'l2_reg'"):
        resolve_training({"solver": "lion", "l2_reg": 1e-6})
