"""The plugin on unbounded scenes: which dataparsers contract space, and a contracted model that learns a sky as
density beyond the scene box (the constant background colour of a bounded scene cannot be it)."""

import pytest

pytest.importorskip("nerfstudio")

import torch  # noqa: E402
from nerfstudio.cameras.rays import RayBundle  # noqa: E402
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig  # noqa: E402
from nerfstudio.data.dataparsers.colmap_dataparser import ColmapDataParserConfig  # noqa: E402
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402

from inr_enc.nerfstudio.methods import InrPipelineConfig, hyb_nerf, inr_fourier, inr_hashgrid  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.scene_defaults import samples_per_batch_for, scene_contraction_for  # noqa: E402

SMALL_GRID = {"otype": "HashGrid", "n_levels": 8, "log2_hashmap_size": 14, "base_resolution": 8, "per_level_scale": 1.5}


def test_the_dataparser_settles_auto_and_a_setting_overrides_it():
    assert scene_contraction_for("auto", BlenderDataParserConfig()) == "none"
    assert scene_contraction_for("auto", NerfstudioDataParserConfig()) == "linf"
    assert scene_contraction_for("auto", ColmapDataParserConfig()) == "linf"
    assert scene_contraction_for("l2", BlenderDataParserConfig()) == "l2"
    assert scene_contraction_for("none", NerfstudioDataParserConfig()) == "none"
    for method in (inr_hashgrid, hyb_nerf, inr_fourier):
        assert isinstance(method.config.pipeline, InrPipelineConfig)
        assert method.config.pipeline.model.scene_contraction == "auto"
        assert method.config.pipeline.target_num_samples == 0


def test_the_dataparser_settles_the_samples_per_batch():
    assert samples_per_batch_for(0, BlenderDataParserConfig()) == 1 << 16
    assert samples_per_batch_for(0, NerfstudioDataParserConfig()) == 1 << 15
    assert samples_per_batch_for(0, ColmapDataParserConfig()) == 1 << 15
    assert samples_per_batch_for(4096, NerfstudioDataParserConfig()) == 4096
    with pytest.raises(ValueError, match="target_num_samples must be >= 0"):
        samples_per_batch_for(-1, BlenderDataParserConfig())


