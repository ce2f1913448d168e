"""tiny-cuda-nn's multiresolution grid encodings: HashGrid (Instant-NGP), DenseGrid and TiledGrid.

The math is in grid_layout.py (level geometry, table layout) and grid_functional.py (indices, weights,
interpolation), both following tcnn. The table is one flat ``params`` in tcnn's layout (levels in order,
entries in index order, F features per entry), so weights move between tcnn and inr_enc unchanged.

Inputs outside [0, 1] are encoded as tcnn encodes them: cells wrap in uint32 and every index is taken
mod its level's size, so any finite input reads a valid entry (dense and tiled grids wrap, hashed
levels hash); see grid_functional.py for the one deliberate difference (overflowing positions).
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import grid_kernel
from .base import Encoder, check_choice, check_float, check_int, config_error, seeded_generator
from .grid_functional import GridLevels, grid_encoding, sparse_accumulator
from .grid_layout import GRID_TYPES, UINT32_MASK, GridLevel, default_per_level_scale, grid_levels

# tcnn's hash factors per dimension (common_device.h); "CoherentPrime" is tcnn's default and the only one
# its default build compiles; the other two are offered for configs that name them.
HASH_PRIMES = {
    "CoherentPrime": (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "Prime": (1958374283, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737),
    "ReversedPrime": (2165219737, 1434869437, 2097192037, 3674653429, 805459861, 2654435761, 1958374283),
}
INTERPOLATIONS = ("Linear", "Nearest", "Smoothstep")


def check_level_keys(name: str, config: dict[str, Any]) -> tuple[int, int, int, int]:
    """n_levels, n_features_per_level, log2_hashmap_size, base_resolution of a grid config, checked as tcnn allows."""
    n_levels = check_int(name, "n_levels", config["n_levels"], 1, 128)
    n_features = check_int(name, "n_features_per_level", config["n_features_per_level"], 1, 8)
    if n_features not in (1, 2, 4, 8):
        raise config_error(name, f"'n_features_per_level' must be 1, 2, 4 or 8 (as in tcnn), got {n_features}")
    log2_size = check_int(name, "log2_hashmap_size", config["log2_hashmap_size"], 1, 31)
    return n_levels, n_features, log2_size, check_int(name, "base_resolution", config["base_resolution"], 1)


def init_table(name: str, levels: list[GridLevel], n_features: int, generator: torch.Generator) -> torch.nn.Parameter:
    """The flat table of ``levels`` (tcnn's layout), drawn uniform in [-1e-4, 1e-4] like tcnn."""
    n_entries = levels[-1].offset + levels[-1].size
    if n_entries > UINT32_MASK:
        raise config_error(name, f"needs {n_entries} table entries; tcnn's uint32 offsets allow at most {UINT32_MASK}")
    return torch.nn.Parameter((torch.rand(n_entries * n_features, generator=generator) * 2 - 1) * 1e-4)


class Grid(Encoder):
    """tcnn's ``Grid`` encoding: ``{"otype": "Grid", "type": "Hash" | "Dense" | "Tiled", "n_levels": 16,
    "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16, "per_level_scale": 2.0,
    "interpolation": "Linear" | "Nearest" | "Smoothstep", "hash": "CoherentPrime"}``.

    ``per_level_scale`` defaults as in tcnn (2.0; dense grids grow to 256). ``seed`` draws the init,
    uniform in [-1e-4, 1e-4] like tcnn. x: [..., d], d in 1..7 -> [..., n_levels * n_features_per_level].
    """

    otype = "Grid"
    tcnn_auto = True
    grid_kernels = True
    default_type = "Hash"
    max_input_dims = 7
    defaults = {
        "type": None, "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 19, "base_resolution": 16,
        "per_level_scale": None, "interpolation": "Linear", "hash": "CoherentPrime", "seed": 1337,
    }

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        name = self.otype
        grid_type = check_choice(name, "type", config["type"] or self.default_type, GRID_TYPES)
        n_levels, n_features, log2_size, base_resolution = check_level_keys(name, config)
        per_level_scale = config["per_level_scale"]
        if per_level_scale is None:
            per_level_scale = default_per_level_scale(grid_type, n_levels, base_resolution)
        per_level_scale = check_float(name, "per_level_scale", per_level_scale, 1.0)
        self.interpolation = check_choice(name, "interpolation", config["interpolation"], INTERPOLATIONS)
        hash_name = check_choice(name, "hash", config["hash"], HASH_PRIMES)
        seed = check_int(name, "seed", config["seed"], 0)

        levels = grid_levels(self.n_input_dims, grid_type, n_levels, log2_size, base_resolution, per_level_scale)
        self.params = init_table(name, levels, n_features, seeded_generator(seed))
        self.levels = GridLevels(levels, HASH_PRIMES[hash_name])
        self.n_features_per_level = n_features
        self.n_output_dims = n_levels * n_features
        return {
            "type": grid_type, "n_levels": n_levels, "n_features_per_level": n_features, "log2_hashmap_size": log2_size,
            "base_resolution": base_resolution, "per_level_scale": per_level_scale,
            "interpolation": self.interpolation, "hash": hash_name, "seed": seed,
        }

    def tcnn_config(self) -> dict[str, Any] | None:
        """tcnn's default build compiles grids for 2 to 4 input dims and the CoherentPrime hash only."""
        config = self.config
        if not 2 <= self.n_input_dims <= 4 or config["hash"] != "CoherentPrime":
            return None
        del config["seed"]
        return config

    def output_bands(self) -> torch.Tensor:
        """Output j belongs to level j // n_features_per_level (tcnn's level-major layout)."""
        return torch.arange(self.n_output_dims) // self.n_features_per_level

    def table_parameters(self) -> list[torch.nn.Parameter]:
        return [self.params]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return grid_encoding(x, self.params, self.levels, self.n_features_per_level, self.interpolation,
                             grid_kernel(self.backend), sparse_accumulator(self, self.params))


class HashGrid(Grid):
    """``{"otype": "HashGrid", ...}``: a Grid whose ``type`` defaults to "Hash" (Instant-NGP)."""

    otype = "HashGrid"


class DenseGrid(Grid):
    """``{"otype": "DenseGrid", ...}``: a Grid whose ``type`` defaults to "Dense"."""

    otype = "DenseGrid"
    default_type = "Dense"


class TiledGrid(Grid):
    """``{"otype": "TiledGrid", ...}``: a Grid whose ``type`` defaults to "Tiled" (levels capped at base_resolution^d)."""

    otype = "TiledGrid"
    default_type = "Tiled"
