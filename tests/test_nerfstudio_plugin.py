"""The nerfstudio plugin (inr_enc/nerfstudio): registration, import safety, configs from the command line, the
field's frustum covariances, the coarse-to-fine callback, checkpoints under weights_only, and ns-train + ns-eval
end to end on the bundled Blender scene on CPU."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("nerfstudio")

import tyro  # noqa: E402
from nerf_runs import scene_with_test_views  # noqa: E402
from nerfstudio.cameras.rays import Frustums, RaySamples  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402

from inr_enc import build_encoder  # noqa: E402
from inr_enc.nerf.frustum import frustum_gaussian  # noqa: E402
from inr_enc.nerfstudio.methods import hyb_nerf, inr_fourier, inr_hashgrid  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCENE = ROOT / "data" / "scenes" / "primitives"
BIN = Path(sys.executable).parent
METHODS = {"inr-hashgrid": inr_hashgrid, "hyb-nerf": hyb_nerf, "inr-fourier": inr_fourier}
CPU_ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
TEST_VIEWS = 5  # of the bundled scene's 20 test views, those the trained run's ns-eval and ns-render use


def run(*args, cwd=ROOT, timeout=900):
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=CPU_ENV, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def small_model(encoding=None, **kwargs):
    config = InrNerfModelConfig(encoding=encoding or {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 12,
                                                      "base_resolution": 4}, grid_resolution=16, **kwargs)
    return config.setup(scene_box=SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3])), num_train_data=4)


@pytest.mark.slow
def test_ns_train_lists_our_methods():
    help_text = run(BIN / "ns-train", "--help").stdout
    for name in METHODS:
        assert name in help_text


@pytest.mark.slow
def test_methods_import_and_train_without_a_tcnn_warning_when_tinycudann_raises(tmp_path):
    # without a GPU, importing tinycudann raises OSError (EnvironmentError) "Unknown compute capability"; nerfstudio
    # catches that one, prints one line, and imports; our methods must import, build and run a step, adding nothing
    (tmp_path / "tinycudann.py").write_text(
        "raise OSError('Unknown compute capability. Ensure PyTorch with CUDA support is installed.')\n")
    code = """
import torch, inr_enc, inr_enc.nerfstudio.methods as m
from nerfstudio.data.scene_box import SceneBox
from nerfstudio.cameras.rays import RayBundle
print(sorted(s.config.method_name for s in (m.inr_hashgrid, m.hyb_nerf, m.inr_fourier)), inr_enc.tcnn_available())
for spec in (m.inr_hashgrid, m.hyb_nerf, m.inr_fourier):
    model = spec.config.pipeline.model.setup(scene_box=SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3])),
                                             num_train_data=1)
    rays = RayBundle(origins=torch.tensor([[0.0, 0.0, -4.0]]).repeat(8, 1),
                     directions=torch.tensor([[0.0, 0.0, 1.0]]).repeat(8, 1),
                     pixel_area=torch.full((8, 1), 1e-4), camera_indices=torch.zeros(8, 1, dtype=torch.long))
    model.get_outputs(rays)["rgb"].sum().backward()
