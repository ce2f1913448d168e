"""tiny-cuda-nn's multiresolution grid encodings: HashGrid (Instant-NGP), DenseGrid and TiledGrid.

The math is in ops/grid (layout.py: level geometry, table layout; reference.py and the kernels: indices,
weights, interpolation), following tcnn. The table is one flat ``params`` in tcnn's layout (levels in order,
entries in index order, F features per entry), so weights move between tcnn and inr_enc unchanged.

Inputs outside [0, 1] are encoded as tcnn encodes them: cells wrap in uint32 and every index is taken
mod its level's size, so any finite input reads a valid entry (dense and tiled grids wrap, hashed
levels hash); see ops/grid/reference.py for the one deliberate difference (overflowing positions).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

from ..config.backends import IMPLEMENTATIONS
from ..config.checks import check_bool, check_choice, check_float, check_int, check_seed, config_error
from ..ops.grid import (
    GRID_TYPES,
    HASH_PRIMES,
    INTERPOLATIONS,
    UINT32_MASK,
    GridLevel,
    GridLevels,
    default_per_level_scale,
    grid_encoding,
    grid_levels,
    sparse_accumulator,
)
from .base import Encoder, seeded_generator
from .registry import register_encoder

# tcnn's grid math is uint32 (resolution (uint32)ceilf(scale) + 1, cells from x * scale): the finest level's scale
# base_resolution * per_level_scale^(n_levels - 1) stays at most 2^31, with room for float32 rounding.
MAX_LOG2_SCALE = 31


def check_level_keys(name: str, config: dict[str, Any]) -> tuple[int, int, int, int]:
    """n_levels, n_features_per_level, log2_hashmap_size, base_resolution of a grid config, checked as tcnn allows."""
    n_levels = check_int(name, "n_levels", config["n_levels"], 1, 128)
    n_features = check_int(name, "n_features_per_level", config["n_features_per_level"], 1, 8)
    if n_features not in (1, 2, 4, 8):
        raise config_error(name, f"'n_features_per_level' must be 1, 2, 4 or 8 (as in tcnn), got {n_features}")
    log2_size = check_int(name, "log2_hashmap_size", config["log2_hashmap_size"], 1, 31)
    return n_levels, n_features, log2_size, check_int(name, "base_resolution", config["base_resolution"], 1)


def _level_count(name: str, config: dict[str, Any]) -> int:
    """n_levels of a grid config, or as tcnn derives it from n_features (alias n_grid_features) / features per level;
    16 when neither is given."""
    given = [key for key in ("n_features", "n_grid_features") if config[key] is not None]
    if not given:
        return 16 if config["n_levels"] is None else config["n_levels"]
    if config["n_levels"] is not None or len(given) > 1:
        raise config_error(name, f"give one of 'n_levels', 'n_features' and 'n_grid_features' (tcnn: one determines "
                                 f"the others), got "
                                 f"{', '.join(['n_levels'] * (config['n_levels'] is not None) + given)}")
    total = check_int(name, given[0], config[given[0]], 1)
    per_level = config["n_features_per_level"]
    if not isinstance(per_level, int) or isinstance(per_level, bool) or per_level < 1 or total % per_level:
        raise config_error(name, f"'{given[0]}' ({total}) must be a multiple of 'n_features_per_level' ({per_level!r})")
    return total // per_level


def check_finest_scale(name: str, n_levels: int, base_resolution: int, per_level_scale: float) -> None:
    """ValueError unless the finest level's scale fits tcnn's uint32 grid math (checked before the layout)."""
    log2_scale = math.log2(base_resolution) + (n_levels - 1) * math.log2(per_level_scale)
    if log2_scale > MAX_LOG2_SCALE:
        raise config_error(name, f"the finest level's resolution base_resolution * per_level_scale^(n_levels - 1) = "
                                 f"2^{log2_scale:.1f} passes 2^{MAX_LOG2_SCALE} (tcnn's uint32 grid math); lower "
                                 f"'per_level_scale' ({per_level_scale:g}), 'n_levels' or 'base_resolution'")


def levels_buffer_count(levels: list[GridLevel]) -> int:
    """Elements of GridLevels' buffers: scale and offset per level, strides and size per row-major level."""
    n_dense = sum(not level.hashed for level in levels)
    return 2 * len(levels) + n_dense * (len(levels[0].strides) + 1)


