"""A radiance field on inr_enc encoders, as a nerfstudio Field: Instant-NGP's layout (Müller et al. 2022, §5.4).

density, geometry features = network(encoding(x)), x the sample position scaled from the scene box to [0, 1]^3
(bounded scenes), or contracted first (unbounded scenes: nerf/space.py);
colour = color_network(direction_encoding(d), geometry features), d the unit view direction mapped to [0, 1]^3
(tcnn's convention for SphericalHarmonics). Density is trunc_exp of the first output (exp with its gradient
clamped, as nerfstudio and Instant-NGP do) and, in a bounded scene, zero outside the scene box; colour has a sigmoid.
An encoding that reads covariances (``uses_cov``: Hybrid, Hyb-NeRF, also nested in Progressive or Composite) gets
each sample's frustum Gaussian (nerfstudio's ``Frustums.get_gaussian_blob``, cone radius sqrt(pixel_area / pi)) in
[0, 1] units (through the contraction's Jacobian in an unbounded scene), so its Fourier levels are cone traced.
``density_fn`` (what the occupancy grid and the sampler's
skipping read) takes points, so there such an encoding is read without a footprint; the rendered densities are
cone traced.

Optional per-image appearance embedding (``appearance_embedding_dim`` > 0; nerfacto's design, for captures whose
exposure or white balance varies): nerfstudio's ``Embedding(num_images, dim)``, read at each sample's camera index
while training and appended to the colour network's input; at evaluation (other cameras than the training ones)
the mean over the training images (nerfacto's ``use_average_appearance_embedding``). Density does not see it.

``layout`` "instant-ngp" (Instant-NGP's NerfNetwork, instant_ngp.py): the colour network reads every density-network
output (the raw density too), then the direction encoding of [direction, appearance code] (Instant-NGP's extra
dims): ``color_input_encoding``, so a tcnn network pads that input as Instant-NGP's does. Density is then per length
of the unit cube the encoders read (Instant-NGP's unit), so a snapshot renders the same in both (snapshot.py).
``unit_frame`` [3, 4] (Instant-NGP layout, bounded): an affine map from world points to that cube in place of the
scene box's (an imported Instant-NGP snapshot's axes and scale); directions go through its linear part.
"""

from __future__ import annotations

from typing import Any

import torch
from nerfstudio.cameras.rays import RaySamples
from nerfstudio.field_components.activations import trunc_exp
from nerfstudio.field_components.embedding import Embedding
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.fields.base_field import Field, get_normalized_directions

from ..encoders import build_encoder
from ..nerf.contraction import Norm
from ..nerf.space import (
    frame_gaussians_to_unit,
    frame_to_unit,
    gaussians_to_unit,
    to_unit,
    unit_lengths_per_world_length,
)
from ..networks import MLP, build_network
from .instant_ngp import color_input_encoding

LAYOUTS = ("inr_enc", "instant-ngp")