"""
    result = subprocess.run([sys.executable, "-c", code], env={**CPU_ENV, "PYTHONPATH": str(tmp_path)},
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['hyb-nerf', 'inr-fourier', 'inr-hashgrid'] False"
    mentions = [line for line in (result.stdout + result.stderr).lower().splitlines()
                if "tcnn" in line or "tinycudann" in line or "tiny-cuda" in line]
    assert mentions == ["could not load tinycudann: unknown compute capability. ensure pytorch with cuda support "
                        "is installed."]  # nerfstudio's own line, printed by its import


def test_encoder_keys_and_whole_configs_from_the_command_line(tmp_path):
    config = tyro.cli(InrNerfModelConfig, args=["--encoding.log2-hashmap-size", "12", "--encoding.n-levels", "8"])
    assert config.encoding["log2_hashmap_size"] == 12 and config.encoding["n_levels"] == 8
    assert config.encoding["otype"] == "HashGrid"
    text = '{"otype": "RandomFourier", "n_features": 64, "sigma": 4.0}'
    config = tyro.cli(InrNerfModelConfig, args=["--encoding-config", text])
    # resolved by the run-config schema (defaults filled in), so the saved config.yml holds the whole dict
    assert config.encoding == {"otype": "RandomFourier", "n_features": 64, "sigma": 4.0, "seed": 1337}
    assert config.encoding_config is None
    path = tmp_path / "field.json"
    path.write_text(json.dumps({"encoding": {"otype": "DenseGrid", "n_levels": 2},
                                "network": {"otype": "MLP", "n_neurons": 32, "n_hidden_layers": 1}}))
    config = tyro.cli(InrNerfModelConfig, args=["--encoding-config", str(path)])
    assert config.encoding == build_encoder({"otype": "DenseGrid", "n_levels": 2}, 3).config
    assert config.network["n_neurons"] == 32
    model = config.setup(scene_box=SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3])), num_train_data=1)
    assert type(model.field.position_encoder).__name__ == "DenseGrid"
    with pytest.raises(ValueError, match="encoding_config"):
        InrNerfModelConfig(encoding_config='{"n_levels": 3}')


def test_named_field_configs_keep_density_unbounded_and_bad_settings_are_refused():
    model = small_model(encoding_config="nerf-pe")  # an inr-fit config: its network ends in a Sigmoid
    assert model.field.density_network.config["output_activation"] == "None"
    assert type(model.field.position_encoder).__name__ == "NeRF"
    with pytest.raises(ValueError, match="unknown field config keys"):
        InrNerfModelConfig(encoding_config='{"encoding": {"otype": "NeRF"}, "netwrok": {}}')
    for bad in ({"grid_update_every": 0}, {"render_step_size": 0.0}, {"early_stop_eps": 1.0}):
        with pytest.raises(ValueError, match="InrNerfModelConfig"):
            InrNerfModelConfig(**bad)


BAD_SETTINGS = [  # model flags (as ns-train's, less "--pipeline.model.") -> the one line printed after "ns-train: "
    (["--encoding-config", '{"otype": "NoSuch"}'], "encoding_config: unknown encoding otype 'NoSuch'; valid otypes: "),
    (["--encoding-config", '{"otype": "HashGrid", "n_levles": 4}'],
     "encoding_config: HashGrid: unknown config key 'n_levles' (did you mean 'n_levels'?); valid keys: "),
    (["--encoding-config", '{"otype": "HashGrid", "per_level_scale": "x"}'],
     "encoding_config: HashGrid: 'per_level_scale' must be a finite number, got 'x'"),
    (["--encoding-config", '{"otype": "HashGrid"'], "encoding_config: not valid JSON: "),
    (["--encoding-config", "no/such/file.yaml"], "encoding_config: no config file or named config 'no/such/file.yaml'"),
    (["--encoding-config", '{"encoding": {"otype": "NeRF"}, "netwrok": {}}'],
     "encoding_config: unknown field config keys ['netwrok']"),
    (["--encoding.log2-hashmap-size", "-3"], "encoding: HashGrid: 'log2_hashmap_size' must be in [1, 31], got -3"),
    (["--encoding.otype", "Frequency"], "encoding: Frequency: unknown config key 'n_levels'"),
    (["--network.n-neurons", "0"], "network: 'n_neurons' must be >= 1, got 0"),
    (["--direction-encoding.degree", "12"],
     "direction_encoding: SphericalHarmonics: 'degree' must be in [1, 8], got 12"),
    (["--color-network.activation", "Foo"], "color_network: 'activation' must be one of "),
    (["--geo-feat-dim", "-1"], "InrNerfModelConfig: need geo_feat_dim >= 0"),
    (["--appearance-embedding-dim", "-1"], "InrNerfModelConfig: need appearance_embedding_dim >= 0"),
    (["--camera-optimizer.trans-l2-penalty", "-0.1"],
     "InrNerfModelConfig: need camera_optimizer.trans_l2_penalty >= 0"),
    (["--camera-optimizer.rot-l2-penalty", "nan"], "InrNerfModelConfig: need camera_optimizer.rot_l2_penalty >= 0"),
]


@pytest.mark.parametrize("args, message", BAD_SETTINGS)
def test_bad_settings_on_the_command_line_print_one_line_and_exit_2(args, message, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ns-train"])
    with pytest.raises(SystemExit) as exit_info:
        tyro.cli(InrNerfModelConfig, args=args)  # what ns-train's parser does with --pipeline.model.*
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ns-train: {message}"), lines


def test_bad_settings_in_python_raise_value_errors_naming_the_setting():
    with pytest.raises(ValueError, match=r"^encoding: HashGrid: 'log2_hashmap_size' must be in \[1, 31\], got -3$"):
        InrNerfModelConfig(encoding={**InrNerfModelConfig().encoding, "log2_hashmap_size": -3})
    with pytest.raises(ValueError, match=r"^color_network: unknown config key 'n_nerons' \(did you mean 'n_neurons'"):
        InrNerfModelConfig(color_network={"n_nerons": 3})
    with pytest.raises(ValueError, match=r"^network: 'network' must be a mapping"):
        InrNerfModelConfig(network=None)

    def build_in_a_tyro_program():  # code that tyro runs, rather than tyro building the config: a ValueError
        return InrNerfModelConfig(encoding_config='{"otype": "NoSuch"}')

    with pytest.raises(ValueError, match="encoding_config: unknown encoding otype 'NoSuch'"):
        tyro.cli(build_in_a_tyro_program, args=[])


@pytest.mark.slow
@pytest.mark.parametrize("flags, message", [
    (["--pipeline.model.encoding-config", '{"otype": "HashGrid", "n_levles": 4}'],
     "ns-train: encoding_config: HashGrid: unknown config key 'n_levles' (did you mean 'n_levels'?); valid keys: "
     "base_resolution, fixed_point_pos, hash, interpolation, log2_hashmap_size, n_features, n_features_per_level, "
     "n_grid_features, n_levels, per_level_scale, seed, stochastic_interpolation, type"),
    (["--pipeline.model.encoding.log2-hashmap-size", "-3"],
     "ns-train: encoding: HashGrid: 'log2_hashmap_size' must be in [1, 31], got -3"),
])
def test_ns_train_refuses_bad_settings_in_one_line_before_creating_its_output_folder(flags, message, tmp_path):
    result = subprocess.run(
        [str(BIN / "ns-train"), "inr-hashgrid", "--machine.device-type", "cpu", "--vis", "tensorboard",
         "--output-dir", str(tmp_path / "outputs"), *flags, "blender-data", "--data", str(SCENE)],
        cwd=tmp_path, env={**CPU_ENV, "PYTHONWARNINGS": "ignore"},  # torch's and nerfstudio's FutureWarnings
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.splitlines() == [message]
    assert list(tmp_path.iterdir()) == []  # no outputs/, no config.yml


def test_rays_that_miss_everything_render_the_background():
    from nerfstudio.cameras.rays import RayBundle

    model = small_model()
    model.eval()
    rays = RayBundle(origins=torch.tensor([[0.0, 0.0, -4.0]]).repeat(5, 1),
                     directions=torch.tensor([[0.0, 0.0, -1.0]]).repeat(5, 1), pixel_area=torch.full((5, 1), 1e-4))
    outputs = model.get_outputs(rays)
    assert torch.equal(outputs["rgb"], torch.ones(5, 3)) and torch.equal(outputs["accumulation"], torch.zeros(5, 1))
    assert model.get_rgba_image(outputs).shape == (5, 4)


def packed_samples(pixel_area):
    g = torch.Generator().manual_seed(0)
    origins = torch.randn(64, 3, generator=g) * 0.1 + torch.tensor([0.0, 0.0, -4.0])
    directions = torch.nn.functional.normalize(torch.randn(64, 3, generator=g) * 0.1 + torch.tensor([0.0, 0.0, 1.0]),
                                               dim=-1)
    starts = 3.5 + torch.rand(64, 1, generator=g)
    return RaySamples(frustums=Frustums(origins=origins, directions=directions, starts=starts, ends=starts + 0.02,
                                        pixel_area=torch.full((64, 1), pixel_area)))


def test_hybrid_reads_each_samples_frustum_gaussian_in_unit_coordinates():
    model = small_model(dict(hyb_nerf.config.pipeline.model.encoding, n_levels=6, log2_hashmap_size=12))
    field = model.field
    seen = {}
    forward = field.position_encoder.forward
    field.position_encoder.forward = lambda x, cov=None: seen.update(x=x, cov=cov) or forward(x, cov)
    samples = packed_samples(1e-4)
    field.get_density(samples)
    f = samples.frustums
    mean, cov = frustum_gaussian(f.origins.double(), f.directions.double(), f.starts[:, 0].double(),
                                 f.ends[:, 0].double(), torch.sqrt(f.pixel_area[:, 0].double() / math.pi))
    assert torch.allclose(seen["x"].double(), (mean + 1.5) / 3, atol=1e-5)
    assert torch.allclose(seen["cov"].double(), cov / 9, rtol=1e-3, atol=1e-10)
    wide = field.get_density(packed_samples(1e-1))[0]  # bigger pixels: more of the Fourier features averaged out
    assert not torch.allclose(wide, field.get_density(packed_samples(1e-4))[0])


def test_progressive_encoder_follows_the_training_step():
    model = small_model({"otype": "Progressive", "end_step": 100,
                         "nested": {"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 12}})
    callbacks = model.get_training_callbacks(None)
    from nerfstudio.engine.callbacks import TrainingCallbackLocation

    for callback in callbacks:
        callback.run_callback_at_location(40, TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
    assert int(model.field.position_encoder.step) == 40
    model.update_to_step(70)  # what loading a checkpoint calls
    assert int(model.field.position_encoder.step) == 70


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The run folder of ns-train inr-hashgrid, 30 iterations on CPU, on the bundled scene with its first
    TEST_VIEWS test views (ns-eval and ns-render go through all of them, an untrained model slowest of all)."""
    out = tmp_path_factory.mktemp("ns")
    scene = scene_with_test_views(out, TEST_VIEWS)
    run(BIN / "ns-train", "inr-hashgrid", "--machine.device-type", "cpu", "--max-num-iterations", 30,
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--output-dir", out,
        "--experiment-name", "primitives", "--timestamp", "run", "--steps-per-eval-batch", "0",
        "--steps-per-eval-image", "0", "blender-data", "--data", scene)
    return out / "primitives" / "inr-hashgrid" / "run"