def check_table_size(name: str, levels: list[GridLevel]) -> int:
    """Entries of the flat table of ``levels``; ValueError beyond tcnn's uint32 offsets."""
    n_entries = levels[-1].offset + levels[-1].size
    if n_entries > UINT32_MASK:
        raise config_error(name, f"needs {n_entries} table entries; tcnn's uint32 offsets allow at most {UINT32_MASK}")
    return n_entries


def init_table(levels: list[GridLevel], n_features: int, generator: torch.Generator) -> torch.nn.Parameter:
    """The flat table of ``levels`` (tcnn's layout), drawn uniform in [-1e-4, 1e-4] like tcnn."""
    n_entries = levels[-1].offset + levels[-1].size
    return torch.nn.Parameter((torch.rand(n_entries * n_features, generator=generator) * 2 - 1) * 1e-4)


class Multiresolution(Encoder):
    """Shared by the encodings of ``n_levels`` levels with ``n_features_per_level`` features each, output
    level-major (level 0's features first): Grid and Hybrid. Each level is a band, coarse to fine."""

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_levels"] * config["n_features_per_level"]

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return config["n_levels"]

    def output_bands(self) -> torch.Tensor:
        """Output j belongs to level j // n_features_per_level."""
        return torch.arange(self.n_output_dims) // self._config["n_features_per_level"]

    @staticmethod
    def _levels(n_input_dims: int, config: dict[str, Any], grid_type: str,
                n_levels: int | None = None) -> list[GridLevel]:
        """Levels 0..n_levels-1 (all by default) of a grid of ``grid_type`` with the config's keys."""
        keys = ("log2_hashmap_size", "base_resolution", "per_level_scale")
        return grid_levels(n_input_dims, grid_type, n_levels or config["n_levels"], *(config[key] for key in keys))


