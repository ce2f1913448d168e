"""The encoder contract shared by every encoding, and the config checks they use.

Every encoder is built from a tiny-cuda-nn style config dict (``{"otype": ..., key: value}``),
maps coordinates ``x: [..., n_input_dims]`` (nominally in [0, 1]) to ``[..., n_output_dims]``,
and exposes its fully resolved config (defaults filled in) as ``encoder.config``.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, ClassVar, Iterable

import torch
from torch import nn

from .tcnn_backend import BACKENDS, tcnn_encode, uses_tcnn


def config_error(otype: str, message: str) -> ValueError:
    return ValueError(f"{otype}: {message}")


def check_keys(otype: str, config: dict, valid: Iterable[str]) -> None:
    """Raise ValueError naming each unknown key, a close match, and the valid keys."""
    valid = sorted(set(valid))
    for key in config:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise config_error(otype, f"unknown config key '{key}'{hint}; valid keys: {', '.join(valid)}")


def check_int(otype: str, key: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise config_error(otype, f"'{key}' must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise config_error(otype, f"'{key}' must be {bounds}, got {value}")
    return value


def check_float(otype: str, key: str, value: Any, low: float | None = None, low_inclusive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise config_error(otype, f"'{key}' must be a finite number, got {value!r}")
    value = float(value)
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise config_error(otype, f"'{key}' must be {'>=' if low_inclusive else '>'} {low}, got {value}")
    return value


def check_choice(otype: str, key: str, value: Any, choices: Iterable[str]) -> str:
    """Case-insensitive choice (tcnn matches its enum strings case-insensitively); returns the canonical spelling."""
    choices = list(choices)
    for choice in choices:
        if isinstance(value, str) and value.lower() == choice.lower():
            return choice
    raise config_error(otype, f"'{key}' must be one of {', '.join(choices)}; got {value!r}")


def lookup_otype(kind: str, otype: Any, registry: dict[str, Any]) -> Any:
    """``registry[otype]`` matched case-insensitively as tcnn does; ValueError naming ``kind`` and the valid otypes."""
    by_lower = {name.lower(): value for name, value in registry.items()}
    if not isinstance(otype, str) or otype.lower() not in by_lower:
        raise ValueError(f"unknown {kind} otype {otype!r}; valid otypes: {', '.join(sorted(registry))}")
    return by_lower[otype.lower()]


def check_bool(otype: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise config_error(otype, f"'{key}' must be true or false, got {value!r}")
    return value


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 input computes in float64 (gradcheck); every other floating dtype computes in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


class Encoder(nn.Module):
    """Base class: parses the config, checks inputs, flattens the batch.

    Subclasses set ``otype`` and ``defaults`` (every valid key with its default), implement
    ``_setup(config)`` (validate values, build parameters, set ``n_output_dims``) and
    ``encode(x: [N, n_input_dims]) -> [N, n_output_dims]`` in ``x``'s dtype (float32 or float64).
    Encodings that tiny-cuda-nn also has set ``tcnn_compatible`` (or override ``tcnn_config``); ``backend``
    ("auto" | "torch" | "cpp" | "triton" | "tcnn", see tcnn_backend.py) picks who computes the forward pass.
    """

    otype: ClassVar[str]
    defaults: ClassVar[dict[str, Any]] = {}
    min_input_dims: ClassVar[int] = 1
    max_input_dims: ClassVar[int | None] = None
    tcnn_compatible: ClassVar[bool] = False
    tcnn_auto: ClassVar[bool] = False  # backend "auto" picks tcnn on CUDA (grids: fast, second derivatives too)
    grid_kernels: ClassVar[bool] = False  # computed by the grid kernels (backends "cpp", "triton"), or hands the
    # backend to a nested encoder that may be (Progressive)
    sparse_gradients: bool = False  # grids on the CPU kernel: sparse table gradients (optim.enable_sparse_gradients)

    def __init__(self, n_input_dims: int, config: dict | None = None, backend: str = "auto") -> None:
        super().__init__()
        self.backend = check_choice(self.otype, "backend", backend, BACKENDS)
        if backend in ("cpp", "triton") and not self.grid_kernels:
            raise ValueError(f"{self.otype}: backend {backend!r} has kernels for grid encodings only; use 'auto' or 'torch'")
        self._tcnn_modules: dict[torch.device, nn.Module] = {}
        config = dict(config or {})
        config.pop("otype", None)
        check_keys(self.otype, config, self.defaults)
        self.n_input_dims = check_int(self.otype, "n_input_dims", n_input_dims, self.min_input_dims, self.max_input_dims)
        resolved = {**self.defaults, **config}
        self.n_output_dims: int = 0
        self._config = {"otype": self.otype, **self._setup(resolved)}

    @property
    def config(self) -> dict[str, Any]:
        """The resolved config: every key, defaults filled in; ``build_encoder(enc.config, d)`` rebuilds it."""
        return dict(self._config)

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        """Validate ``config`` (all keys present), build state, set ``n_output_dims``; return the canonical config."""
        raise NotImplementedError

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def output_bands(self) -> torch.Tensor | None:
        """Band of each output dim, [n_output_dims] int64, coarse to fine from 0 (-1: always on, e.g. NeRF's
        raw input), for encodings ordered by frequency or resolution; None for the others."""
        return None

    def table_parameters(self) -> list[nn.Parameter]:
        """Parameters read by row lookups (grid tables), which optim.GridAdam updates lazily; none by default."""
        return []

    def tcnn_config(self) -> dict[str, Any] | None:
        """This encoder as a tiny-cuda-nn encoding config, or None where tcnn has no equivalent."""
        return self.config if self.tcnn_compatible else None

    def check_input(self, x: torch.Tensor) -> torch.Tensor:
        """Validate ``x: [..., n_input_dims]`` and return it as ``[N, n_input_dims]`` in the compute dtype."""
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{self.otype}: input must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise ValueError(f"{self.otype}: input must be floating point, got dtype {x.dtype}")
        if x.dim() == 0 or x.shape[-1] != self.n_input_dims:
            raise ValueError(
                f"{self.otype}: input must have shape [..., {self.n_input_dims}], got {list(x.shape)}"
            )
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{self.otype}: input contains NaN or inf")
        return x.reshape(-1, self.n_input_dims).to(compute_dtype(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., n_input_dims] coordinates (nominally in [0, 1]) -> [..., n_output_dims], float32 (float64 for float64 x)."""
        batch_shape = x.shape[:-1] if isinstance(x, torch.Tensor) and x.dim() > 0 else ()
        x = self.check_input(x)
        out = tcnn_encode(self, x, self._tcnn_modules) if uses_tcnn(self, x) else self.encode(x)
        return out.reshape(*batch_shape, self.n_output_dims)

    def extra_repr(self) -> str:
        keys = ", ".join(f"{k}={v!r}" for k, v in self._config.items() if k != "otype")
        return f"n_input_dims={self.n_input_dims}, n_output_dims={self.n_output_dims}, {keys}"
