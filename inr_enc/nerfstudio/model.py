"""A nerfstudio Model around :class:`EncodedRadianceField` in plain torch, so it trains and renders on CPU as well as
on CUDA. Unbounded scenes (``scene_contraction``): space beyond the scene box is contracted (mip-NeRF 360), so the
sky and the far field are density. Samples come from an Instant-NGP occupancy grid (over the box, or over
contracted space with cone-angle steps: sampling.py) or from proposal fields (``sampler``; proposal.py).

Per batch of rays, with the occupancy grid: march the occupied cells front to back, evaluating density alone (no
autograd) and keeping the samples a ray still sees (transmittance > ``early_stop_eps``, Instant-NGP's early ray
termination); run the full field on those (when rendering, only the colour branch: the density pass already gave
their density and geometry features) and composite them over a constant background. Metrics: evaluation.py.

Real captures, as nerfacto: pose refinement by nerfstudio's CameraOptimizer (``camera_optimizer``) on the training
rays (its "camera_opt" param group, regulariser loss and metrics); an optional per-image appearance embedding.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Dict, List, Literal, Optional, Tuple, Type

import torch
from nerfstudio.cameras.camera_optimizers import CameraOptimizer
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.model_components import renderers
from nerfstudio.models.base_model import Model, ModelConfig
from torch import nn
from torch.profiler import record_function
from tyro.conf import Suppress

from ..config.backends import BACKENDS
from ..nerf.space import frame_world_box
from ..nerf.volume_rendering import composite, distortion
from ..ops.ranks import mean_over_ranks
from ..ops.schedules import set_training_step
from ..optim import grid_tables
from ..optim.losses import elementwise_loss
from ..version import __version__
from .evaluation import image_metrics_and_images, lpips_if_weights_on_disk, over_background
from .field import EncodedRadianceField
from .proposal import ProposalSampling
from .sampling import build_grid, crop_limits, packed_ray_samples, ray_limits
from .scene_defaults import AutoCameraOptimizerConfig
from .settings import check_model_settings, command_line_errors, saved_as_built
from .weight_average import average_field_weights

# Instant-NGP's field (Müller et al. 2022, §5.4), sized for CPU: 16 levels from 16 to 512 cells (enough for
# scenes of a few hundred pixels), 2^17 entries per level (tcnn's default is 2^19).
HASHGRID = {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 17,
            "base_resolution": 16, "per_level_scale": 1.26}
UNBOUNDED_TRAIN_ALPHA_THRESHOLD = 0.01  # nerfacc's examples train mip-NeRF 360 scenes with alpha_thre 1e-2
# inr_enc's MLP (with biases), as these methods were trained from the start; otype FullyFusedMLP gives tcnn's.
DENSITY_NETWORK = {"otype": "MLP", "activation": "ReLU", "n_neurons": 64, "n_hidden_layers": 1}
SPHERICAL_HARMONICS = {"otype": "SphericalHarmonics", "degree": 4}
COLOR_NETWORK = {"otype": "MLP", "activation": "ReLU", "n_neurons": 64, "n_hidden_layers": 2}


@dataclass
class InrNerfModelConfig(ModelConfig):
    """Every dict is an inr_enc config (tcnn's keys); each key is also a command-line flag, e.g.
    ``--pipeline.model.encoding.log2-hashmap-size 15``."""

    _target: Type = field(default_factory=lambda: InrNerfModel)
    enable_collider: bool = False
    """Rays are clipped to the occupancy grid's occupied box, and to a collider's (or crop box's) near/far."""
    encoding: Dict[str, Any] = field(default_factory=lambda: dict(HASHGRID))
    """Position encoding (any inr_enc encoder with 3 inputs), on positions scaled from the scene box to [0, 1]^3."""
    encoding_config: Optional[str] = None
    """Replaces `encoding` as a whole: JSON text, a .json/.yaml file or an inr_enc config name; a field config's
    "network" replaces `network` too."""
    instant_ngp_config: Optional[str] = None
    """An Instant-NGP NeRF config (e.g. its configs/nerf/base.json; a file or JSON text) sets the field (encoding,
    network, direction_encoding, color_network, geo_feat_dim, field_layout "instant-ngp"), rgb_loss, ema_decay and
    the trainer's optimizers (docs/interop.md)."""
    field_layout: Literal["inr_enc", "instant-ngp"] = "inr_enc"
    """"instant-ngp": the colour network reads every density-network output (the raw density too), then the
    direction encoding of [direction, appearance code], as Instant-NGP's NerfNetwork (field.py)."""
    rgb_loss: str = "MSE"
    """Loss of each ray's colour (optim/losses.py LOSSES): MSE, L1, RelativeL1, RelativeL2, MAPE, SMAPE or Huber
    (Instant-NGP's: delta 0.1, / 5)."""
    ema_decay: Optional[float] = None
    """tcnn's Ema: evaluation and rendering use this moving average of the field's weights (Instant-NGP: 0.95)."""
    tcnn_optimizer: Suppress[Optional[Dict[str, Any]]] = None  # instant_ngp_config's optimizer, for the trainer
    unit_frame: Suppress[Optional[List[List[float]]]] = None  # [3, 4] world -> unit cube: an imported snapshot's
    network: Dict[str, Any] = field(default_factory=lambda: dict(DENSITY_NETWORK))
    """Density network: encoding -> 1 + geo_feat_dim."""
    direction_encoding: Dict[str, Any] = field(default_factory=lambda: dict(SPHERICAL_HARMONICS))
    """View-direction encoding (inputs in [0, 1]^3)."""
    color_network: Dict[str, Any] = field(default_factory=lambda: dict(COLOR_NETWORK))
    """Colour network: direction features + geometry features -> RGB (sigmoid)."""
    geo_feat_dim: int = 15
    """Geometry features passed from the density network to the colour network."""
    backend: Literal[BACKENDS] = "auto"  # type: ignore[valid-type]  # the tuple's names (config/backends.py)
    """Encoder backend: "auto" is tcnn on CUDA when installed, else inr_enc's own kernels (networks run in torch)."""
    grid_resolution: int = 128
    """Occupancy grid cells per axis over the scene box (Instant-NGP: 128)."""
    grid_update_every: int = 16
    """Training steps between occupancy grid updates (Instant-NGP: 16)."""
    grid_warmup_steps: int = 256
    """Steps during which an update reads every cell (Instant-NGP: 256)."""
    occupancy_threshold: float = 0.01
    """A cell is occupied while its opacity exceeds min(this, the mean over cells) (nerfacc: 0.01)."""
    render_step_size: Optional[float] = None
    """Marching step in world units; default: the scene box diagonal / 512 (nerfstudio's instant-ngp: / 1000)."""
    early_stop_eps: float = 1e-4
    """Samples behind this transmittance are skipped."""
    render_alpha_threshold: float = 0.01
    """When rendering (not training), samples with a smaller opacity are skipped."""
    train_alpha_threshold: Optional[float] = None
    """The same while training; default 0 on bounded scenes (Instant-NGP), 0.01 on unbounded ones (nerfacc's
    mip-NeRF 360 setting: about 1.5x the rays per batch of samples early on, docs/nerf.md)."""
    distortion_loss_mult: float = 0.0
    """Weight of mip-NeRF 360's distortion loss (each ray's weights pulled into one short stretch, in the grid's
    normalised distance); nerfacto: 0.002."""
    sampler: Literal["auto", "occupancy", "proposal"] = "auto"
    """"occupancy": Instant-NGP's occupancy grid with early ray termination; "proposal": mip-NeRF 360's proposal
    sampling (proposal.py). "auto": "occupancy" on bounded scenes and forward-facing captures, "proposal" on other
    unbounded ones; settled when the pipeline is built (scene_defaults.py ``sampler_for``), and logged."""
    proposal_samples: Tuple[int, ...] = (256, 96)
    proposal_samples_per_ray: int = 48
    """Training: samples per ray on each proposal level, then for the field (nerfacto's 256, 96 and 48)."""
    proposal_render_samples: Tuple[int, ...] = (64, 64)
    proposal_render_samples_per_ray: int = 48
    """Rendering: the same counts (mip-NeRF 360's 64 per level; the field's 48): 1.5-1.9x faster, same PSNR."""
    scene_contraction: Literal["auto", "none", "l2", "linf"] = "auto"
    """Unbounded scenes: space beyond the scene box contracted (mip-NeRF 360; "linf" is nerfacto's cube), sampled
    with cone-angle steps, the sky learnt as far density. "auto": "none" for blender-data and dnerf-data, "linf" for
    other dataparsers (real captures); settled when the pipeline is built (methods.py), and logged."""
    camera_optimizer: AutoCameraOptimizerConfig = field(default_factory=AutoCameraOptimizerConfig)
    """Camera pose refinement (nerfstudio's CameraOptimizer), e.g. ``--pipeline.model.camera-optimizer.mode off``.
    "auto": "off" for blender-data and dnerf-data, "SO3xR3" (nerfacto's) for other dataparsers; settled with
    scene_contraction (methods.py), and logged."""
    appearance_embedding_dim: int = 0
    """Per-training-image appearance code of this size read by the colour network (exposure, white balance
    varying between photos; nerfacto: 32); evaluation uses the mean code. 0: none."""
    background_color: Literal["white", "black"] = "white"
    """Composited behind every ray; RGBA ground truth is composited over it too."""
    eval_num_rays_per_chunk: int = 8192
    """Rays per forward pass when rendering whole images."""
    written_by: Suppress[str] = __version__  # the inr_enc that wrote a config.yml (none before 0.2.0); no flag

    def __post_init__(self) -> None:
        """Every setting checked, ``encoding_config`` and ``instant_ngp_config`` resolved (settings.py
        ``check_model_settings``): a bad one raises ValueError, or,
        while ns-train parses its command line, prints one line and exits with code 2 (no output folder yet)."""
        with command_line_errors(self):
            check_model_settings(self)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """A config.yml saved before a setting existed (an older run's) loads with that setting's default: yaml
        restores the saved fields without calling ``__init__`` (and networks as they were built then)."""
        defaults = {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
                    for f in fields(self) if f.default is not MISSING or f.default_factory is not MISSING}
        self.__dict__.update({**defaults, **saved_as_built(state)})


class InrNerfModel(Model):
    """See the module docstring; ``config``: :class:`InrNerfModelConfig`."""

    config: InrNerfModelConfig

    def populate_modules(self) -> None:
        super().populate_modules()
        cfg = self.config
        frame = None if cfg.unit_frame is None else torch.tensor(cfg.unit_frame)
        # an imported snapshot's unit cube (in world units) in place of the dataparser's box
        aabb = self.scene_box.aabb.float() if frame is None else frame_world_box(frame)
        contraction = None if cfg.scene_contraction in ("auto", "none") else cfg.scene_contraction
        self.field = EncodedRadianceField(aabb, cfg.encoding, cfg.network, cfg.direction_encoding, cfg.color_network,
                                          cfg.geo_feat_dim, cfg.backend, contraction,
                                          cfg.appearance_embedding_dim, self.num_train_data, cfg.field_layout, frame)
        self.weight_average = None if cfg.ema_decay is None else average_field_weights(self, cfg.ema_decay)
        poses = (replace(cfg.camera_optimizer, mode="off") if cfg.camera_optimizer.mode == "auto"
                 else cfg.camera_optimizer)
        self.camera_optimizer: CameraOptimizer = poses.setup(num_cameras=self.num_train_data, device="cpu")
        self.train_alpha_threshold = cfg.train_alpha_threshold
        if self.train_alpha_threshold is None:
            self.train_alpha_threshold = 0.0 if contraction is None else UNBOUNDED_TRAIN_ALPHA_THRESHOLD
        diagonal = float((aabb[1] - aabb[0]).norm())
        self.step_size = cfg.render_step_size if cfg.render_step_size is not None else diagonal / 512
        self.occupancy = build_grid(aabb, contraction, cfg.grid_resolution, cfg.occupancy_threshold,
                                    cfg.grid_warmup_steps, self.step_size)
        self.proposal = None if cfg.sampler != "proposal" else ProposalSampling(  # "auto" unsettled: occupancy
            aabb, contraction, cfg.backend, cfg.proposal_samples, cfg.proposal_samples_per_ray,
            render_samples=(cfg.proposal_render_samples, cfg.proposal_render_samples_per_ray))
        self.register_buffer("background", torch.full((3,), 1.0 if cfg.background_color == "white" else 0.0))
        self.extra_metrics = {"lpips": lpips_if_weights_on_disk()}  # a plain dict: not part of the state dict

    def get_param_groups(self) -> Dict[str, List[nn.Parameter]]:
        """"grids": the grid tables (tcnn's lazy Adam in our method configs), "fields": the field's other parameters
        (the appearance embedding too), the proposal fields' likewise, "camera_opt": the pose adjustments while
        pose refinement is on."""
        fields = nn.ModuleList([self.field, *([] if self.proposal is None else [self.proposal])])
        tables = grid_tables(fields)
        rest = [p for p in fields.parameters() if all(p is not t for t in tables)]
        groups = {name: params for name, params in (("fields", rest), ("grids", tables)) if params}
        self.camera_optimizer.get_param_groups(param_groups=groups)
        return groups

    def get_training_callbacks(self, training_callback_attributes: TrainingCallbackAttributes
                               ) -> List[TrainingCallback]:
        before = [TrainingCallbackLocation.BEFORE_TRAIN_ITERATION]
        after = [TrainingCallbackLocation.AFTER_TRAIN_ITERATION]
        # coarse-to-fine encoders (Progressive) follow the training step
        callbacks = [TrainingCallback(before, self.update_to_step, update_every_num_iters=1)]
        if self.proposal is None:
            callbacks.append(TrainingCallback(before, lambda step: self.occupancy.update(step, self.field.density_fn),
                                              update_every_num_iters=self.config.grid_update_every))
        else:  # nerfacto's: anneal before each step, count the step after it
            callbacks += [TrainingCallback(before, self.proposal.anneal, update_every_num_iters=1),
                          TrainingCallback(after, self.proposal.sampler.step_cb, update_every_num_iters=1)]
        if self.weight_average is not None:  # after each optimiser step
            callbacks.append(TrainingCallback(after, lambda step: self.weight_average.update()))
        return callbacks

    def update_to_step(self, step: int) -> None:
        set_training_step(self.field, step)

    def get_outputs(self, ray_bundle: RayBundle) -> Dict[str, torch.Tensor]:
        """A flat bundle of N rays -> rgb [N, 3], accumulation [N, 1], depth [N, 1], num_samples_per_ray [N, 1].
        While training, the rays of each camera are first moved by its pose adjustment (the camera optimizer)."""
        if self.training:
            self.camera_optimizer.apply_to_raybundle(ray_bundle)
        origins, directions = ray_bundle.origins.reshape(-1, 3), ray_bundle.directions.reshape(-1, 3)
        n = len(origins)
        alpha_threshold = self.train_alpha_threshold if self.training else self.config.render_alpha_threshold
        # rendering: the sampler's density pass gives the kept samples' density and features, so only the colour
        # branch runs again (not cone traced: those render each sample's frustum, not its point density)
        reuse = not self.training and not self.field.cone_traced and self.proposal is None
        with record_function("inr_nerf.sample"):
            if self.proposal is not None:
                ray_indices, starts, ends = self.proposal.sample(ray_limits(ray_bundle, self.occupancy))
            else:
                ray_indices, starts, ends, *kept = self.occupancy.sample(
                    origins, directions, self.field.density_and_features if reuse else self.field.density_fn,
                    early_stop_eps=self.config.early_stop_eps, alpha_threshold=alpha_threshold,
                    jitter=self.training, clip=crop_limits(ray_bundle), features=reuse)
        samples = packed_ray_samples(ray_bundle, ray_indices, starts, ends)
        with record_function("inr_nerf.field"):
            if reuse:
                features = kept[0].reshape(len(ray_indices), 1 + self.field.feature_dim)  # [0] when none kept
                density, geometry = features.split([1, self.field.feature_dim], -1)
                field_outputs = {**self.field.get_outputs(samples, geometry), FieldHeadNames.DENSITY: density}
            else:
                field_outputs = self.field(samples)
        with record_function("inr_nerf.composite"):
            weights, rgb, opacity, depth = composite(field_outputs[FieldHeadNames.DENSITY].reshape(-1),
                                                     field_outputs[FieldHeadNames.RGB], starts, ends, ray_indices, n)
        background = renderers.BACKGROUND_COLOR_OVERRIDE  # set by the viewer around crop renders
        background = self.background if background is None else background.to(rgb)
        extra, with_distortion = {}, self.training and self.config.distortion_loss_mult > 0
        if self.training and self.proposal is not None:
            extra = self.proposal.losses(weights, n, with_distortion)
        elif with_distortion:  # in the grid's normalised distance
            extra["distortion"] = distortion(weights, *self.occupancy.normalized_distance(torch.stack([starts, ends])),
                                             ray_indices, n)
        return {**extra,
            "rgb": rgb + (1 - opacity) * background,
            "accumulation": opacity,
            "depth": depth / opacity.clamp_min(1e-10),
            "num_samples_per_ray": torch.bincount(ray_indices, minlength=n)[:, None].float(),
        }

    def get_rgba_image(self, outputs: Dict[str, torch.Tensor], output_name: str = "rgb") -> torch.Tensor:
        """[..., 3] colour and accumulation -> [..., 4] RGBA (ns-render's "rgba" output, exporters)."""
        return torch.cat([outputs[output_name], outputs[output_name.replace("rgb", "accumulation")]], dim=-1)

    def _target_image(self, image: torch.Tensor) -> torch.Tensor:
        return over_background(image.to(self.device), self.background)

    def get_metrics_dict(self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
                         ) -> Dict[str, torch.Tensor]:
        mse = torch.mean((outputs["rgb"] - self._target_image(batch["image"])) ** 2)
        # num_samples_per_batch steers nerfstudio's dynamic batch size; at least one per ray, so a batch whose rays
        # all miss the occupied cells cannot grow the next batch without bound; under DDP the ranks' mean, so all
        # keep one batch size (DDP averages their gradients as equals)
        samples = outputs["num_samples_per_ray"]
        count = samples.sum().clamp_min(len(samples))
        metrics = {"psnr": -10 * torch.log10(mse.detach()),
                   "num_samples_per_batch": mean_over_ranks(count) if self.training else count}
        self.camera_optimizer.get_metrics_dict(metrics)  # the pose adjustments' sizes, while refinement is on
        return metrics

    def get_loss_dict(self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor],
                      metrics_dict: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
        target = self._target_image(batch["image"])
        losses = {"rgb_loss": elementwise_loss(self.config.rgb_loss, outputs["rgb"], target).mean()}
        if self.training:
            if "distortion" in outputs:
                losses["distortion_loss"] = self.config.distortion_loss_mult * outputs["distortion"].mean()
            if "interlevel" in outputs:  # the proposal fields' loss (nerfacto's weight: 1)
                losses["interlevel_loss"] = outputs["interlevel"]
            self.camera_optimizer.get_loss_dict(losses)  # the pose adjustments' L2 penalty
        return losses

    def get_image_metrics_and_images(self, outputs: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor]
                                     ) -> Tuple[Dict[str, float], Dict[str, torch.Tensor]]:
        """outputs, batch: one image [H, W, C] -> metrics {psnr, ssim[, lpips]} and images {img, accumulation,
        depth}."""
        return image_metrics_and_images(outputs, self._target_image(batch["image"]), self.extra_metrics["lpips"])