@register_encoder()
class Grid(Multiresolution):
    """tcnn's ``Grid`` encoding: ``{"otype": "Grid", "type": "Hash" | "Dense" | "Tiled", "n_levels": 16,
    "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16, "per_level_scale": 2.0,
    "interpolation": "Linear" | "Nearest" | "Smoothstep", "hash": "CoherentPrime"}``.

    ``per_level_scale`` defaults as in tcnn (2.0; dense grids grow to 256). ``seed`` draws the init,
    uniform in [-1e-4, 1e-4] like tcnn. x: [..., d], d in 1..7 -> [..., n_levels * n_features_per_level].
    """

    otype = "Grid"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/grid.h"
    supported_backends = frozenset(IMPLEMENTATIONS)
    auto_backends = ("tcnn", "cpp", "triton", "torch")  # tcnn on CUDA: fast, with second derivatives for grids
    default_type = "Hash"
    max_input_dims = 7
    tcnn_pad_value = 0.0
    defaults = {
        "type": None, "n_levels": None, "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16,
        "per_level_scale": None, "interpolation": "Linear", "hash": "CoherentPrime", "seed": 1337,
        # tcnn's keys read as tcnn reads them (include/tiny-cuda-nn/encodings/grid.h, create_grid_encoding):
        # n_features (or n_grid_features) = n_levels * n_features_per_level instead of n_levels (default 16 levels);
        # stochastic_interpolation and fixed_point_pos at tcnn's default, false (the resolved config leaves them out)
        "n_features": None, "n_grid_features": None, "stochastic_interpolation": False, "fixed_point_pos": False,
    }

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        name = cls.otype
        grid_type = check_choice(name, "type", config["type"] or cls.default_type, GRID_TYPES)
        config = {**config, "n_levels": _level_count(name, config)}
        for key in ("stochastic_interpolation", "fixed_point_pos"):
            if check_bool(name, key, config[key]):
                raise config_error(name, f"'{key}': true is not implemented by inr_enc's grid kernels; tcnn's "
                                         "default false is what they compute")
        n_levels, n_features, log2_size, base_resolution = check_level_keys(name, config)
        per_level_scale = config["per_level_scale"]
        if per_level_scale is None:
            per_level_scale = default_per_level_scale(grid_type, n_levels, base_resolution)
        per_level_scale = check_float(name, "per_level_scale", per_level_scale, 1.0)
        check_finest_scale(name, n_levels, base_resolution, per_level_scale)
        resolved = {
            "type": grid_type, "n_levels": n_levels, "n_features_per_level": n_features, "log2_hashmap_size": log2_size,
            "base_resolution": base_resolution, "per_level_scale": per_level_scale,
            "interpolation": check_choice(name, "interpolation", config["interpolation"], INTERPOLATIONS),
            "hash": check_choice(name, "hash", config["hash"], HASH_PRIMES),
            "seed": check_seed(name, config["seed"]),
        }
        check_table_size(name, cls._levels(n_input_dims, resolved, grid_type))
        return resolved

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        levels = cls._levels(n_input_dims, config, config["type"])
        n_entries = levels[-1].offset + levels[-1].size
        return n_entries * config["n_features_per_level"] + levels_buffer_count(levels)

    def _build(self, config: dict[str, Any]) -> None:
        levels = self._levels(self.n_input_dims, config, config["type"])
        self.interpolation, self.n_features_per_level = config["interpolation"], config["n_features_per_level"]
        self.params = init_table(levels, self.n_features_per_level, seeded_generator(config["seed"]))
        self.levels = GridLevels(levels, HASH_PRIMES[config["hash"]])

    @classmethod
    def tcnn_alignment(cls, config: dict[str, Any]) -> int:
        return config["n_features_per_level"]

    models = 1  # tables held (stack_grids): block m of a batch's `models` equal blocks reads table m

    def tcnn_config(self) -> dict[str, Any] | None:
        """tcnn's default build compiles grids for 2 to 4 input dims and the CoherentPrime hash only, and reads one
        table."""
        config = self.config
        if not 2 <= self.n_input_dims <= 4 or config["hash"] != "CoherentPrime" or self.models > 1:
            return None
        del config["seed"]
        return config

    def table_parameters(self) -> list[torch.nn.Parameter]:
        return [self.params]

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        return grid_encoding(x, self.params, self.levels, self.n_features_per_level, self.interpolation, backend,
                             sparse_accumulator(self, self.params), self.models)

    def table(self, m: int) -> torch.Tensor:
        """Table ``m`` of a stacked grid (a view of ``params``): [E * F]."""
        return self.params.view(self.models, -1)[m]


def stack_grids(grids: list[Grid]) -> Grid:
    """One grid of the config of ``grids`` holding their tables back to back (``params`` [M * E * F], copied):
    x [M * n, d], the M models' inputs one block after another -> [M * n, L * F], block m read from grid m's
    table; gradients and GridAdam's lazy updates stay per table. ValueError for grids of different configs."""
    first = grids[0]
    if any(type(g) is not type(first) or g.config != first.config or g.n_input_dims != first.n_input_dims
           or g.models != 1 for g in grids):
        raise ValueError("stack_grids: every grid needs the same otype, config and input width, and one table")
    stacked = copy.deepcopy(first)
    stacked.params = torch.nn.Parameter(torch.cat([g.params.detach() for g in grids]))
    stacked.models = len(grids)
    return stacked


@register_encoder()
class HashGrid(Grid):
    """``{"otype": "HashGrid", ...}``: a Grid whose ``type`` defaults to "Hash" (Instant-NGP)."""

    otype = "HashGrid"
    source = "Müller et al. 2022 (Instant-NGP); tiny-cuda-nn include/tiny-cuda-nn/encodings/grid.h"


@register_encoder()
class DenseGrid(Grid):
    """``{"otype": "DenseGrid", ...}``: a Grid whose ``type`` defaults to "Dense"."""

    otype = "DenseGrid"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/grid.h"
    default_type = "Dense"


@register_encoder()
class TiledGrid(Grid):
    """``{"otype": "TiledGrid", ...}``: a Grid whose ``type`` defaults to "Tiled" (levels capped at
    base_resolution^d)."""

    otype = "TiledGrid"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/grid.h"
    default_type = "Tiled"
