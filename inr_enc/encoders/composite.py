"""tiny-cuda-nn's Composite encoding: different encodings for different slices of the input dims."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..config.checks import check_choice, check_int, config_error
from .base import Encoder, EncoderSpec
from .registry import build_encoder, encoder_spec, register_encoder

REDUCTIONS = ("Concatenation", "Sum", "Product")
NESTED_ONLY_KEYS = ("n_dims_to_encode", "dims_to_encode_begin")


def _nested_slices(config: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    """(begin, end, encoding config) of each nested entry of a resolved Composite config that encodes any dim."""
    slices, begin = [], 0
    for entry in config["nested"]:
        begin = entry.get("dims_to_encode_begin", begin)
        end = begin + entry["n_dims_to_encode"]
        if end > begin:
            slices.append((begin, end, {k: v for k, v in entry.items() if k not in NESTED_ONLY_KEYS}))
        begin = end
    return slices


def _nested_specs(config: dict[str, Any]) -> list[EncoderSpec]:
    return [encoder_spec(inner, end - begin) for begin, end, inner in _nested_slices(config)]


@register_encoder()
class Composite(Encoder):
    """``{"otype": "Composite", "nested": [{"n_dims_to_encode": 3, "otype": ...}, {"otype": ...}],
    "reduction": "Concatenation" | "Sum" | "Product"}``.

    As in tcnn (encodings/composite.h): nested encodings take consecutive input dims in order (or from
    ``dims_to_encode_begin``); at most one may leave ``n_dims_to_encode`` out and takes the dims left;
    entries with 0 dims are skipped. Concatenation joins outputs in order; Sum and Product need equal widths.
    x: [..., d] -> [..., sum of nested widths] (concatenation) or [..., nested width]. Any finite x: as each
    nested encoding documents (each guards its own slice; under backend "tcnn" ``guard_input`` applies their
    guards before tcnn runs the whole composition, unless nested slices overlap).
    """

    otype = "Composite"
    source = "tiny-cuda-nn include/tiny-cuda-nn/encodings/composite.h"
    supported_backends = frozenset({"torch", "tcnn"})  # tcnn: the whole composition, where tcnn has every part
    passes_backend_to_nested = True
    defaults = {"nested": None, "reduction": "Concatenation"}

    @classmethod
    def _resolve(cls, n_input_dims: int, config: dict[str, Any]) -> dict[str, Any]:
        nested = config["nested"]
        if not isinstance(nested, (list, tuple)) or not nested:
            got = f"{type(nested).__name__} {nested!r}"[:200]
            raise config_error(cls.otype, f"'nested' must be a non-empty list of encoding configs, got {got}")
        for i, entry in enumerate(nested):
            if not isinstance(entry, dict):
                got = f"{type(entry).__name__} {entry!r}"[:200]
                raise config_error(cls.otype, f"'nested' entry {i} must be an encoding config (a mapping), got {got}")
        reduction = check_choice(cls.otype, "reduction", config["reduction"], REDUCTIONS)
        explicit_begin = any("dims_to_encode_begin" in c for c in nested)
        n_specified = sum(check_int(cls.otype, "n_dims_to_encode", c.get("n_dims_to_encode", 0), 0) for c in nested)
        if not explicit_begin and n_specified > n_input_dims:
            raise config_error(cls.otype,
                               f"nested encodings take {n_specified} dims, more than the {n_input_dims} given")
        n_unspecified = sum("n_dims_to_encode" not in c for c in nested)
        if n_unspecified > 1 or (explicit_begin and n_unspecified):
            message = ("may leave 'n_dims_to_encode' out for a single nested encoding only "
                       "(none with 'dims_to_encode_begin')")
            raise config_error(cls.otype, message)
        resolved, widths, begin = [], [], 0
        for entry in nested:
            n_dims = entry.get("n_dims_to_encode", n_input_dims - n_specified)
            begin = check_int(cls.otype, "dims_to_encode_begin", entry.get("dims_to_encode_begin", begin), 0)
            if begin + n_dims > n_input_dims:
                message = f"a nested encoding reads dims {begin}..{begin + n_dims - 1} of {n_input_dims}"
                raise config_error(cls.otype, message)
            inner = {k: v for k, v in entry.items() if k not in NESTED_ONLY_KEYS}
            if n_dims > 0:
                spec = encoder_spec(inner, n_dims)
                inner = spec.config
                widths.append(spec.n_output_dims)
            resolved.append({**inner, "n_dims_to_encode": n_dims,
                             **({"dims_to_encode_begin": begin} if explicit_begin else {})})
            begin += n_dims
        if not widths:
            raise config_error(cls.otype, "no nested encoding encodes any dim")
        if reduction != "Concatenation" and len(set(widths)) > 1:
            raise config_error(cls.otype, f"reduction {reduction} needs nested encodings of equal width, got {widths}")
        return {"nested": resolved, "reduction": reduction}

    @classmethod
    def output_dims(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        widths = [encoder_spec(inner, end - begin).n_output_dims for begin, end, inner in _nested_slices(config)]
        return sum(widths) if config["reduction"] == "Concatenation" else widths[0]

    @classmethod
    def parameter_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return sum(spec.cls.parameter_count(spec.n_input_dims, spec.config) for spec in _nested_specs(config))

    @classmethod
    def fixed_activation_count(cls, n_input_dims: int, config: dict[str, Any]) -> int:
        return sum(spec.cls.fixed_activation_count(spec.n_input_dims, spec.config) for spec in _nested_specs(config))

    @classmethod
    def tcnn_alignment(cls, config: dict[str, Any]) -> int:
        return math.lcm(*(spec.cls.tcnn_alignment(spec.config) for spec in _nested_specs(config)))

    @classmethod
    def tcnn_columns(cls, spec: EncoderSpec, width: int | None = None) -> list[float | None]:
        """As tcnn's Composite pads (encodings/composite.h): concatenated, each nested output but the last is
        padded to the next one's alignment, the last to ``width``; summed or multiplied, every nested output is
        padded to ``width`` and the padded dims hold the sum or product of their constants. Where inner padding
        happens, tcnn's Composite output is wider than inr_enc's (its inner padded dims; a network reads both
        alike)."""
        specs = _nested_specs(spec.config)
        if spec.config["reduction"] != "Concatenation":
            padded = [s.cls.tcnn_columns(s, width) for s in specs]
            if any(len({value is None for value in column}) > 1 for column in zip(*padded)):
                raise config_error(cls.otype, "tcnn would reduce padded dims with values here (SphericalHarmonics pads "
                                              "first, the others last): inr_enc has no layout for it")
            reduce = sum if spec.config["reduction"] == "Sum" else math.prod
            return [None if column[0] is None else float(reduce(column)) for column in zip(*padded)]
        columns: list[float | None] = []
        for nested, following in zip(specs, specs[1:]):
            done = len(columns) + nested.n_output_dims
            aligned = -(-done // (step := following.cls.tcnn_alignment(following.config))) * step
            columns += nested.cls.tcnn_columns(nested, aligned - len(columns))
        last = specs[-1]
        return columns + last.cls.tcnn_columns(last, None if width is None else width - len(columns))

    def _build(self, config: dict[str, Any]) -> None:
        self.reduction = config["reduction"]
        self.encoders = nn.ModuleList()
        self.slices: list[tuple[int, int]] = []
        nested_backend = self.nested_backend(self.backend)  # tcnn runs the whole composition
        for begin, end, inner in _nested_slices(config):
            self.encoders.append(build_encoder(inner, end - begin, nested_backend))
            self.slices.append((begin, end))
        self.uses_cov = any(encoder.uses_cov for encoder in self.encoders)

    def guard_input(self, x: torch.Tensor, backend: str) -> torch.Tensor:
        """On torch, x itself (each nested encoder guards its slice in its own ``run``); on tcnn, which runs the
        whole composition, each nested encoder's guard on its slice; x itself where slices overlap (one dim
        cannot take two guards)."""
        if backend != "tcnn":
            return x
        parts, end = [], 0
        for encoder, (begin, stop) in sorted(zip(self.encoders, self.slices), key=lambda pair: pair[1]):
            if begin < end:
                return x
            parts += [x[:, end:begin], encoder.guard_input(x[:, begin:stop], backend)]
            end = stop
        return torch.cat([*parts, x[:, end:]], dim=1)

    def tcnn_config(self) -> dict[str, Any] | None:
        """The same composition for tcnn, or None when a nested encoding has no tcnn equivalent or tcnn would pad
        between nested outputs (its output would be wider than this encoder's: ``tcnn_columns``)."""
        if any(column is not None for column in self.tcnn_columns(self.spec)):
            return None
        nested = []
        for encoder, (begin, end) in zip(self.encoders, self.slices):
            inner = encoder.tcnn_config()
            if inner is None:
                return None
            nested.append({**inner, "n_dims_to_encode": end - begin, "dims_to_encode_begin": begin})
        return {"otype": self.otype, "nested": nested, "reduction": self.reduction}

    def encode(self, x: torch.Tensor, backend: str = "torch", cov: torch.Tensor | None = None) -> torch.Tensor:
        """Each nested encoder on its slice of x (and the matching block of cov, for those that read one)."""
        outputs = [enc.run(x[:, begin:end], cov[:, begin:end, begin:end] if cov is not None and enc.uses_cov else None)
                   for enc, (begin, end) in zip(self.encoders, self.slices)]
        if self.reduction == "Concatenation":
            return torch.cat(outputs, dim=-1)
        result = outputs[0]
        for out in outputs[1:]:
            result = result + out if self.reduction == "Sum" else result * out
        return result
