"""The sampler a scene settles ("auto"): the occupancy grid on bounded scenes and forward-facing rigs, proposal
sampling on other unbounded ones; forward-facing judged from the training cameras' viewing directions."""

import json
import math
import re
from pathlib import Path

import pytest

pytest.importorskip("nerfstudio")

import torch  # noqa: E402

from inr_enc.nerfstudio.scene_defaults import FORWARD_FACING_DEGREES, forward_facing, sampler_for  # noqa: E402
from inr_enc.nerfstudio.settings import saved_as_built  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def looking_along(views: list[list[float]]) -> torch.Tensor:
    """Unit viewing directions [N, 3] -> camera_to_worlds [N, 3, 4] (OpenGL axes: -z is the view), centres 0."""
    poses = []
    for view in views:
        back = -torch.tensor(view, dtype=torch.float64)
        back = back / back.norm()
        helper = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
        if abs(float(back @ helper)) > 0.9:
            helper = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
        right = torch.linalg.cross(helper, back)
        right = right / right.norm()
        up = torch.linalg.cross(back, right)
        poses.append(torch.cat([torch.stack([right, up, back], 1), torch.zeros(3, 1, dtype=torch.float64)], 1))
    return torch.stack(poses)


def fan(degrees: float, n: int = 8) -> list[list[float]]:
    """n views tilted ``degrees`` from +y, spread round it evenly: their mean is +y, each ``degrees`` off it."""
    a = math.radians(degrees)
    return [[math.sin(a) * math.cos(2 * math.pi * k / n), math.cos(a), math.sin(a) * math.sin(2 * math.pi * k / n)]
            for k in range(n)]


def test_a_rig_is_forward_facing_while_every_camera_is_within_the_angle_of_the_mean():
    assert forward_facing(looking_along(fan(FORWARD_FACING_DEGREES - 1)))
    assert not forward_facing(looking_along(fan(FORWARD_FACING_DEGREES + 1)))
    orbit = [[-math.cos(2 * math.pi * k / 16), -math.sin(2 * math.pi * k / 16), -0.2] for k in range(16)]
    assert not forward_facing(looking_along(orbit))  # cameras round a centre, looking in and a little down
    assert not forward_facing(looking_along([[1, 0, 0], [-1, 0, 0]]))  # mean direction zero
    one_turned = fan(5) + [[1.0, 0.2, 0.0]]  # 79 degrees off the others
    assert not forward_facing(looking_along(one_turned))


@pytest.mark.parametrize("scene, expected", [("forward", True), ("forward-colmap", True), ("unbounded", False),
                                             ("unbounded-colmap", False), ("room", False), ("tower", False),
                                             ("tower-colmap", False)])
def test_the_scene_sets_forward_facing_scenes_are_told_from_the_others(scene, expected):
    """The set's rendered LLFF-style rig (and its COLMAP poses) against its orbits and room, from transforms.json
    (the dataparser's rotation of the world keeps the angles between views)."""
    frames = json.loads((ROOT / "data" / "scenes" / scene / "transforms.json").read_text())["frames"]
    poses = torch.tensor([frame["transform_matrix"] for frame in frames], dtype=torch.float64)[:, :3, :]
    assert forward_facing(poses) is expected


def test_auto_sampler_settles_by_scene_and_a_setting_overrides_it():
    def never() -> torch.Tensor:
        raise AssertionError("the cameras are read only for an unbounded scene with sampler auto")

    assert sampler_for("auto", "none", never) == "occupancy"
    assert sampler_for("proposal", "linf", never) == "proposal"
    assert sampler_for("occupancy", "linf", never) == "occupancy"
    assert sampler_for("auto", "linf", lambda: looking_along(fan(10))) == "occupancy"
    assert sampler_for("auto", "l2", lambda: looking_along(fan(80))) == "proposal"


def test_a_config_saved_before_the_sampler_setting_keeps_the_occupancy_grid():
    assert saved_as_built({"written_by": "0.3.0"})["sampler"] == "occupancy"
    assert saved_as_built({"written_by": "0.3.0", "sampler": "auto"})["sampler"] == "auto"
    # a run from before the render counts renders with its training counts; a newer one with what it saved
    before = saved_as_built({"written_by": "0.3.0", "proposal_samples": (256, 96), "proposal_samples_per_ray": 48})
    assert (before["proposal_render_samples"], before["proposal_render_samples_per_ray"]) == ((256, 96), 48)
    after = saved_as_built({"written_by": "0.3.0", "proposal_samples": (256, 96), "proposal_samples_per_ray": 48,
                            "proposal_render_samples": (64, 32), "proposal_render_samples_per_ray": 32})
    assert (after["proposal_render_samples"], after["proposal_render_samples_per_ray"]) == ((64, 32), 32)


def test_a_config_yml_naming_the_camera_optimizer_config_in_settings_still_loads():
    """config.yml files written before scene_defaults.py name the class inr_enc.nerfstudio.settings's."""
    import yaml

    from inr_enc.nerfstudio.scene_defaults import AutoCameraOptimizerConfig

    text = "!!python/object:inr_enc.nerfstudio.settings.AutoCameraOptimizerConfig\nmode: auto\n"
    loaded = yaml.load(text, Loader=yaml.Loader)
    assert isinstance(loaded, AutoCameraOptimizerConfig) and loaded.mode == "auto"


def test_inr_hashgrid_settles_its_sampler_by_scene_and_the_other_methods_keep_the_occupancy_grid():
    from inr_enc.nerfstudio.methods import hyb_nerf, inr_fourier, inr_hashgrid

    assert inr_hashgrid.config.pipeline.model.sampler == "auto"
    assert hyb_nerf.config.pipeline.model.sampler == "occupancy"  # not measured with proposal sampling yet
    assert inr_fourier.config.pipeline.model.sampler == "occupancy"


@pytest.mark.parametrize("setting, message", [
    ({"sampler": "occupancy-grid"}, "sampler in (auto, occupancy, proposal)"),
    ({"scene_contraction": "L2"}, "scene_contraction in (auto, none, l2, linf)")])
def test_an_unknown_sampler_or_contraction_made_in_python_is_refused(setting, message):
    """tyro refuses these on the command line; made in Python they must not fall back silently to a sampler."""
    from inr_enc.nerfstudio.model import InrNerfModelConfig

    with pytest.raises(ValueError, match=re.escape(message)):
        InrNerfModelConfig(**setting)
