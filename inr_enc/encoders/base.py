"""The encoder contract shared by every encoding.

Every encoder is built from a tiny-cuda-nn style config dict (``{"otype": ..., key: value}``), maps coordinates
``x: [..., n_input_dims]`` (nominally in [0, 1]) to ``[..., n_output_dims]``, and exposes its fully resolved
config (defaults filled in) as ``encoder.config``. Resolving a config is pure (no tensors): the run-config schema
validates a whole run with it before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..config.checks import check_int, check_keys, check_mapping, without_unread_inherited
from ..config.memory import check_memory
from ..ops.precision import compute_dtype
from .backends import Choice, check_backend, choose_backend
from .tcnn import tcnn_encode


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


@dataclass(frozen=True)
class EncoderSpec:
    """A resolved encoding, built or not: what a network needs to know of its input."""

    cls: type[Encoder]
    n_input_dims: int
    config: dict[str, Any]
    n_output_dims: int
    n_bands: int | None  # frequency bands or levels (coarse-to-fine encodings), else None


class Encoder(nn.Module):
    """Base class: resolves the config, checks inputs, flattens the batch, dispatches to a backend.

    A subclass sets ``otype`` and ``defaults`` (every valid key with its default) and implements
    - ``_resolve(n_input_dims, config) -> dict`` (classmethod, pure): check every value (all keys present) and
      return the canonical config;
    - ``output_dims(n_input_dims, config) -> int`` (classmethod) and, for encodings ordered by frequency or
      resolution, ``band_count`` (classmethod) and ``output_bands``;
    - ``_build(config)``: parameters and buffers from the canonical config;
    - ``encode(x: [N, n_input_dims], backend, cov) -> [N, n_output_dims]`` in x's dtype (float32 or float64).
    ``supported_backends`` / ``auto_backends`` declare its implementations (see backends.py); ``uses_cov``
    encoders also read a covariance per sample (cone tracing). Every finite input must encode to finite values
    (and derivatives): ``guard_input`` reduces or saturates x for every backend, or raises ValueError naming the
    valid range. ``config_buffers`` names the buffers derived from the config, which loading checks.
    """

    otype: ClassVar[str]
    source: ClassVar[str]  # the paper (authors, year) or tiny-cuda-nn file it follows (docs/reference.md)
    defaults: ClassVar[dict[str, Any]] = {}
    min_input_dims: ClassVar[int] = 1
    max_input_dims: ClassVar[int | None] = None
    supported_backends: ClassVar[frozenset[str]] = frozenset({"torch"})
    auto_backends: ClassVar[tuple[str, ...]] = ("torch",)
    passes_backend_to_nested: ClassVar[bool] = False  # Composite, Progressive: nested encoders get ``backend``
    uses_cov: bool = False  # forward(x, cov) reads cov; containers set it per instance from their nested encoders
    sized_by_signal: ClassVar[str | None] = None  # a key that, left null, a fitting task sets to the signal's size
    sparse_gradients: bool = False  # set by optim.enable_sparse_gradients: grid tables may get sparse gradients
    # Persistent buffers computed from the config (not trained), each with the keys that determine it (besides
    # n_input_dims): a state dict holding other values was saved by another config, and loading it raises.
    config_buffers: ClassVar[dict[str, tuple[str, ...]]] = {}
    # What tcnn writes into the dims it pads this encoding's output with (for a network that reads multiples of 16):
    # 1 in its Identity, Frequency, OneBlob, SphericalHarmonics and TriangleWave encodings (the first layer then
    # has a bias), 0 in grids; inr_enc's own encodings pad with 1.
    tcnn_pad_value: ClassVar[float] = 1.0

    def __init__(self, n_input_dims: int, config: dict | None = None, backend: str = "auto", *,
                 resolved: bool = False) -> None:
        """``resolved``: ``config`` is canonical already (``resolve_config``'s, e.g. from an EncoderSpec): it is
        not checked again."""
        super().__init__()
        self._config = dict(config) if resolved else self.resolve_config(config or {}, n_input_dims)
        self.n_input_dims = int(n_input_dims)
        self.n_output_dims: int = self.output_dims(self.n_input_dims, self._config)
        self.check_memory(self.n_input_dims, self._config)
        self.backend = check_backend(self, backend)
        self.last_backend: Choice | None = None  # what ran the last forward (backends.choose_backend)
        self._tcnn_modules: dict[torch.device, nn.Module] = {}
        self._build(self._config)

    @classmethod
    def resolve_config(cls, config: Any, n_input_dims: Any) -> dict[str, Any]:
        """The canonical config (``otype`` first, every key, defaults filled in) or ValueError naming the problem.
        Pure: allocates no tensors."""
        config = without_unread_inherited(check_mapping(cls.otype, "config", config, allow_none=False), cls.defaults)
        config.pop("otype", None)
        check_keys(cls.otype, config, cls.defaults)
        n_input_dims = check_int(cls.otype, "n_input_dims", n_input_dims, cls.min_input_dims, cls.max_input_dims)
        return {"otype": cls.otype, **cls._resolve(n_input_dims, {**cls.defaults, **config})}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        """n_output_dims for a resolved config."""
        raise NotImplementedError

    @classmethod
    def band_count(cls, n_input_dims: int, config: dict[str, Any]) -> int | None:
        """Number of frequency bands or levels of a resolved config (see ``output_bands``); None for the others."""
        return None

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        """Elements of the parameters and buffers that ``_build`` makes for a resolved ``config`` (pure: checked
        against the memory limit before building); 0 for parameter-free encodings."""
        return 0

    @classmethod
    def fixed_activation_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        """Elements a forward computes whatever its batch size (LatentGrid's feature map); 0 by default."""
        return 0

    @classmethod
    def always_on_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        """Output dims in band -1 (always on, see ``output_bands``; NeRF's raw input); the other bands are equal."""
        return 0

    @classmethod
    def check_memory(cls, n_input_dims: int, config: dict[str, Any], limit: int | None = None) -> None:
        """ValueError when the float32 parameters and batch-independent activations of a resolved ``config`` pass
        ``limit`` (default: config.memory.memory_limit())."""
        n = cls.parameter_count(n_input_dims, config) + cls.fixed_activation_count(n_input_dims, config)
        check_memory(f"{cls.otype}: parameters and batch-independent activations", 4 * n, limit)

    @classmethod
    def nested_backend(cls, backend: str) -> str:
        """The backend an encoder that passes its own on (``passes_backend_to_nested``) gives its nested encoders:
        the same, except that where tcnn runs this encoder whole, the nested ones run inside it ("auto")."""
        return "auto" if backend == "tcnn" and "tcnn" in cls.supported_backends else backend

    @classmethod
    def spec_of(cls, config: dict[str, Any], n_input_dims: int) -> EncoderSpec:
        """The EncoderSpec of a resolved ``config``."""
        return EncoderSpec(cls, n_input_dims, config, cls.output_dims(n_input_dims, config),
                           cls.band_count(n_input_dims, config))

    @property
    def spec(self) -> EncoderSpec:
        return self.spec_of(self._config, self.n_input_dims)

    def _build(self, config: dict[str, Any]) -> None:
        """Parameters and buffers from the resolved ``config``; nothing for parameter-free encodings."""

    @property
    def config(self) -> dict[str, Any]:
        """The resolved config: every key, defaults filled in; ``build_encoder(enc.config, d)`` rebuilds it."""
        return dict(self._config)

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [N, n_input_dims] checked, in the compute dtype -> [N, n_output_dims]; ``backend`` as chosen by
        backends.choose_backend (one of ``supported_backends``); ``cov`` [N, d, d] only where ``uses_cov``."""
        raise NotImplementedError

    def output_bands(self) -> torch.Tensor | None:
        """Band of each output dim, [n_output_dims] int64, coarse to fine from 0 (-1: always on, e.g. NeRF's
        raw input), for encodings ordered by frequency or resolution; None for the others."""
        return None

    def table_parameters(self) -> list[nn.Parameter]:
        """Parameters read by row lookups (grid tables), which optim.GridAdam updates lazily; none by default."""
        return []

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        """x: [N, n_input_dims] checked -> the x that ``backend`` computes on: x itself, or x reduced by an exact
        period, clamped where the outputs no longer change, or saturated as the class documents (ops/phase.py),
        so that every finite input gives finite outputs; or ValueError naming the valid input range. No host
        sync where avoidable. Default: x (the encoding is finite for every finite input as it stands)."""
        return x

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """nn.Module's loading, after checking each of ``config_buffers`` present in ``state_dict`` against the
        value this encoder's config gives: ValueError naming the encoder, the buffer and its keys where they differ
        (a state dict saved by another config), instead of silently encoding with buffers ``config`` denies."""
        for name, keys in self.config_buffers.items():
            saved, own = state_dict.get(prefix + name), self._buffers.get(name)
            if saved is None or own is None or own.is_meta:  # missing: nn.Module reports it (strict) or keeps ours
                continue
            same = (isinstance(saved, torch.Tensor) and saved.shape == own.shape
                    and torch.equal(saved.detach().to(own.device, own.dtype), own))
            if not same:
                given = ", ".join(f"{key}={self._config[key]!r}" for key in keys)
                raise ValueError(f"{self.otype}: the state dict's {prefix + name!r} differs from the buffer "
                                 f"{name!r} this encoder's config gives; it is determined by {', '.join(keys)} and "
                                 f"n_input_dims (here {given}, n_input_dims={self.n_input_dims}): build the "
                                 f"encoder with the config the state dict was saved with")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @classmethod
    def tcnn_alignment(cls, config: dict[str, Any]) -> int:
        """tcnn's ``required_output_alignment``: padding keeps this encoding's output a multiple of it."""
        return 1

    @classmethod
    def tcnn_columns(cls, spec: EncoderSpec, width: int | None = None) -> list[float | None]:
        """This encoding's output as tcnn lays it out, padded to ``width`` columns (default: none added): None
        for each of the encoder's output columns in order, the constant tcnn writes into each padded one."""
        n = spec.n_output_dims
        return [None] * n + [cls.tcnn_pad_value] * ((width or n) - n)

    def tcnn_config(self) -> dict[str, Any] | None:
        """This encoder as a tiny-cuda-nn encoding config, or None where tcnn has no equivalent."""
        return self.config if "tcnn" in self.supported_backends else None

    def check_input(self, x: Any) -> torch.Tensor:
        """Validate ``x: [..., n_input_dims]`` and return it as ``[N, n_input_dims]`` in the compute dtype."""
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{self.otype}: input must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise ValueError(f"{self.otype}: input must be floating point, got dtype {x.dtype}")
        if x.dim() == 0 or x.shape[-1] != self.n_input_dims:
            raise ValueError(f"{self.otype}: input must have shape [..., {self.n_input_dims}], got {list(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{self.otype}: input contains NaN or inf")
        return x.reshape(-1, self.n_input_dims).to(compute_dtype(x))

    def check_cov(self, cov: Any, batch_shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Validate ``cov: [*batch_shape, d, d]`` and return it as ``[N, d, d]`` in ``dtype``."""
        if not self.uses_cov:
            raise ValueError(f"{self.otype}: this encoder takes no cov (uses_cov is false)")
        if not isinstance(cov, torch.Tensor) or not cov.is_floating_point():
            kind = f"dtype {cov.dtype}" if isinstance(cov, torch.Tensor) else type(cov).__name__
            raise ValueError(f"{self.otype}: cov must be a floating point torch.Tensor, got {kind}")
        d = self.n_input_dims
        if tuple(cov.shape) != (*batch_shape, d, d):
            raise ValueError(f"{self.otype}: cov must have shape {[*batch_shape, d, d]} (the input's batch shape + "
                             f"[d, d]), got {list(cov.shape)}")
        if not bool(torch.isfinite(cov).all()):
            raise ValueError(f"{self.otype}: cov contains NaN or inf")
        return cov.reshape(-1, d, d).to(dtype)

    def forward(self, x: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [..., n_input_dims] coordinates (nominally in [0, 1]); cov: None, or [..., d, d] covariances of x (in
        x's units) for ``uses_cov`` encoders -> [..., n_output_dims], float32 (float64 for float64 x)."""
        batch_shape = tuple(x.shape[:-1]) if isinstance(x, torch.Tensor) and x.dim() > 0 else ()
        flat = self.check_input(x)
        flat_cov = None if cov is None else self.check_cov(cov, batch_shape, flat.dtype)
        return self.run(flat, flat_cov).reshape(*batch_shape, self.n_output_dims)

    def run(self, x: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """x: [N, n_input_dims] already checked (and cov [N, d, d]) -> [N, n_output_dims], on the backend that
        backends.choose_backend picks; nested encoders are run through this."""
        choice = choose_backend(self, x, cov)
        self.__dict__["last_backend"] = choice  # a plain attribute: skips nn.Module.__setattr__'s checks per call
        x = self.guard_input(x, choice.backend)
        if choice.backend == "tcnn":
            return tcnn_encode(self, x, self._tcnn_modules)
        return self.encode(x, choice.backend, cov)

    def extra_repr(self) -> str:
        keys = ", ".join(f"{k}={v!r}" for k, v in self._config.items() if k != "otype")
        return f"n_input_dims={self.n_input_dims}, n_output_dims={self.n_output_dims}, {keys}"
