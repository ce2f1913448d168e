"""The network contract: what reads an encoder's features. Like encoders, a network is built from a tiny-cuda-nn
style config (``{"otype": ..., key: value}``) whose checks are pure (``resolve_config``), and exposes the resolved
config as ``network.config``."""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import torch
from torch import nn

from ..config.checks import check_int, check_keys, check_mapping, without_unread_inherited
from ..config.memory import check_memory
from ..encoders.base import Encoder, EncoderSpec

INFERENCE_ROWS = 1 << 16  # rows per pass when no gradient is needed (see in_row_blocks)


def in_row_blocks(layers: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``layers(x)``; without autograd, a large 2-D x runs INFERENCE_ROWS rows at a time (the same numbers up to
    float rounding; each layer's activations then stay in cache, 2-3x faster on CPU for hundreds of thousands of
    rows)."""
    if torch.is_grad_enabled() or x.dim() != 2 or len(x) <= INFERENCE_ROWS:
        return layers(x)
    return torch.cat([layers(x[i:i + INFERENCE_ROWS]) for i in range(0, len(x), INFERENCE_ROWS)])


class Network(nn.Module):
    """Base class. A subclass sets ``otype`` and ``defaults`` (every valid key, ``otype`` included, with its
    default) and implements ``_resolve`` (classmethod, pure: check every value, return the canonical config) and
    ``_build(config, encoder)``. ``forward(h: [..., n_input_dims]) -> [..., n_output_dims]``, plus what the flags
    below declare:
    - ``reads_coordinates``: ``forward(h, coords)`` also reads the coordinates (PatchMLP routes by position);
    - ``has_levels``: ``forward(h, level=k)`` evaluates a level of detail, ``n_levels`` of them (PINs);
    - ``solves_closed_form``: ``solve(encoder, xs, ys, values, ridge)`` fits the weights in closed form
      (``training.solver: closed-form``);
    - ``default_encoding``: the encoding a field config that names none gets (else Identity).
    """

    otype: ClassVar[str]
    source: ClassVar[str]  # the paper (authors, year) or tiny-cuda-nn file it follows (docs/reference.md)
    defaults: ClassVar[dict[str, Any]] = {}
    reads_coordinates: ClassVar[bool] = False
    has_levels: ClassVar[bool] = False
    solves_closed_form: ClassVar[bool] = False
    default_encoding: ClassVar[dict[str, Any] | None] = None  # the encoding a field config without one gets

    def __init__(self, n_input_dims: int, n_output_dims: int, config: dict | None = None,
                 encoder: Encoder | None = None, *, resolved: bool = False) -> None:
        """``encoder``: the Encoder whose output this network reads, where the network depends on it (PINs'
        bands, PatchMLP's coordinate dims, Separable's axes); None for a network used on its own. ``resolved``:
        ``config`` is canonical already (``resolve_config``'s): it is not checked again."""
        super().__init__()
        spec = None if encoder is None else encoder.spec
        self.config = dict(config) if resolved else self.resolve_config(config or {}, n_input_dims, n_output_dims, spec)
        self.n_input_dims, self.n_output_dims = int(n_input_dims), int(n_output_dims)
        count = self.parameter_count(self.n_input_dims, self.n_output_dims, self.config, spec)
        check_memory(f"{self.otype}: parameters", 4 * count)
        self._build(self.config, encoder)

    @classmethod
    def class_for(cls, config: dict[str, Any]) -> type[Network]:
        """The class that builds ``config`` (registered for its otype): this one, unless a subclass says."""
        return cls

    @classmethod
    def resolve_config(cls, config: Any, n_input_dims: Any, n_output_dims: Any,
                       encoder: EncoderSpec | None = None) -> dict[str, Any]:
        """The canonical config, or ValueError naming the problem; pure (no tensors). ``encoder``: the resolved
        encoding that feeds this network, None for a network on its own."""
        config = {**cls.defaults,
                  **without_unread_inherited(check_mapping("network", "network", config, allow_none=False),
                                             cls.defaults)}
        check_keys("network", config, cls.defaults)
        check_int("network", "n_input_dims", n_input_dims, 1)
        check_int("network", "n_output_dims", n_output_dims, 1)
        return cls._resolve(int(n_input_dims), int(n_output_dims), config, encoder)

    @classmethod
    def _resolve(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                 encoder: EncoderSpec | None) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def parameter_count(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                        encoder: EncoderSpec | None) -> int:
        """Elements of the parameters and buffers ``_build`` makes for a resolved ``config`` (pure: checked against
        the memory limit before building); 0 unless a subclass counts them."""
        return 0

    @classmethod
    def activation_width(cls, n_input_dims: int, n_output_dims: int, config: dict[str, Any],
                         encoder: EncoderSpec | None) -> int:
        """Floats a forward computes per sample past its input (hidden layers, output): the run's memory estimate
        (field/schema.py) multiplies it by the batch."""
        return n_output_dims

    def _build(self, config: dict[str, Any], encoder: Encoder | None) -> None:
        raise NotImplementedError
