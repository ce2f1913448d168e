"""RECOMBINER's learnable positional encodings (He et al., "RECOMBINER: Robust and Enhanced Compression
with Bayesian Implicit Neural Representations", ICLR 2024; cambridge-mlg/RECOMBINER, prior_model.py
``Upsample``, utils.py ``map_lpe_to_inr_inputs``, data/image.py Fourier embedding, config.py defaults).

Only the deterministic architecture: a learnable latent grid, a conv upsampler to one feature vector per
sample, and fixed Fourier features of the coordinates. The Bayesian coding machinery is left out.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any

import torch
from torch import nn

from ..config.checks import check_int, check_seed, config_error
from ..ops.phase import saturate
from .base import Encoder, seeded_generator
from .registry import register_encoder

MAX_FREQUENCY = 1024.0  # w = exp(linspace(0, ln 1024, n)) (data/image.py, data/audio.py)
FOURIER_DIMS = 16  # config.py 'fourier_dim': cos and sin of every frequency of every coordinate
LATENT_INIT_STD = 0.1  # prior_model.py: lpe_loc ~ N(0, 0.1^2)
KERNEL_SIZES = (5, 3, 3)  # prior_model.py Upsample; padding (k - 1) / 2 ('paddings' [2, 1, 1]) keeps sizes
DEFAULT_RESOLUTION = {1: [48000], 2: [256, 256]}  # 1D: config.py 'audio' (3 s of 16 kHz LibriSpeech)


def patch_cells(x: torch.Tensor, patches: list[int]) -> torch.Tensor:
    """x: [N, d] in [0, 1] -> [N, d] integer patch cells clamp(floor(x_i * patches_i), 0, patches_i - 1) (float,
    no gradient); a coordinate exactly on a border belongs to the patch on its right."""
    n = torch.tensor(patches, dtype=x.dtype, device=x.device)
    return torch.minimum(torch.floor(x.detach() * n).clamp(min=0), n - 1)


def _int_list(otype: str, key: str, value: Any, n_dims: int, low: int) -> list[int]:
    """An int means the same value for every dim."""
    values = [value] * n_dims if not isinstance(value, (list, tuple)) else list(value)
    if len(values) != n_dims:
        raise config_error(otype, f"'{key}' must have {n_dims} entries (one per input dim), got {value!r}")
    return [check_int(otype, key, v, low) for v in values]


def conv_upsampler(n_dims: int, channels: list[int], scale_factors: list[int]) -> nn.Sequential:
    """RECOMBINER's upsampler: nearest x s1 -> conv5 c0->c1 -> LeakyReLU -> nearest x s2 -> conv3 c1->c1 ->
    LeakyReLU -> nearest x s3 -> conv3 c1->c2 (1D: conv1d, 2D: conv2d); zero padding keeps sizes."""
    conv = nn.Conv1d if n_dims == 1 else nn.Conv2d
    widths = [channels[0], channels[1], channels[1], channels[2]]
    layers: list[nn.Module] = []
    for i, (scale, kernel) in enumerate(zip(scale_factors, KERNEL_SIZES)):
        layers += [nn.Upsample(scale_factor=scale, mode="nearest"),
                   conv(widths[i], widths[i + 1], kernel, padding=kernel // 2)]
        if i < 2:
            layers.append(nn.LeakyReLU(0.01))
    return nn.Sequential(*layers)


@register_encoder()
class LatentGrid(Encoder):
    """``{"otype": "LatentGrid", "resolution": [256, 256], "n_latent_channels": 128, "n_hidden_channels": 64,
    "n_features": 16, "scale_factors": [4, 2, 2], "n_frequencies": null, "patches": null, "seed": 1337}``.

    ``resolution``: samples per input dim, in coordinate order (images: [width, height] since x[..., 0] is
    the column; audio: [n_samples]; an int: the same for every dim); default [256, 256] (2D), [48000] (1D,
    RECOMBINER's audio; a task should set it to the signal's size). The latent
    grid ``latent`` ([n_latent_channels, ceil(H / 16), ceil(W / 16)], channels first; 16 = the product of
    ``scale_factors``) goes through the upsampler to a map ``[n_features, H, W]`` (cropped where the size
    does not divide), one feature vector per pixel. The map is computed once per forward (~2 GMAC and
    ~40 MB of saved activations at 256^2; both grow with H * W).

    Reading: map pixel (i, j) sits at its centre ((j + 0.5) / W, (i + 0.5) / H); between centres features are
    (bi)linear, so a pixel centre returns its pixel exactly; beyond the outermost centres (the half-pixel
    border, and inputs outside [0, 1]) they are constant (clamped to the edge pixel).

    Fourier part (data/image.py): x' = 2 x - 1 in [-1, 1], w_k = exp(linspace(0, ln 1024, n)),
    [cos(pi w_k x'_i), sin(pi w_k x'_i)] with i slowest, k fastest inside each of the cos and sin blocks;
    ``n_frequencies`` defaults to 16 / (2 d) (4 for images, 8 for audio), 0 drops the part. ``patches``
    (default one per dim): the Fourier part reads coordinates local to each patch of this grid, mapped to
    [-1, 1], as RECOMBINER does in its patch mode; the latent grid stays one grid over the whole signal.
    Inputs outside [0, 1] extend the edge patches' local coordinates; any finite x: they saturate at
    +-P / (2 pi 1024) (P = 2^64 in float32, 2^512 in float64; ops/phase.py), so the phases stay finite.

    Output [..., 2 d n_frequencies + n_features]: Fourier features first, then the latent features, the order
    RECOMBINER concatenates them (prior_model.py). Init from ``seed``: latent N(0, 0.1^2); conv weights and
    biases U(+-1/sqrt(fan_in)) (torch's default distribution).
    """

    otype = "LatentGrid"
    source = "He et al. 2024 (RECOMBINER)"
    sized_by_signal = "resolution"
    max_input_dims = 2
    defaults = {
        "resolution": None, "n_latent_channels": 128, "n_hidden_channels": 64, "n_features": 16,
        "scale_factors": [4, 2, 2], "n_frequencies": None, "patches": None, "seed": 1337,
    }

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        name, d = cls.otype, n_input_dims
        resolution = config["resolution"] if config["resolution"] is not None else DEFAULT_RESOLUTION[d]
        channels = {key: check_int(name, key, config[key], 1)
                    for key in ("n_latent_channels", "n_hidden_channels", "n_features")}
        scales = config["scale_factors"]
        if not isinstance(scales, (list, tuple)) or len(scales) != 3:
            raise config_error(name, f"'scale_factors' must list the 3 upsampling factors, got {scales!r}")
        n_freq = config["n_frequencies"] if config["n_frequencies"] is not None else FOURIER_DIMS // (2 * d)
        return {
            "resolution": _int_list(name, "resolution", resolution, d, 1), **channels,
            "scale_factors": [check_int(name, "scale_factors", s, 1) for s in scales],
            "n_frequencies": check_int(name, "n_frequencies", n_freq, 0, 64),
            "patches": _int_list(name, "patches", config["patches"] if config["patches"] is not None else 1, d, 1),
            "seed": check_seed(name, config["seed"]),
        }

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return 2 * n_input_dims * config["n_frequencies"] + config["n_features"]

    @staticmethod
    def _stage_sizes(config: dict[str, Any]) -> list[int]:
        """Spatial elements of the latent grid, then after each upsampling (before the crop to ``resolution``)."""
        scales = config["scale_factors"]
        latent = [-(-r // math.prod(scales)) for r in config["resolution"]]
        return [math.prod(latent) * math.prod(scales[:i]) ** len(latent) for i in range(len(scales) + 1)]

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        widths = [config[key] for key in ("n_latent_channels", "n_hidden_channels", "n_hidden_channels", "n_features")]
        convs = sum(a * b * k**n_input_dims + b for a, b, k in zip(widths[:-1], widths[1:], KERNEL_SIZES))
        return widths[0] * cls._stage_sizes(config)[0] + convs

    @classmethod
    def fixed_activation_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        """The upsampler's activations (each stage: upsampled input, conv output, LeakyReLU), once per forward."""
        widths = [config[key] for key in ("n_latent_channels", "n_hidden_channels", "n_hidden_channels", "n_features")]
        sizes = cls._stage_sizes(config)[1:]
        return sum((a + 2 * b) * size for a, b, size in zip(widths[:-1], widths[1:], sizes))

    def _build(self, config: dict[str, Any]) -> None:
        d, scales, self.resolution, self.patches = (self.n_input_dims, config["scale_factors"], config["resolution"],
                                                    config["patches"])
        channels = [config[key] for key in ("n_latent_channels", "n_hidden_channels", "n_features")]
        downsample = math.prod(scales)
        latent_size = [-(-r // downsample) for r in reversed(self.resolution)]  # ceil, spatial axes [.., H, W]
        gen = seeded_generator(config["seed"])
        self.latent = nn.Parameter(torch.randn(channels[0], *latent_size, generator=gen) * LATENT_INIT_STD)
        self.upsampler = conv_upsampler(d, channels, scales)
        with torch.no_grad():
            for conv in self.upsampler[1::3]:
                bound = 1 / math.sqrt(conv.weight[0].numel())
                conv.weight.copy_((torch.rand(conv.weight.shape, generator=gen) * 2 - 1) * bound)
                conv.bias.copy_((torch.rand(conv.bias.shape, generator=gen) * 2 - 1) * bound)
        self.n_frequencies, self.n_features = config["n_frequencies"], channels[2]

    def feature_map(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The upsampled map [n_features, *reversed(resolution)] (images [C, H, W]) in ``dtype``."""
        conv = nn.functional.conv1d if self.n_input_dims == 1 else nn.functional.conv2d
        h = self.latent.to(dtype)[None]
        for layer in self.upsampler:
            if isinstance(layer, (nn.Conv1d, nn.Conv2d)):
                h = conv(h, layer.weight.to(dtype), layer.bias.to(dtype), padding=layer.padding)
            else:
                h = layer(h)
        return h[(0, slice(None), *(slice(0, r) for r in reversed(self.resolution)))]

    def read(self, feature_map: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(Bi)linear read of ``feature_map`` [C, *reversed(resolution)] at x: [N, d] -> [N, C] (see class doc)."""
        table = feature_map.reshape(feature_map.shape[0], -1).t()  # [prod(resolution), C], dim 0 fastest
        size = torch.tensor(self.resolution, dtype=x.dtype, device=x.device)
        pos = torch.minimum((x * size - 0.5).clamp(min=0), size - 1)
        low = torch.floor(pos.detach())
        high = torch.minimum(low + 1, size - 1)
        frac = pos - low
        strides = [math.prod(self.resolution[:i]) for i in range(self.n_input_dims)]
        out = x.new_zeros(x.shape[0], table.shape[1])
        for corner in product((0, 1), repeat=self.n_input_dims):
            index = sum((high if c else low)[:, i].long() * strides[i] for i, c in enumerate(corner))
            weight = math.prod(frac[:, i] if c else 1 - frac[:, i] for i, c in enumerate(corner))
            out = out + weight[:, None] * table[index]
        return out

    def fourier(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, d] -> [N, 2 d n_frequencies] of patch-local coordinates in [-1, 1] (see class doc)."""
        n = torch.tensor(self.patches, dtype=x.dtype, device=x.device)
        local = saturate(x * n - patch_cells(x, self.patches), 2 * math.pi * MAX_FREQUENCY)  # x * n may be inf
        w = torch.exp(torch.linspace(0, math.log(MAX_FREQUENCY), self.n_frequencies, dtype=x.dtype, device=x.device))
        phase = math.pi * ((2 * local - 1)[:, :, None] * w).reshape(x.shape[0], self.n_input_dims * self.n_frequencies)
        return torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([self.fourier(x), self.read(self.feature_map(x.dtype), x)], dim=-1)
