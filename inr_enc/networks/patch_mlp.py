"""An MLP with separate weights for each patch of the signal, as RECOMBINER fits one INR per patch
(He et al., ICLR 2024; cambridge-mlg/RECOMBINER, config.py: Kodak in 64x64 patches, SIREN 3 x 32)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from ..config.checks import check_int, config_error
from ..encoders.base import Encoder, EncoderSpec, seeded_generator
from ..encoders.latent_grid import patch_cells
from .base import Network
from .mlp import DEFAULTS as MLP_DEFAULTS
from .mlp import MLP
from .registry import register_network

DEFAULTS: dict[str, Any] = {
    **MLP_DEFAULTS, "otype": "PatchMLP", "patches": [4, 4], "n_neurons": 32, "n_hidden_layers": 3, "activation": "Sine",
}
MAX_PATCHES = 1 << 16  # every patch's MLP is built as a module of its own before the weights are stacked


@register_network()
class PatchMLP(Network):
    """``{"otype": "PatchMLP", "patches": [4, 4], "n_neurons": 32, "n_hidden_layers": 3, "activation": "Sine", ...}``:
    every key of ``MLP`` (same meaning, defaults SIREN 3 x 32, omega_0 30) plus ``patches``, the number of
    patches per coordinate dim (an int for 1D), e.g. [4, 4] splits a 256^2 image into 64^2 patches.

    Patch p = c_0 + patches[0] * (c_1 + patches[1] * ...) with c_i = clamp(floor(coords_i * patches_i), 0,
    patches_i - 1) (raster order for images, whose coords are (x, y)); a coordinate on a border belongs to the
    patch on its right. Each patch's weights are a plain ``MLP``'s, drawn with its own seed from ``seed``,
    stored stacked: ``layers_{l}_weight`` [P, out, in], ``layers_{l}_bias`` [P, out].

    forward(h: [..., n_input_dims], coords: [..., d]) -> [..., n_output_dims]: samples are grouped by patch into
    [P, max group size, n_input_dims] (zero padded) and run through the MLP's own forward, vmapped over patches.
    """

    otype = "PatchMLP"
    source = "He et al. 2024 (RECOMBINER: one INR per patch)"
    defaults = DEFAULTS
    reads_coordinates = True  # Field passes the coordinates along with the features

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        if not isinstance(config["otype"], str) or config["otype"].lower() != "patchmlp":
            raise config_error("network", f"'otype' must be PatchMLP, got {config['otype']!r}")
        patches = config["patches"]
        patches = list(patches) if isinstance(patches, (list, tuple)) else [patches]
        if not 1 <= len(patches) <= 3:
            raise config_error("network", f"'patches' must list 1 to 3 patch counts (one per coordinate dim), "
                                          f"got {config['patches']!r}")
        patches = [check_int("network", "patches", p, 1) for p in patches]
        if math.prod(patches) > MAX_PATCHES:
            raise config_error("network", f"'patches' {patches} make {math.prod(patches)} patches, "
                                          f"more than {MAX_PATCHES}")
        if encoder is not None and len(patches) != encoder.n_input_dims:
            raise ValueError(f"network: 'patches' needs one count per coordinate dim ({encoder.n_input_dims}), "
                             f"got {patches}")
        mlp = MLP.resolve_config({k: v for k, v in config.items() if k not in ("otype", "patches")},
                                 n_input_dims, n_output_dims)
        return {**mlp, "otype": "PatchMLP", "patches": patches}

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None = None) -> int:
        return math.prod(config["patches"]) * MLP.parameter_count(n_input_dims, n_output_dims, config)

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None = None) -> int:
        return n_input_dims + MLP.activation_width(n_input_dims, n_output_dims, config)  # + the padded input

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        self.patches = config["patches"]
        n_patches = math.prod(self.patches)
        mlp_config = {k: v for k, v in config.items() if k not in ("otype", "patches")}
        seeds = torch.randint(0, 2**31 - 1, (n_patches,), generator=seeded_generator(config["seed"])).tolist()
        # The template's forward runs every patch (functional_call); it is not a submodule, its weights are unused.
        template = MLP(self.n_input_dims, self.n_output_dims, {**mlp_config, "seed": seeds[0]})
        self._template = [template]
        self._names = {name: name.replace(".", "_") for name, _ in template.named_parameters()}
        stacked = {name: torch.empty(n_patches, *p.shape) for name, p in template.named_parameters()}
        for i, seed in enumerate(seeds):  # one patch's MLP at a time: memory for the stacked weights only
            net = template if i == 0 else MLP(self.n_input_dims, self.n_output_dims, {**mlp_config, "seed": seed})
            for name, parameter in net.named_parameters():
                stacked[name][i] = parameter.detach()
        for name, attr in self._names.items():
            self.register_parameter(attr, nn.Parameter(stacked[name]))
        self.n_patches = n_patches

    def patch_index(self, coords: torch.Tensor) -> torch.Tensor:
        """coords: [N, d] in [0, 1] -> [N] patch index (long)."""
        cells = patch_cells(coords, self.patches).long()
        index = torch.zeros_like(cells[:, 0])
        for i in reversed(range(len(self.patches))):
            index = index * self.patches[i] + cells[:, i]
        return index

    def forward(self, h: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        """h: [..., n_input_dims] features, coords: [..., d] in [0, 1] of the same samples -> [..., n_output_dims]."""
        d = len(self.patches)
        if h.shape[-1] != self.n_input_dims or coords.shape[-1] != d or h.shape[:-1] != coords.shape[:-1]:
            raise ValueError(
                f"PatchMLP: expected h [..., {self.n_input_dims}] and coords [..., {d}] with the same batch shape, "
                f"got {list(h.shape)} and {list(coords.shape)}"
            )
        batch_shape = h.shape[:-1]
        h, coords = h.reshape(-1, self.n_input_dims), coords.reshape(-1, d)
        dtype = getattr(self, self._names["layers.0.weight"]).dtype
        n = h.shape[0]
        if n == 0:
            return h.new_zeros(*batch_shape, self.n_output_dims, dtype=dtype)
        patch = self.patch_index(coords)
        order = torch.argsort(patch, stable=True)
        patch_sorted = patch[order]
        counts = torch.bincount(patch_sorted, minlength=self.n_patches)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(n, device=h.device) - starts[patch_sorted]
        padded = h.new_zeros(self.n_patches, int(counts.max()), self.n_input_dims, dtype=dtype)
        padded = padded.index_put((patch_sorted, rank), h[order].to(dtype))
        params = {name: getattr(self, attr) for name, attr in self._names.items()}
        out_padded = vmap(lambda p, x: functional_call(self._template[0], p, (x,)))(params, padded)
        out = out_padded.new_empty(n, self.n_output_dims).index_put((order,), out_padded[patch_sorted, rank])
        return out.reshape(*batch_shape, self.n_output_dims)
