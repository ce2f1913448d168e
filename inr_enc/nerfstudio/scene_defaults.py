"""The defaults a scene settles (``"auto"`` settings): when the pipeline is built (ns-train, ns-eval, ns-render;
methods.py), each is chosen from the dataparser in use and, for the sampler, the training cameras' layout, so
config.yml keeps "auto" and every command settles it the same way.

- ``scene_contraction``: none on synthetic objects (blender-data, dnerf-data), L-inf (nerfacto's) elsewhere;
- ``sampler``: the occupancy grid on bounded scenes and forward-facing captures, proposal sampling elsewhere;
- ``target_num_samples``: samples per training batch, 2^16 bounded, 2^15 unbounded;
- ``camera_optimizer.mode``: pose refinement off on synthetic objects, nerfacto's SO3xR3 elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.dnerf_dataparser import DNeRFDataParserConfig

BOUNDED_DATAPARSERS = (BlenderDataParserConfig, DNeRFDataParserConfig)  # synthetic objects in a box
UNBOUNDED_CONTRACTION = "linf"  # nerfacto's SceneContraction(order=inf): the contracted cube fills the grid
SCENE_CONTRACTIONS = ("auto", "none", "l2", "linf")
SAMPLERS = ("auto", "occupancy", "proposal")


def scene_contraction_for(setting: str, dataparser: object) -> str:
    """``scene_contraction`` "auto" settled by the dataparser: "none" (bounded) for blender-data and dnerf-data,
    UNBOUNDED_CONTRACTION for every other (nerfstudio-data, colmap, ...: real captures); any other setting as is."""
    if setting != "auto":
        return setting
    return "none" if isinstance(dataparser, BOUNDED_DATAPARSERS) else UNBOUNDED_CONTRACTION


# A capture is forward-facing (LLFF's rigs) when every training camera looks within this angle of the cameras' mean
# viewing direction. Measured on the scene set (docs/nerf.md, 300 s each): on the rendered forward-facing rig (all
# within 3 degrees) proposal sampling put the whole scene in a shell just in front of the cameras (14.3 and 15.5 dB
# against 29.1 and 31.4 with the occupancy grid, true and COLMAP poses), and on the office capture (within 45
# degrees) it lost 0.8 dB; orbits, the room and the beer capture (whose cameras turn 77-98 degrees from the mean)
# gained 0.4-3.9 dB with it. The set has nothing between 45 and 77 degrees; 60 splits them.
FORWARD_FACING_DEGREES = 60.0


def forward_facing(camera_to_worlds: torch.Tensor) -> bool:
    """camera_to_worlds [N, 3, 4] (nerfstudio's: OpenGL axes, a camera looks along -z) -> whether every camera
    looks within FORWARD_FACING_DEGREES of the mean viewing direction."""
    views = -camera_to_worlds[:, :3, 2].double()
    views = views / views.norm(dim=-1, keepdim=True)
    mean = views.mean(0)
    if float(mean.norm()) < 1e-9:  # looking every way: an orbit
        return False
    return bool((views @ (mean / mean.norm())).min() >= math.cos(math.radians(FORWARD_FACING_DEGREES)))


def sampler_for(setting: str, contraction: str, camera_to_worlds: Callable[[], torch.Tensor]) -> str:
    """``sampler`` "auto" settled by the scene: "occupancy" on bounded scenes (``contraction`` "none") and on
    forward-facing captures (``forward_facing`` of the training cameras, read through ``camera_to_worlds`` only
    then), "proposal" on the other unbounded ones (orbits, rooms: 0.4-3.9 dB better than the occupancy grid there,
    docs/nerf.md); any other setting as is."""
    if setting != "auto":
        return setting
    if contraction == "none" or forward_facing(camera_to_worlds()):
        return "occupancy"
    return "proposal"


# Samples per training batch (nerfstudio's DynamicBatchPipeline sizes the rays per batch to fit): on real captures
# a young field keeps about 60 samples per ray (7 on the bundled object), so 2^16 samples held only about 1,000
# rays; half that budget doubles the steps in a fixed time and reached 26.6 and 26.7 dB instead of 23.2 and 24.0 dB
# on data/scenes/unbounded in 300 s (docs/nerf.md). Bounded scenes keep Instant-NGP-like 2^16.
BOUNDED_SAMPLES_PER_BATCH = 1 << 16
UNBOUNDED_SAMPLES_PER_BATCH = 1 << 15


def samples_per_batch_for(setting: int, dataparser: object) -> int:
    """``target_num_samples`` 0 ("auto") settled as ``scene_contraction`` is: BOUNDED_SAMPLES_PER_BATCH for
    blender-data and dnerf-data, UNBOUNDED_SAMPLES_PER_BATCH for every other; a positive setting as is."""
    if setting < 0:
        raise ValueError(f"target_num_samples must be >= 0 (0: by the dataparser), got {setting}")
    if setting:
        return setting
    return BOUNDED_SAMPLES_PER_BATCH if isinstance(dataparser, BOUNDED_DATAPARSERS) else UNBOUNDED_SAMPLES_PER_BATCH


CAMERA_OPTIMIZER_MODES = ("auto", "off", "SO3xR3", "SE3")
UNBOUNDED_CAMERA_OPTIMIZER = "SO3xR3"  # nerfacto's pose refinement (its method configs set this mode)


@dataclass
class AutoCameraOptimizerConfig(CameraOptimizerConfig):
    """nerfstudio's CameraOptimizerConfig (pose refinement, nerfstudio's CameraOptimizer) with one more mode,
    "auto": settled by the dataparser (``camera_optimizer_mode_for``) when the pipeline is built."""

    mode: Literal["auto", "off", "SO3xR3", "SE3"] = "auto"
    """"auto": "off" for blender-data and dnerf-data (exact synthetic poses), "SO3xR3" for every other dataparser
    (real captures, poses from structure-from-motion); "SO3xR3" is what nerfstudio recommends."""


def camera_optimizer_mode_for(setting: str, dataparser: object) -> str:
    """``camera_optimizer.mode`` "auto" settled as ``scene_contraction`` is: "off" for the bounded (synthetic)
    dataparsers, UNBOUNDED_CAMERA_OPTIMIZER for every other; any other setting as is."""
    if setting != "auto":
        return setting
    return "off" if isinstance(dataparser, BOUNDED_DATAPARSERS) else UNBOUNDED_CAMERA_OPTIMIZER
