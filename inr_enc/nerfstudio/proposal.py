"""Proposal sampling (mip-NeRF 360, Barron et al. 2022, §3; nerfacto's sampler), on inr_enc's grids: the model's
other estimator beside the occupancy grid (``InrNerfModelConfig.sampler``).

Each ray starts with uniform samples (in disparity beyond the scene box on unbounded scenes, nerfstudio's
UniformLinDispPiecewiseSampler), and each small density field in turn (:class:`ProposalDensityField`: a hash grid
and a 16-neuron MLP, nerfacto's sizes) weighs them, and the next level is drawn from the histogram of those weights;
the last draw is what the radiance field evaluates. The fields learn from the interlevel loss alone: the weights
they give must bound the radiance field's weights (mip-NeRF 360 eq. 13). nerfstudio's ProposalNetworkSampler and
interlevel_loss do the resampling and the loss (a well-kept implementation of both); this module gives them density
fields built on inr_enc encoders and networks and packs the samples as the occupancy grid's are packed, so the
model renders either way with the same code.
"""

from __future__ import annotations

from typing import Any

import torch
from nerfstudio.cameras.rays import RayBundle, RaySamples
from nerfstudio.field_components.activations import trunc_exp
from nerfstudio.model_components.losses import distortion_loss, interlevel_loss
from nerfstudio.model_components.ray_samplers import ProposalNetworkSampler, UniformSampler
from torch import nn

from ..encoders import build_encoder
from ..nerf.contraction import Norm
from ..nerf.space import to_unit
from ..networks import MLP


def proposal_encoding(max_resolution: int) -> dict[str, Any]:
    """nerfacto's proposal grid (proposal_net_args_list): 5 levels of 2 features from 16 cells up to
    ``max_resolution`` (128, then 256), 2^17 entries per level."""
    return {"otype": "HashGrid", "n_levels": 5, "n_features_per_level": 2, "log2_hashmap_size": 17,
            "base_resolution": 16, "per_level_scale": (max_resolution / 16) ** (1 / 4)}


PROPOSAL_NETWORK = {"otype": "MLP", "activation": "ReLU", "n_neurons": 16, "n_hidden_layers": 1}  # nerfacto's


class ProposalDensityField(nn.Module):
    """World positions [..., 3] -> density [..., 1] >= 0 (zero outside a bounded scene box): ``encoding`` on the
    positions in unit coordinates (contracted beyond the box when ``contraction``), then ``network`` to one output,
    through trunc_exp as the radiance field's density."""

    def __init__(self, aabb: torch.Tensor, contraction: Norm | None, encoding: dict[str, Any],
                 network: dict[str, Any], backend: str) -> None:
        super().__init__()
        self.register_buffer("aabb", aabb.clone())
        self.contraction = contraction
        self.encoder = build_encoder(encoding, 3, backend)
        self.network = MLP(self.encoder.n_output_dims, 1, network)

    def density_fn(self, positions: torch.Tensor) -> torch.Tensor:
        x, inside = to_unit(positions, self.aabb, self.contraction)
        return trunc_exp(self.network(self.encoder(x)).float()) * inside


class ProposalSampling(nn.Module):
    """Rays -> packed samples (ray_indices [M], t_starts [M], t_ends [M]), ``samples_per_ray`` per ray, drawn
    through ``len(proposal_samples)`` proposal levels of ``proposal_samples[i]`` samples each, between each ray's
    near and far (:meth:`sample`); :meth:`losses` then gives the interlevel loss (and the distortion loss) of the
    last batch from the radiance field's weights. In eval mode (rendering) the counts are ``render_samples``:
    (per level, per ray), as many levels."""

    def __init__(self, aabb: torch.Tensor, contraction: Norm | None, backend: str,
                 proposal_samples: tuple[int, ...] = (256, 96), samples_per_ray: int = 48,
                 update_every: int = 5, warmup_steps: int = 5000,
                 render_samples: tuple[tuple[int, ...], int] | None = None) -> None:
        super().__init__()
        self.fields = nn.ModuleList(
            ProposalDensityField(aabb, contraction, proposal_encoding(128 * 2 ** min(i, 1)), PROPOSAL_NETWORK,
                                 backend) for i in range(len(proposal_samples)))

        def update_schedule(step: int) -> float:  # nerfacto's: every step at first, every 5th after warm-up
            return min(max(update_every * step / warmup_steps, 1.0), float(update_every))

        self.sampler = ProposalNetworkSampler(
            num_proposal_samples_per_ray=tuple(proposal_samples), num_nerf_samples_per_ray=samples_per_ray,
            num_proposal_network_iterations=len(proposal_samples), single_jitter=True, update_sched=update_schedule,
            initial_sampler=None if contraction is not None else UniformSampler(single_jitter=True))
        self.train_counts = (tuple(proposal_samples), samples_per_ray)
        self.render_counts = self.train_counts if render_samples is None else (tuple(render_samples[0]),
                                                                               render_samples[1])
        if len(self.render_counts[0]) != len(proposal_samples):
            raise ValueError(f"ProposalSampling: render_samples needs {len(proposal_samples)} levels, got "
                             f"{self.render_counts[0]}")
        self._levels: tuple[list[torch.Tensor], list[RaySamples]] | None = None

    def sample(self, ray_bundle: RayBundle) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A flat bundle of N rays with nears and fars [N, 1] -> packed samples (see the class)."""
        per_level, self.samples_per_ray = self.train_counts if self.training else self.render_counts
        self.sampler.num_proposal_samples_per_ray = per_level
        self.sampler.num_nerf_samples_per_ray = self.samples_per_ray
        ray_samples, weights, levels = self.sampler(ray_bundle, density_fns=[f.density_fn for f in self.fields])
        self._levels = (weights, [*levels, ray_samples])
        n = len(ray_bundle)
        rays = torch.arange(n, device=ray_samples.frustums.starts.device).repeat_interleave(self.samples_per_ray)
        return rays, ray_samples.frustums.starts.reshape(-1), ray_samples.frustums.ends.reshape(-1)

    def losses(self, weights: torch.Tensor, n: int, distortion: bool) -> dict[str, torch.Tensor]:
        """weights [M]: the radiance field's, of the last :meth:`sample`'s N = ``n`` rays -> {"interlevel"[,
        "distortion"]}: the unweighted interlevel loss, and mip-NeRF 360's distortion loss over the sampler's
        normalised distance (nerfstudio's functions)."""
        if self._levels is None:
            raise RuntimeError("ProposalSampling.losses: call sample first")
        proposal_weights, ray_samples = self._levels
        weights_list = [*proposal_weights, weights.reshape(n, self.samples_per_ray, 1)]
        losses = {"interlevel": interlevel_loss(weights_list, ray_samples)}
        if distortion:
            losses["distortion"] = distortion_loss(weights_list, ray_samples)
        return losses

    def anneal(self, step: int) -> None:
        """Before each training step (nerfacto's): proposal weights raised to a power that rises to 1 over the
        first 1000 steps (slope 10), which flattens the early histograms."""
        fraction = min(max(step / 1000, 0.0), 1.0)
        self.sampler.set_anneal(10 * fraction / (1 + (10 - 1) * fraction))