@pytest.mark.slow
def test_checkpoints_load_with_weights_only(trained):
    checkpoint = max((trained / "nerfstudio_models").glob("step-*.ckpt"))
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)  # torch >= 2.6's default, made explicit
    assert state["step"] == 29 and "optimizers" in state and "schedulers" in state
    assert any(key.endswith("field.position_encoder.params") for key in state["pipeline"])


@pytest.mark.slow
def test_ns_train_then_ns_eval_beats_the_untrained_model(trained):
    output = trained / "eval.json"
    run(BIN / "ns-eval", "--load-config", trained / "config.yml", "--output-path", output)
    results = json.loads(output.read_text())["results"]
    assert results["num_rays_per_sec"] > 0 and 0 < results["ssim"] <= 1
    # the same pipeline (config.yml of the run), freshly initialised, on the same test views and metrics
    import yaml

    config = yaml.load((trained / "config.yml").read_text(), Loader=yaml.Loader)
    untrained = config.pipeline.setup(device="cpu", test_mode="test").get_average_eval_image_metrics()
    assert results["psnr"] > untrained["psnr"] + 3, (results["psnr"], untrained["psnr"])


@pytest.mark.slow
def test_load_dir_resumes_training(trained, tmp_path):
    run(BIN / "ns-train", "inr-hashgrid", "--machine.device-type", "cpu", "--max-num-iterations", 2,
        "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--output-dir", tmp_path,
        "--load-dir", trained / "nerfstudio_models", "blender-data", "--data", SCENE)
    resumed = list(tmp_path.glob("**/step-*.ckpt"))
    assert [p.name for p in resumed] == ["step-000000031.ckpt"]


