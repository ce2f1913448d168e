"""Instant-NGP's NeRF configs in ns-train (inr_enc/nerfstudio/instant_ngp.py): the field as its NerfNetwork
computes it, the loss, the optimiser chain reaching nerfstudio's optimizers, tcnn's Ema in the model, and a short
ns-train run of Instant-NGP's configs/nerf/base.json. References are written from instant-ngp abe236e
(nerf_network.h, nerf_device.cuh, testbed.cu) and tcnn 6ee3546 (optimizers/ema.h, exponential_decay.h)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("nerfstudio")

from nerf_runs import NGP_NERF_BASE, scene_with_test_views  # noqa: E402
from nerfstudio.cameras.rays import Frustums, RaySamples  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402
from nerfstudio.field_components.field_heads import FieldHeadNames  # noqa: E402
from reference import tcnn_sh_degree4  # noqa: E402

from inr_enc.nerfstudio.methods import InrTrainerConfig, inr_hashgrid  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.weight_average import WeightAverage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

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
    assert ((config.field_layout, config.rgb_loss, config.ema_decay, config.geo_feat_dim)
            == ("instant-ngp", "Huber", 0.95, 15))
    assert config.encoding["per_level_scale"] == pytest.approx(2.0)  # testbed: 2048 cells at the finest of 8 levels
    model = config.setup(scene_box=BOX, num_train_data=2).double()
    field = model.field
    # n_params as nerf_network.h sizes them: density [64, 32] + [16, 64]; rgb input 16 + 16 -> [64, 32], [64, 64],
    # [16, 64]
    assert sum(p.numel() for p in field.density_network.parameters()) == 64 * 32 + 16 * 64
    assert sum(p.numel() for p in field.color_network.parameters()) == 64 * 32 + 64 * 64 + 16 * 64
    ray_samples = samples()
    with torch.no_grad():
        density, features = field.get_density(ray_samples)
        rgb = field.get_outputs(ray_samples, features)[FieldHeadNames.RGB]
        # reference, no biases: h = density network of the 32 grid features (no padding), the rgb network reads
        # [all 16 outputs of h, tcnn's SH of degree 4 of d]
        x = (ray_samples.frustums.get_positions() + 1.5) / 3
        v = [layer.weight for layer in field.density_network.layers]
        h = torch.relu(field.position_encoder(x) @ v[0].T) @ v[1].T
        w = [layer.weight for layer in field.color_network.layers]
        sh = torch.tensor([tcnn_sh_degree4(*d) for d in ray_samples.frustums.directions.tolist()], dtype=torch.float64)
        inputs = torch.cat([h, sh], -1)
        expected = torch.sigmoid(torch.relu(torch.relu(inputs @ w[0].T) @ w[1].T) @ w[2].T)[:, :3]
    # nerf_device.cuh: exp(output 0), per length of the unit cube: the 3-unit scene box -> / 3 per world length
    assert torch.allclose(density[:, 0].double(), torch.exp(h[:, 0]) / 3, rtol=1e-6)
    assert torch.allclose(features, h, atol=1e-12) and torch.allclose(rgb, expected, atol=1e-12)
    # n_output_dims 8: tcnn still computes 16 (padded) outputs and the rgb network reads all of them
    eight = {**NGP_NERF_BASE, "network": {**NGP_NERF_BASE["network"], "n_output_dims": 8}}
    config = InrNerfModelConfig(instant_ngp_config=json.dumps(eight), grid_resolution=16)
    field = config.setup(scene_box=BOX, num_train_data=1).field
    assert config.geo_feat_dim == 15 and field.density_network.layers[-1].weight.shape == (16, 64)
    assert field.color_network.layers[0].weight.shape == (64, 32)


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
    assert ((fields.lr, fields.eps, tuple(fields.betas), fields.weight_decay, fields.lazy)
            == (1e-2, 1e-15, (0.9, 0.99), 1e-6, False))
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
    state = {**{f"m.{k}": v for k, v in module.state_dict().items()},
             **{f"a.{k}": v for k, v in average.state_dict().items()}}
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


def test_a_model_saved_while_evaluating_keeps_its_raw_weights(configs):
    model = InrNerfModelConfig(instant_ngp_config=str(configs / "small.json"), grid_resolution=16).setup(
        scene_box=BOX, num_train_data=1)
    g = torch.Generator().manual_seed(4)
    for _ in range(2):
        with torch.no_grad():
            for p in model.field.parameters():
                p.add_(torch.randn(p.shape, generator=g))
        model.weight_average.update()
    raw = {name: p.detach().clone() for name, p in model.field.named_parameters()}
    model.eval()  # the viewer renders in eval mode while the trainer may save
    assert not torch.equal(model.field.density_network.layers[0].weight, raw["density_network.layers.0.weight"])
    state = model.state_dict()
    assert all(torch.equal(state[f"field.{name}"], value) for name, value in raw.items())
    assert not torch.equal(state["weight_average.average_1"], raw["density_network.layers.0.weight"])


@pytest.mark.parametrize("text, message", [
    ('{"encoding": {}, "network": {}, "dir_encoding": {}, "rgb_netwrok": {}}',
     "instant_ngp_config: unknown config key 'rgb_netwrok' (did you mean 'rgb_network'?)"),
    ('{"encoding": {"otype": "HashGrid"}, "network": {}}', "instant_ngp_config: missing 'dir_encoding', 'rgb_network'"),
    ('{"loss": {"otype": "LogL1"}, "encoding": {}, "network": {}, "dir_encoding": {}, "rgb_network": {}}',
     "instant_ngp_config: loss: otype 'LogL1' is not supported here"),
    ('{"optimizer": {"otype": "Lion"}, "encoding": {}, "network": {}, "dir_encoding": {}, "rgb_network": {}}',
     "instant_ngp_config: optimizer: Lion is trained by inr-fit only"),
    ('{"encoding": {}, "network": {}, "dir_encoding": {}, "rgb_network": {"output_activation": "Sigmoid"}}',
     "instant_ngp_config: rgb_network: 'output_activation' 'Sigmoid': Instant-NGP's NeRF networks end in None"),
    ('{"optimizer": {"otype": "Ema", "decay": 1.0}, "encoding": {}, "network": {}, "dir_encoding": {},'
     ' "rgb_network": {}}', "InrNerfModelConfig: 'ema_decay' must be in (0, 1) (null: no moving average), got 1.0"),
])
def test_bad_instant_ngp_configs_are_refused_in_one_line(text, message, capsys, monkeypatch):
    import tyro

    monkeypatch.setattr(sys, "argv", ["ns-train"])
    with pytest.raises(SystemExit) as exit_info:
        tyro.cli(InrNerfModelConfig, args=["--instant-ngp-config", text])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ns-train: {message}"), lines
    with pytest.raises(ValueError, match="give encoding_config or instant_ngp_config, not both"):
        InrNerfModelConfig(encoding_config="hashgrid", instant_ngp_config=text)


def test_flags_the_config_sets_are_refused_and_nerf_mape_is_relative_l1(configs):
    with pytest.raises(ValueError, match=r"^instant_ngp_config sets rgb_loss, ema_decay: leave those flags out"):
        InrNerfModelConfig(instant_ngp_config=str(configs / "base.json"), rgb_loss="L1", ema_decay=0.5)
    mape = {**NGP_NERF_BASE, "loss": {"otype": "MAPE"}}  # nerf_device.cuh: |d| / (|prediction| + 0.01)
    assert InrNerfModelConfig(instant_ngp_config=json.dumps(mape)).rgb_loss == "RelativeL1"
    assert InrNerfModelConfig(instant_ngp_config=json.dumps({**NGP_NERF_BASE, "loss": {}})).rgb_loss == "MSE"


def run(*args, cwd=ROOT):
    result = subprocess.run([str(a) for a in args], cwd=cwd, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args[0]}: {result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def ngp_run(configs, tmp_path_factory):
    """ns-train inr-hashgrid with Instant-NGP's base.json, 8 iterations on CPU, on the bundled scene with its
    first 2 test views -> (the run's config.yml, the scene)."""
    out = tmp_path_factory.mktemp("ngp")
    scene = scene_with_test_views(out, 2)
    run(BIN / "ns-train", "inr-hashgrid", "--machine.device-type", "cpu", "--max-num-iterations", "8",
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--output-dir", out,
        "--experiment-name", "p", "--timestamp", "run", "--steps-per-eval-batch", "0", "--steps-per-eval-image", "0",
        "--pipeline.model.instant-ngp-config", configs / "base.json", "blender-data", "--data", scene)
    return out / "p" / "inr-hashgrid" / "run" / "config.yml", scene


@pytest.mark.slow
def test_ns_train_runs_instant_ngps_base_config_and_evaluates_its_average(ngp_run):
    from nerfstudio.utils.eval_utils import eval_setup

    config, pipeline, _, step = eval_setup(ngp_run[0], test_mode="test")
    assert step == 7 and config.optimizers["fields"]["optimizer"].weight_decay == 1e-6
    model = pipeline.model
    assert not model.training and int(model.weight_average.steps) == 8
    checkpoint = torch.load(max((ngp_run[0].parent / "nerfstudio_models").glob("*.ckpt")), weights_only=True)
    saved = checkpoint["pipeline"]
    names = [name for name, _ in model.field.named_parameters()]
    averages = [saved[f"_model.weight_average.average_{i}"] for i in range(len(names))]
    assert all(torch.equal(p, a) for p, a in zip(model.field.parameters(), averages))  # evaluated: the average
    model.train()  # trained: the raw weights the checkpoint holds, which differ from the average
    assert all(torch.equal(p, saved[f"_model.field.{name}"]) for name, p in zip(names, model.field.parameters()))
    assert not all(torch.equal(p, a) for p, a in zip(model.field.parameters(), averages))
    assert np.isfinite(pipeline.model.get_outputs(pipeline.datamanager.next_train(0)[0])["rgb"].detach()).all()


@pytest.mark.slow
def test_inr_snapshot_exports_and_imports_a_run_that_ns_render_renders_the_same(ngp_run, tmp_path):
    from nerfstudio.utils.eval_utils import eval_setup

    config_path, scene = ngp_run
    run(BIN / "inr-snapshot", "export", "--load-config", config_path, "--output", tmp_path / "scene.ingp")
    imported = Path(run(BIN / "inr-snapshot", "import", tmp_path / "scene.ingp", "--data", scene,
                        "--output-dir", tmp_path / "outputs").strip())
    assert imported == tmp_path / "outputs" / "primitives" / "inr-hashgrid" / "snapshot" / "config.yml"
    run(BIN / "ns-render", "dataset", "--load-config", imported, "--split", "test", "--rendered-output-names", "rgb",
        "--output-path", tmp_path / "renders")
    assert len(list((tmp_path / "renders").glob("**/*.png")) + list((tmp_path / "renders").glob("**/*.jpg"))) == 2
    renders = []
    for path in (config_path, imported):
        _, pipeline, _, step = eval_setup(path, test_mode="test")
        camera = pipeline.datamanager.eval_dataset.cameras[0:1]
        with torch.no_grad():
            renders.append(pipeline.model.get_outputs_for_camera(camera))
        assert step == 7
    assert all(torch.equal(renders[0][k], renders[1][k]) for k in ("rgb", "accumulation", "depth"))