class EncodedRadianceField(Field):
    """aabb: [2, 3] scene box (world units); encoding, network: inr_enc configs of the position encoder and the
    density network (1 + geo_feat_dim outputs); direction_encoding, color_network: the colour branch (3 outputs,
    sigmoid added). ``backend``: the encoders' ("auto": tcnn on CUDA when installed, else inr_enc's kernels).
    ``contraction``: None for a bounded scene, "l2" or "linf" to contract space beyond the box (nerf/space.py).
    ``appearance_embedding_dim`` > 0: a learnt code of that size per training image (``num_images``), an input of
    the colour network; ``layout``: which inputs the colour network reads (module docstring)."""

    def __init__(self, aabb: torch.Tensor, encoding: dict[str, Any], network: dict[str, Any],
                 direction_encoding: dict[str, Any], color_network: dict[str, Any], geo_feat_dim: int = 15,
                 backend: str = "auto", contraction: Norm | None = None, appearance_embedding_dim: int = 0,
                 num_images: int = 1, layout: str = "inr_enc", unit_frame: torch.Tensor | None = None) -> None:
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"EncodedRadianceField: layout must be one of {LAYOUTS}, got {layout!r}")
        if unit_frame is not None and (layout != "instant-ngp" or contraction is not None):
            raise ValueError("EncodedRadianceField: a unit_frame is for the Instant-NGP layout of a bounded scene")
        self.contraction = contraction
        self.register_buffer("aabb", torch.as_tensor(aabb, dtype=torch.float32).reshape(2, 3).clone())
        frame = None if unit_frame is None else torch.as_tensor(unit_frame, dtype=torch.float32).reshape(3, 4).clone()
        self.register_buffer("unit_frame", frame)
        # Instant-NGP's density is per length of its unit cube; inr_enc's per world length
        self.density_scale = (unit_lengths_per_world_length(self.aabb, contraction, frame)
                              if layout == "instant-ngp" else 1.0)
        self.position_encoder = build_encoder(encoding, 3, backend)
        # raw outputs: density goes through trunc_exp (a named config's Sigmoid would keep it >= 1 everywhere)
        self.density_network = build_network(1 + geo_feat_dim, {**network, "output_activation": "None"},
                                             self.position_encoder)
        color = {**color_network, "output_activation": "Sigmoid"}
        self.appearance_embedding = (Embedding(num_images, appearance_embedding_dim)
                                     if appearance_embedding_dim else None)
        self.instant_ngp_layout = layout == "instant-ngp"
        # what get_density hands to get_outputs: the geometry features, or (Instant-NGP) every density output
        self.feature_dim = geo_feat_dim + self.instant_ngp_layout
        if self.instant_ngp_layout:
            self.color_encoder = build_encoder(color_input_encoding(direction_encoding, self.feature_dim),
                                               self.feature_dim + 3 + appearance_embedding_dim, backend)
            self.color_network = build_network(3, color, self.color_encoder)
        else:
            self.direction_encoder = build_encoder(direction_encoding, 3, backend)
            self.color_network = MLP(self.direction_encoder.n_output_dims + geo_feat_dim + appearance_embedding_dim,
                                     3, color)
        self.cone_traced = self.position_encoder.uses_cov

    def _density(self, x: torch.Tensor, inside: torch.Tensor, cov: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.density_network(self.position_encoder(x, cov))
        density = trunc_exp(h[..., :1].float()) * self.density_scale * inside
        return density, h if self.instant_ngp_layout else h[..., 1:]

    def get_density(self, ray_samples: RaySamples) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples [...] -> (density [..., 1] >= 0, colour-network features [..., feature_dim])."""
        frustums = ray_samples.frustums
        if not self.cone_traced:
            return self._density(*self._to_unit(frustums.get_positions()))
        gaussian = frustums.get_gaussian_blob()
        if self.unit_frame is not None:
            x, cov, inside = frame_gaussians_to_unit(gaussian.mean, gaussian.cov, self.unit_frame)
        else:
            x, cov, inside = gaussians_to_unit(gaussian.mean, gaussian.cov, self.aabb, self.contraction)
        return self._density(x, inside, cov)

    def _to_unit(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World positions [..., 3] -> (encoder inputs [..., 3], inside [..., 1]): through the unit frame if any."""
        if self.unit_frame is not None:
            return frame_to_unit(positions, self.unit_frame)
        return to_unit(positions, self.aabb, self.contraction)

    def density_fn(self, positions: torch.Tensor, times: torch.Tensor | None = None) -> torch.Tensor:
        """Point densities (no frustum): positions [..., 3] world -> [..., 1]. The occupancy grid reads this."""
        return self._density(*self._to_unit(positions))[0]

    def density_and_features(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions [..., 3] world -> (density [..., 1], [..., 1 + feature_dim]: the density, then the colour-network
        features): what a renderer keeps from the sampler's density pass (the model, when not cone traced)."""
        density, geometry = self._density(*self._to_unit(positions))
        return density, torch.cat([density, geometry], -1)

    def get_outputs(self, ray_samples: RaySamples, density_embedding: torch.Tensor | None = None
                    ) -> dict[FieldHeadNames, torch.Tensor]:
        """Samples [...] -> {RGB: [..., 3] in [0, 1]}; density_embedding: get_density's features [..., feature_dim]."""
        if density_embedding is None:
            raise ValueError("EncodedRadianceField.get_outputs needs the features from get_density")
        directions = ray_samples.frustums.directions
        if self.unit_frame is not None:  # as Instant-NGP turns them into its own axes
            directions = torch.nn.functional.normalize(directions @ self.unit_frame[:, :3].T.to(directions.dtype),
                                                       dim=-1)
        directions = get_normalized_directions(directions)
        codes = [] if self.appearance_embedding is None else [self._appearance(ray_samples, directions.shape[:-1])]
        if self.instant_ngp_layout:
            inputs = self.color_encoder(torch.cat([density_embedding, directions, *codes], -1))
        else:
            inputs = torch.cat([self.direction_encoder(directions), density_embedding, *codes], -1)
        return {FieldHeadNames.RGB: self.color_network(inputs)}

    def _appearance(self, ray_samples: RaySamples, batch_shape: torch.Size) -> torch.Tensor:
        """The appearance code of each sample [..., dim]: its camera's while training, else the mean code."""
        if not self.training:  # evaluation views are not training images (their indices index another dataset)
            return self.appearance_embedding.mean(dim=0).expand(*batch_shape, -1)
        if ray_samples.camera_indices is None:
            raise ValueError("EncodedRadianceField: the appearance embedding needs the samples' camera_indices")
        return self.appearance_embedding(ray_samples.camera_indices.reshape(batch_shape))