@pytest.mark.slow
def test_ns_render_renders_the_test_views(trained, tmp_path):
    run(BIN / "ns-render", "dataset", "--load-config", trained / "config.yml", "--split", "test",
        "--rendered-output-names", "rgb", "--output-path", tmp_path)
    rendered = sorted(tmp_path.glob("**/*.png")) + sorted(tmp_path.glob("**/*.jpg"))
    assert len(rendered) == TEST_VIEWS


def test_bundled_scene_loads_with_nerfstudios_blender_parser():
    import imageio.v3 as iio
    from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig

    parser = BlenderDataParserConfig(data=SCENE).setup()
    counts = {split: len(parser.get_dataparser_outputs(split).image_filenames) for split in ("train", "val", "test")}
    assert counts == {"train": 40, "val": 10, "test": 20}
    outputs = parser.get_dataparser_outputs("test")
    assert int(outputs.cameras.width[0]) == 100 and int(outputs.cameras.height[0]) == 100
    rgba = iio.imread(outputs.image_filenames[0])
    # transparent background
    assert rgba.shape == (100, 100, 4) and rgba[..., 3].min() == 0 and rgba[..., 3].max() == 255


def test_lpips_is_skipped_unless_its_weights_are_on_disk(tmp_path, monkeypatch):
    from inr_enc.nerfstudio.evaluation import lpips_if_weights_on_disk

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache: building LPIPS would download
    assert lpips_if_weights_on_disk() is None
