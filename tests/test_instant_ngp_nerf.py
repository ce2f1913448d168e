"""Instant-NGP's NeRF configs in ns-train (inr_enc/nerfstudio/instant_ngp.py): the field as its NerfNetwork
computes it, the loss, the optimiser chain reaching nerfstudio's optimizers, tcnn's Ema in the model, and a short
ns-train run of Instant-NGP's configs/nerf/base.json. References are written from instant-ngp abe236e
(nerf_network.h, nerf_device.cuh, testbed.cu) and tcnn 6ee3546 (optimizers/ema.h, exponential_decay.h)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("nerfstudio")

from nerfstudio.cameras.rays import Frustums, RaySamples  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402
from nerfstudio.field_components.field_heads import FieldHeadNames  # noqa: E402
from reference import tcnn_sh_degree4  # noqa: E402

from inr_enc.nerfstudio.methods import InrTrainerConfig, inr_hashgrid  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.weight_average import WeightAverage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCENE = ROOT / "data" / "scenes" / "primitives"
BIN = Path(sys.executable).parent

# instant-ngp configs/nerf/base.json, retyped as data (keys and values)
ADAM_NESTED = {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15, "l2_reg": 1e-6}
NGP_NERF_BASE = {
    "loss": {"otype": "Huber"},
    "optimizer": {"otype": "Ema", "decay": 0.95, "nested": {
        "otype": "ExponentialDecay", "decay_start": 20000, "decay_interval": 10000, "decay_base": 0.33,
        "nested": ADAM_NESTED}},
    "encoding": {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 4, "log2_hashmap_size": 19,
                 "base_resolution": 16},
    "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                "n_hidden_layers": 1},
    "dir_encoding": {"otype": "Composite", "nested": [
        {"n_dims_to_encode": 3, "otype": "SphericalHarmonics", "degree": 4}, {"otype": "Identity"}]},
    "rgb_network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
                    "n_hidden_layers": 2},
    "distortion_map": {"resolution": [32, 32], "optimizer": {
        "otype": "ExponentialDecay", "decay_start": 10000, "decay_interval": 5000, "decay_end": 25000,
        "decay_base": 0.33, "nested": {"otype": "Adam", "learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.99,
                                       "epsilon": 1e-8}}},
    "envmap": {"loss": {"otype": "RelativeL2"}, "optimizer": {"otype": "Ema", "decay": 0.99, "nested": {
        "otype": "ExponentialDecay", "decay_start": 10000, "decay_interval": 5000, "decay_base": 0.33,
        "nested": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "beta3": 0.9,
                   "beta_shampoo": 0.0, "epsilon": 1e-10, "identity": 0.0001, "cg_on_momentum": False,
                   "frobenius_normalization": True, "l2_reg": 1e-10}}}},
}
# configs/nerf/small.json and frequency.json: patches of base.json ("parent"), the second with comments
NGP_NERF_SMALL = '{"parent": "base.json", "optimizer": {"nested": {"decay_start": 10000, "decay_interval": 5000}},' \
                 ' "encoding": {"log2_hashmap_size": 15}}'
NGP_NERF_FREQUENCY = """{
    "parent": "base.json",
    "optimizer": {"nested": {"nested": {"learning_rate": 1e-3}}},
    "encoding": {"otype": "Frequency", "n_frequencies": 16},
    "dir_encoding": {"otype": "Frequency", "n_frequencies": 4},
    "network": {
        // a comment, as the file has
        "otype": "CutlassMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 256,
        "n_hidden_layers": 7},
    "rgb_network": {"otype": "CutlassMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 256,
                    "n_hidden_layers": 1}
}"""
BOX = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nerf")
    (folder / "base.json").write_text(json.dumps(NGP_NERF_BASE, indent=1))
    (folder / "small.json").write_text(NGP_NERF_SMALL)
    (folder / "frequency.json").write_text(NGP_NERF_FREQUENCY)
    return folder


def samples(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    directions = torch.nn.functional.normalize(torch.randn(n, 3, generator=g, dtype=torch.float64), dim=-1)
    starts = torch.rand(n, 1, generator=g, dtype=torch.float64)
    return RaySamples(frustums=Frustums(origins=(torch.rand(n, 3, generator=g) - 0.5).double(),  # inside the box
                                        directions=directions, starts=starts, ends=starts + 0.01,
                                        pixel_area=torch.full((n, 1), 1e-4, dtype=torch.float64)))


def test_base_config_builds_instant_ngps_nerf_network(configs):
    config = InrNerfModelConfig(instant_ngp_config=str(configs / "base.json"), grid_resolution=16)
    assert (config.field_layout, config.rgb_loss, config.ema_decay, config.geo_feat_dim) == ("instant-ngp", "Huber", 0.95, 15)
    assert config.encoding["per_level_scale"] == pytest.approx(2.0)  # testbed: 2048 cells at the finest of 8 levels
    model = config.setup(scene_box=BOX, num_train_data=2).double()
    field = model.field
    # n_params as nerf_network.h sizes them: density [64, 32] + [16, 64]; rgb input 16 + 16 -> [64, 32], [64, 64], [16, 64]
    assert sum(p.numel() for p in field.density_network.parameters()) == 64 * 32 + 16 * 64
    assert sum(p.numel() for p in field.color_network.parameters()) == 64 * 32 + 64 * 64 + 16 * 64
    ray_samples = samples()
    with torch.no_grad():
        density, features = field.get_density(ray_samples)
        rgb = field.get_outputs(ray_samples, features)[FieldHeadNames.RGB]
        # reference: the rgb network reads [all 16 density outputs, tcnn's SH of degree 4 of d], no biases
        x = (ray_samples.frustums.get_positions() + 1.5) / 3
        h = field.density_network(field.position_encoder(x))
        w = [layer.weight for layer in field.color_network.layers]
        sh = torch.tensor([tcnn_sh_degree4(*d) for d in ray_samples.frustums.directions.tolist()], dtype=torch.float64)
        inputs = torch.cat([h, sh], -1)
        expected = torch.sigmoid(torch.relu(torch.relu(inputs @ w[0].T) @ w[1].T) @ w[2].T)[:, :3]
    assert torch.allclose(density[:, 0].double(), torch.exp(h[:, 0]), rtol=1e-6)  # nerf_device.cuh: exp(output 0)
    assert torch.allclose(features, h) and torch.allclose(rgb, expected, atol=1e-12)


def test_parent_configs_and_other_networks_build(configs):
    small = InrNerfModelConfig(instant_ngp_config=str(configs / "small.json"))
    assert small.encoding["log2_hashmap_size"] == 15 and small.tcnn_optimizer["decay_start"] == 10000
    frequency = InrNerfModelConfig(instant_ngp_config=str(configs / "frequency.json"), grid_resolution=16)
    assert frequency.tcnn_optimizer["lr"] == 1e-3 and frequency.network["otype"] == "CutlassMLP"
    field = frequency.setup(scene_box=BOX, num_train_data=1).field
    # 96 Frequency features; the rgb network reads 16 density outputs + 24 direction features padded to 16 -> 48
    assert [tuple(layer.weight.shape) for layer in field.color_network.layers] == [(256, 48), (16, 256)]
    assert field.get_outputs(samples(8), field.get_density(samples(8))[1])[FieldHeadNames.RGB].shape == (8, 3)
    coded = InrNerfModelConfig(instant_ngp_config=str(configs / "base.json"), appearance_embedding_dim=4)
    coded_field = coded.setup(scene_box=BOX, num_train_data=3).field  # Instant-NGP's extra dims: Identity after SH
    assert coded_field.color_network.layers[0].weight.shape == (64, 48)  # 16 + 16 + 4 -> 48


def test_the_optimiser_chain_reaches_nerfstudios_optimizers(configs):
    model = InrNerfModelConfig(instant_ngp_config=str(configs / "base.json"))
    trainer = InrTrainerConfig(pipeline=type(inr_hashgrid.config.pipeline)(model=model),
                               optimizers=dict(inr_hashgrid.config.optimizers))
    fields, grids = trainer.optimizers["fields"]["optimizer"], trainer.optimizers["grids"]["optimizer"]
    assert (fields.lr, fields.eps, tuple(fields.betas), fields.weight_decay, fields.lazy) == (1e-2, 1e-15, (0.9, 0.99), 1e-6, False)
    assert (grids.lr, grids.weight_decay, grids.lazy) == (1e-2, 0, True)  # tcnn: l2_reg on matrices only
    assert trainer.optimizers["camera_opt"] is inr_hashgrid.config.optimizers["camera_opt"]
    param = torch.nn.Parameter(torch.zeros(3))
    optimizer = fields.setup([param])
    scheduler = trainer.optimizers["fields"]["scheduler"].setup().get_scheduler(optimizer, lr_init=1e-2)
    rates = {}
    for step in range(45001):
        if step in (19999, 20000, 29999, 30000, 45000):
            rates[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
    # tcnn ExponentialDecay: lr * base^(floor((t - start) / interval) + 1) from decay_start on
    assert rates == pytest.approx({19999: 1e-2, 20000: 1e-2 * 0.33, 29999: 1e-2 * 0.33, 30000: 1e-2 * 0.33**2,
                                   45000: 1e-2 * 0.33**3})
    default = InrTrainerConfig(pipeline=type(inr_hashgrid.config.pipeline)(model=InrNerfModelConfig()),
                               optimizers=dict(inr_hashgrid.config.optimizers))
    assert default.optimizers == inr_hashgrid.config.optimizers  # without an Instant-NGP config: untouched


def test_huber_loss_is_instant_ngps():
    model = InrNerfModelConfig(rgb_loss="Huber", grid_resolution=16).setup(scene_box=BOX, num_train_data=1)
    g = torch.Generator().manual_seed(1)
    rgb, target = torch.rand(500, 3, generator=g), torch.rand(500, 3, generator=g)
    d = (rgb - target).double()
    # nerf_device.cuh huber_loss(alpha 0.1) / 5: |d| > 0.1: |d| - 0.05, else 0.5 / 0.1 * d^2
    expected = torch.where(d.abs() > 0.1, d.abs() - 0.05, 5 * d**2) / 5
    loss = model.get_loss_dict({"rgb": rgb}, {"image": target})["rgb_loss"]
    assert float(loss) == pytest.approx(float(expected.mean()), rel=1e-6)


def test_ema_is_evaluated_swapped_back_for_training_and_saved():
    module = torch.nn.Linear(3, 2)
    average = WeightAverage(list(module.parameters()), 0.9)
    snapshots, g = [], torch.Generator().manual_seed(2)
    for _ in range(4):
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        snapshots.append([p.detach().double().clone() for p in module.parameters()])
        average.update()
    # tcnn ema.h, in float64: ema_t = (ema_{t-1} d (1 - d^(t-1)) + w_t (1 - d)) / (1 - d^t)
    ema = [torch.zeros_like(w) for w in snapshots[0]]
    for t, weights in enumerate(snapshots, 1):
        ema = [(e * 0.9 * (1 - 0.9 ** (t - 1)) + w * 0.1) / (1 - 0.9**t) for e, w in zip(ema, weights)]
    raw = [p.detach().clone() for p in module.parameters()]
    average.eval()
    assert all(torch.allclose(p.double(), e, atol=1e-6) for p, e in zip(module.parameters(), ema))
    average.train()
    assert all(torch.equal(p, r) for p, r in zip(module.parameters(), raw))
    # a checkpoint (raw weights + the average) loaded into a fresh copy in eval mode evaluates the average
    state = {**{f"m.{k}": v for k, v in module.state_dict().items()}, **{f"a.{k}": v for k, v in average.state_dict().items()}}
    fresh = torch.nn.Module()
    fresh.m = torch.nn.Linear(3, 2)
    fresh.a = WeightAverage(list(fresh.m.parameters()), 0.9)
    fresh.register_load_state_dict_pre_hook(lambda m, *args: m.a.before_load())
    fresh.register_load_state_dict_post_hook(lambda m, keys: m.a.loaded())
    fresh.eval()
    fresh.load_state_dict(state)
    fresh.load_state_dict({}, strict=False)  # a load without the weights (nerfstudio's pipeline does one) keeps them
    assert all(torch.allclose(p.double(), e, atol=1e-6) for p, e in zip(fresh.m.parameters(), ema))
    fresh.train()
    assert all(torch.equal(p, r) for p, r in zip(fresh.m.parameters(), raw))


@pytest.mark.parametrize("text, message", [
    ('{"encoding": {}, "network": {}, "dir_encoding": {}, "rgb_netwrok": {}}',
     "instant_ngp_config: unknown config key 'rgb_netwrok' (did you mean 'rgb_network'?)"),
    ('{"encoding": {"otype": "HashGrid"}, "network": {}}', "instant_ngp_config: missing 'dir_encoding', 'rgb_network'"),
    ('{"loss": {"otype": "LogL1"}, "encoding": {}, "network": {}, "dir_encoding": {}, "rgb_network": {}}',
     "instant_ngp_config: loss: otype 'LogL1' is not supported here"),
    ('{"optimizer": {"otype": "Lion"}, "encoding": {}, "network": {}, "dir_encoding": {}, "rgb_network": {}}',
     "instant_ngp_config: optimizer: Lion is trained by inr-fit only"),
])
def test_bad_instant_ngp_configs_are_refused_in_one_line(text, message, capsys, monkeypatch):
    import tyro

    monkeypatch.setattr(sys, "argv", ["ns-train"])
    with pytest.raises(SystemExit) as exit_info:
        tyro.cli(InrNerfModelConfig, args=["--instant-ngp-config", text])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ns-train: {message}"), lines
    with pytest.raises(ValueError, match="encoding_config and instant_ngp_config not both"):
        InrNerfModelConfig(encoding_config="hashgrid", instant_ngp_config=text)


def test_ns_train_runs_instant_ngps_base_config_and_evaluates_its_average(configs, tmp_path):
    result = subprocess.run(
        [str(BIN / "ns-train"), "inr-hashgrid", "--machine.device-type", "cpu", "--max-num-iterations", "8",
         "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--output-dir", str(tmp_path),
         "--experiment-name", "p", "--timestamp", "run", "--steps-per-eval-batch", "0", "--steps-per-eval-image", "0",
         "--pipeline.model.instant-ngp-config", str(configs / "base.json"), "blender-data", "--data", str(SCENE)],
        cwd=ROOT, env={"CUDA_VISIBLE_DEVICES": "", **dict(__import__("os").environ)}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    from nerfstudio.utils.eval_utils import eval_setup

    config, pipeline, _, step = eval_setup(tmp_path / "p" / "inr-hashgrid" / "run" / "config.yml", test_mode="test")
    assert step == 7 and config.optimizers["fields"]["optimizer"].weight_decay == 1e-6
    model = pipeline.model
    assert not model.training and int(model.weight_average.steps) == 8
    averages = [getattr(model.weight_average, f"average_{i}") for i in range(len(list(model.field.parameters())))]
    assert all(torch.equal(p, a) for p, a in zip(model.field.parameters(), averages))  # evaluated: the average
    model.train()
    assert not all(torch.equal(p, a) for p, a in zip(model.field.parameters(), averages))
    assert np.isfinite(pipeline.model.get_outputs(pipeline.datamanager.next_train(0)[0])["rgb"].detach()).all()