def _rays(seed, n=128):
    """Rays from points inside the box [-1, 1]^3, every direction; the target is a sky: blue above the horizon,
    brown below, a function of the direction alone (content at infinity)."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=-1)
    origins = torch.rand(n, 3, generator=g) - 0.5
    target = torch.where(directions[:, 2:] > 0, torch.tensor([0.3, 0.5, 0.9]), torch.tensor([0.5, 0.35, 0.2]))
    bundle = RayBundle(origins=origins, directions=directions, pixel_area=torch.full((n, 1), 1e-4),
                       camera_indices=torch.zeros(n, 1, dtype=torch.long))
    return bundle, target


@pytest.mark.slow
def test_a_contracted_model_learns_the_sky_as_density_beyond_the_box():
    torch.manual_seed(0)
    config = InrNerfModelConfig(scene_contraction="linf", encoding=dict(SMALL_GRID), grid_resolution=16,
                                grid_update_every=4, background_color="white")
    model = config.setup(scene_box=SceneBox(torch.tensor([[-1.0] * 3, [1.0] * 3])), num_train_data=1)
    assert model.field.contraction == "linf"
    model.train()
    optimizer = torch.optim.Adam([p for group in model.get_param_groups().values() for p in group], lr=1e-2, eps=1e-15)
    callbacks = model.get_training_callbacks(None)
    for step in range(30):
        for callback in callbacks:
            callback.run_callback_at_location(step, callback.where_to_run[0])
        bundle, target = _rays(step)
        loss = ((model.get_outputs(bundle)["rgb"] - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    bundle, target = _rays(1000)  # unseen origins and directions
    with torch.no_grad():
        outputs = model.get_outputs(bundle)
    mse = float(((outputs["rgb"] - target) ** 2).mean())
    assert mse < 0.01, mse  # white background everywhere would be about 0.3
    assert float(outputs["accumulation"].min()) > 0.98  # the sky is opaque density, not the background colour
    rays, starts, ends = model.occupancy.sample(bundle.origins, bundle.directions)
    assert float(ends.max()) > 100  # rays are sampled far beyond the box (cone-angle steps)


@pytest.mark.slow
def test_ns_train_then_ns_eval_on_the_unbounded_capture_beats_the_untrained_model(tmp_path):
    """The bundled 360-degree capture through ns-train's nerfstudio-data parser (COLMAP's estimated poses, so pose
    refinement too), a short run, then ns-eval on the held-out views against the same pipeline untrained."""
    import json

    import yaml
    from test_nerfstudio_plugin import BIN, ROOT, run

    result = run(BIN / "ns-train", "inr-hashgrid", "--machine.device-type", "cpu", "--max-num-iterations", 30,
                 "--vis", "tensorboard", "--viewer.quit-on-train-completion", "True", "--output-dir", tmp_path,
                 "--experiment-name", "capture", "--timestamp", "run", "--steps-per-eval-batch", "0",
                 "--steps-per-eval-image", "0", "--pipeline.model.grid-resolution", 32,
                 "--pipeline.target-num-samples", 16384, "nerfstudio-data",
                 "--data", ROOT / "data" / "scenes" / "unbounded-colmap", "--downscale-factor", 2,
                 "--eval-mode", "interval", "--eval-interval", 64)
    assert ("inr_enc: an unbounded scene (linf contraction beyond the scene box), proposal sampling"
            in " ".join(result.stdout.split()))  # an orbit: not forward-facing
    trained = tmp_path / "capture" / "inr-hashgrid" / "run"
    checkpoint = torch.load(max((trained / "nerfstudio_models").glob("step-*.ckpt")), weights_only=True)
    poses = [v for k, v in checkpoint["pipeline"].items() if k.endswith("camera_optimizer.pose_adjustment")]
    assert len(poses) == 1 and poses[0].shape == (63, 6) and float(poses[0].abs().max()) > 0  # refined
    output = tmp_path / "eval.json"
    run(BIN / "ns-eval", "--load-config", trained / "config.yml", "--output-path", output)
    results = json.loads(output.read_text())["results"]
    config = yaml.load((trained / "config.yml").read_text(), Loader=yaml.Loader)
    untrained = config.pipeline.setup(device="cpu", test_mode="test")
    assert len(untrained.datamanager.fixed_indices_eval_dataloader) == 1  # view 0 of 64 held out
    untrained = untrained.get_average_eval_image_metrics()
    assert results["psnr"] > untrained["psnr"] + 3, (results["psnr"], untrained["psnr"])


@pytest.mark.parametrize("contraction", ["none", "linf"])
def test_rendering_reuses_the_density_pass_and_matches_the_full_field(contraction):
    """When rendering, the model composites the sampler's own densities and geometry features (only the colour
    branch runs again); the reference here evaluates the whole field at the same samples, as training does."""
    from nerfstudio.cameras.rays import Frustums, RaySamples
    from nerfstudio.field_components.field_heads import FieldHeadNames

    from inr_enc.nerf.volume_rendering import accumulate, render_weights

    torch.manual_seed(1)
    config = InrNerfModelConfig(scene_contraction=contraction, encoding=dict(SMALL_GRID), grid_resolution=16,
                                render_alpha_threshold=0.0)  # an untrained field: every sample is faint
    model = config.setup(scene_box=SceneBox(torch.tensor([[-1.0] * 3, [1.0] * 3])), num_train_data=1)
    model.occupancy.update(0, lambda x: model.field.density_fn(x).reshape(-1) * 0.01)
    model.eval()
    bundle, _ = _rays(7, n=64)
    with torch.no_grad():
        outputs = model.get_outputs(bundle)
        o, d = bundle.origins, bundle.directions
        rays, starts, ends = model.occupancy.sample(o, d, model.field.density_fn, early_stop_eps=config.early_stop_eps,
                                                    alpha_threshold=config.render_alpha_threshold)
        samples = RaySamples(frustums=Frustums(origins=o[rays], directions=d[rays], starts=starts[:, None],
                                               ends=ends[:, None], pixel_area=bundle.pixel_area[rays]))
        field = model.field(samples)
        weights, _ = render_weights(field[FieldHeadNames.DENSITY].reshape(-1), ends - starts, rays, 64)
        rgb = accumulate(weights[:, None] * field[FieldHeadNames.RGB], rays, 64)
        opacity = accumulate(weights[:, None], rays, 64)
    assert len(rays) > 64
    assert torch.allclose(outputs["rgb"], rgb + (1 - opacity) * model.background, atol=1e-5)
    assert torch.allclose(outputs["accumulation"], opacity, atol=1e-5)


def test_distortion_loss_is_weighted_into_training_only():
    torch.manual_seed(2)
    config = InrNerfModelConfig(scene_contraction="linf", encoding=dict(SMALL_GRID), grid_resolution=16,
                                distortion_loss_mult=0.5)
    model = config.setup(scene_box=SceneBox(torch.tensor([[-1.0] * 3, [1.0] * 3])), num_train_data=1)
    bundle, target = _rays(3, n=32)
    outputs = model.get_outputs(bundle)
    losses = model.get_loss_dict(outputs, {"image": target})
    assert outputs["distortion"].shape == (32,) and bool((outputs["distortion"] >= 0).all())
    assert torch.allclose(losses["distortion_loss"], 0.5 * outputs["distortion"].mean())
    assert float(outputs["distortion"].max()) > 0  # an untrained field spreads every ray's weight
    model.eval()
    with torch.no_grad():
        assert "distortion" not in model.get_outputs(bundle)
