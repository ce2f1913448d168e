"""Our ns-train methods (entry-point group ``nerfstudio.method_configs`` in pyproject.toml):

- ``inr-hashgrid``: Instant-NGP's field on inr_enc's HashGrid;
- ``hyb-nerf``: the same field on the Hybrid encoding (Hyb-NeRF, Wang et al. 2024), cone traced;
- ``inr-fourier``: a NeRF-style field (Mildenhall et al. 2020) on Gaussian random Fourier features (Tancik et al.
  2020) of the position, NeRF's positional encoding of the view direction.

nerfstudio imports this module whenever any ns-* command starts, so importing it must be quick and never raise:
it builds configs only (no tinycudann import, no files read, no network).
Defaults are sized for CPU: a 100x100 Blender scene trains in minutes on 2 cores (docs/nerf.md). Real captures
(unbounded scenes) get nerfacto's camera pose refinement by default, and its "camera_opt" optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nerfstudio.configs.base_config import ViewerConfig
from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManagerConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.engine.trainer import TrainerConfig
from nerfstudio.pipelines.dynamic_batch import DynamicBatchPipelineConfig
from nerfstudio.plugins.types import MethodSpecification
from nerfstudio.utils.rich_utils import CONSOLE

from .model import HASHGRID, InrNerfModelConfig
from .optimizers import LazyAdamOptimizerConfig, LogLinearDecaySchedulerConfig, tcnn_optimizers
from .scene_defaults import camera_optimizer_mode_for, sampler_for, samples_per_batch_for, scene_contraction_for

MAX_ITERATIONS = 2000

HYBRID = {**HASHGRID, "otype": "Hybrid", "split_level": 4, "coarse": "Fourier", "n_frequencies": 16}
# sigma 3 cycles per scene-box width: with NeRF's encoding (10 frequencies) the field learned nothing in 300 s on
# 2 cores (pure background, docs/nerf.md); with these it learns within the first 150 steps
FOURIER_POSITIONS = {"otype": "RandomFourier", "n_features": 128, "sigma": 3.0}
NERF_DIRECTIONS = {"otype": "NeRF", "n_frequencies": 4}
NERF_NETWORK = {"otype": "MLP", "activation": "ReLU", "n_neurons": 128, "n_hidden_layers": 4}


@dataclass
class InrPipelineConfig(DynamicBatchPipelineConfig):
    """Instant-NGP's batches (rays per batch follow a sample budget). When the pipeline is built (ns-train, ns-eval,
    ns-render), the model's ``scene_contraction``, ``sampler`` and ``camera_optimizer.mode`` "auto" and the
    pipeline's ``target_num_samples`` 0 are settled from the dataparser in use and its training cameras
    (scene_defaults.py), so config.yml keeps "auto" and every command settles them the same way (a checkpoint's
    proposal fields and pose adjustments load into the model that made them); the log says which modes run."""

    target_num_samples: int = 0
    """Samples per training batch (the rays per batch follow); 0: 2^16 for blender-data and dnerf-data, 2^15 for
    every other dataparser (scene_defaults.py ``samples_per_batch_for``)."""

    def setup(self, **kwargs: Any) -> Any:
        dataparser = self.datamanager.dataparser
        self.target_num_samples = samples_per_batch_for(self.target_num_samples, dataparser)
        if isinstance(self.model, InrNerfModelConfig):
            mode = scene_contraction_for(self.model.scene_contraction, dataparser)
            self.model.scene_contraction = mode

            def training_poses() -> Any:  # the dataparser's train split: its poses (no image is loaded)
                return dataparser.setup().get_dataparser_outputs("train").cameras.camera_to_worlds

            self.model.sampler = sampler_for(self.model.sampler, mode, training_poses)
            poses = camera_optimizer_mode_for(self.model.camera_optimizer.mode, dataparser)
            self.model.camera_optimizer.mode = poses
            scene = ("a bounded scene (the scene box)" if mode == "none"
                     else f"an unbounded scene ({mode} contraction beyond the scene box)")
            CONSOLE.log(f"inr_enc: {scene}, {self.model.sampler} sampling, camera pose refinement {poses}, "
                        f"{self.target_num_samples} samples per batch")
        return super().setup(**kwargs)


@dataclass
class InrTrainerConfig(TrainerConfig):
    """nerfstudio's TrainerConfig; a model config that read an Instant-NGP config (``instant_ngp_config``) sets the
    optimizers from its optimizer section (optimizers.py ``tcnn_optimizers``) when the config is made."""

    def __post_init__(self) -> None:
        training = getattr(self.pipeline.model, "tcnn_optimizer", None)
        if training:
            self.optimizers = tcnn_optimizers(training, self.optimizers.get("camera_opt"))
            CONSOLE.log(f"inr_enc: the optimizers follow the Instant-NGP config ({training}); --optimizers flags "
                        f"for 'fields' and 'grids' do not apply")


def _trainer(name: str, model: InrNerfModelConfig, lr: float, table_lr: float) -> TrainerConfig:
    """Adam (eps 1e-15, as Instant-NGP; torch's betas (0.9, 0.999) where tcnn uses (0.9, 0.99)) for the
    networks at ``lr``, tcnn's lazy Adam for grid tables at ``table_lr``; both decay 10x over MAX_ITERATIONS
    (fixed here: a longer --max-num-iterations keeps the final rate after that). The Blender parser keeps RGBA,
    so the model composites the ground truth over its own background. "camera_opt" (the pose adjustments, while
    pose refinement is on) is nerfacto's: Adam lr 1e-3, eps 1e-15, decaying to 1e-4 over 5,000 steps as its
    ExponentialDecayScheduler does (without numpy, optimizers.py); with refinement off the group is absent and
    nerfstudio's Optimizers skips this entry."""
    optimizers: dict[str, Any] = {
        "fields": {"optimizer": AdamOptimizerConfig(lr=lr, eps=1e-15),
                   "scheduler": LogLinearDecaySchedulerConfig(lr_final=lr / 10, max_steps=MAX_ITERATIONS)},
        "grids": {"optimizer": LazyAdamOptimizerConfig(lr=table_lr, eps=1e-15),
                  "scheduler": LogLinearDecaySchedulerConfig(lr_final=table_lr / 10, max_steps=MAX_ITERATIONS)},
        "camera_opt": {"optimizer": AdamOptimizerConfig(lr=1e-3, eps=1e-15),
                       "scheduler": LogLinearDecaySchedulerConfig(lr_final=1e-4, max_steps=5000)},
    }
    return InrTrainerConfig(
        method_name=name,
        steps_per_eval_batch=500,
        steps_per_eval_image=500,
        steps_per_save=500,
        max_num_iterations=MAX_ITERATIONS,
        mixed_precision=False,
        pipeline=InrPipelineConfig(
            datamanager=VanillaDataManagerConfig(dataparser=BlenderDataParserConfig(alpha_color=None)),
            model=model,
            max_num_samples_per_ray=1 << 9,
        ),
        optimizers=optimizers,
        viewer=ViewerConfig(num_rays_per_chunk=1 << 13),
        vis="viewer",
    )


inr_hashgrid = MethodSpecification(
    config=_trainer("inr-hashgrid", InrNerfModelConfig(), lr=1e-2, table_lr=1e-2),
    description="Instant-NGP-style field on inr_enc's HashGrid, occupancy-grid or proposal sampling by scene; runs "
                "on CPU and CUDA.",
)
hyb_nerf = MethodSpecification(
    # the learnable Fourier levels need the lower rate: at 1e-2 training stalled at ~13 dB on the bounded object;
    # on unbounded scenes no rate tried lifts it out of the Fourier levels' fog (docs/nerf.md)
    # the occupancy grid everywhere: proposal sampling lost 2.3 dB on the unbounded scene and gained 3.0 on the
    # room, both still in the fog (docs/nerf.md)
    config=_trainer("hyb-nerf", InrNerfModelConfig(encoding=dict(HYBRID), sampler="occupancy"), lr=1e-3,
                    table_lr=1e-2),
    description="Hyb-NeRF: Fourier features cone traced over each sample's frustum at coarse levels, hash grid at "
                "fine levels (inr_enc Hybrid). For bounded scenes: on unbounded or forward-facing captures its global "
                "Fourier levels give a fog (docs/nerf.md); use inr-hashgrid.",
)
inr_fourier = MethodSpecification(
    config=_trainer("inr-fourier", InrNerfModelConfig(  # the occupancy grid everywhere, as hyb-nerf
        encoding=dict(FOURIER_POSITIONS), network=dict(NERF_NETWORK), direction_encoding=dict(NERF_DIRECTIONS),
        sampler="occupancy"), lr=2e-3, table_lr=2e-3),
    description="NeRF-style field on inr_enc's Gaussian random Fourier features (any encoder via "
                "--pipeline.model.encoding-config, e.g. '{\"otype\": \"NeRF\"}'). For bounded scenes, as hyb-nerf.",
)
