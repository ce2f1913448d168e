"""tiny-cuda-nn's Composite encoding: different encodings for different slices of the input dims."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .base import Encoder, check_choice, check_int, config_error

REDUCTIONS = ("Concatenation", "Sum", "Product")
NESTED_ONLY_KEYS = ("n_dims_to_encode", "dims_to_encode_begin")


class Composite(Encoder):
    """``{"otype": "Composite", "nested": [{"n_dims_to_encode": 3, "otype": ...}, {"otype": ...}],
    "reduction": "Concatenation" | "Sum" | "Product"}``.

    As in tcnn (encodings/composite.h): nested encodings take consecutive input dims in order (or from
    ``dims_to_encode_begin``); at most one may leave ``n_dims_to_encode`` out and takes the dims left;
    entries with 0 dims are skipped. Concatenation joins outputs in order; Sum and Product need equal widths.
    x: [..., d] -> [..., sum of nested widths] (concatenation) or [..., nested width].
    """

    otype = "Composite"
    defaults = {"nested": None, "reduction": "Concatenation"}

    def _setup(self, config: dict[str, Any]) -> dict[str, Any]:
        from .registry import build_encoder

        nested = config["nested"]
        if not isinstance(nested, (list, tuple)) or not nested or not all(isinstance(c, dict) for c in nested):
            raise config_error(self.otype, "'nested' must be a non-empty list of encoding configs")
        self.reduction = check_choice(self.otype, "reduction", config["reduction"], REDUCTIONS)
        explicit_begin = any("dims_to_encode_begin" in c for c in nested)
        n_specified = sum(check_int(self.otype, "n_dims_to_encode", c.get("n_dims_to_encode", 0), 0) for c in nested)
        if not explicit_begin and n_specified > self.n_input_dims:
            message = f"nested encodings take {n_specified} dims, more than the {self.n_input_dims} given"
            raise config_error(self.otype, message)
        n_unspecified = sum("n_dims_to_encode" not in c for c in nested)
        if n_unspecified > 1 or (explicit_begin and n_unspecified):
            message = "may leave 'n_dims_to_encode' out for a single nested encoding only (none with 'dims_to_encode_begin')"
            raise config_error(self.otype, message)

        self.encoders = nn.ModuleList()
        self.slices: list[tuple[int, int]] = []
        resolved, begin = [], 0
        for entry in nested:
            n_dims = entry.get("n_dims_to_encode", self.n_input_dims - n_specified)
            begin = check_int(self.otype, "dims_to_encode_begin", entry.get("dims_to_encode_begin", begin), 0)
            if begin + n_dims > self.n_input_dims:
                message = f"a nested encoding reads dims {begin}..{begin + n_dims - 1} of {self.n_input_dims}"
                raise config_error(self.otype, message)
            inner = {k: v for k, v in entry.items() if k not in NESTED_ONLY_KEYS}
            if n_dims > 0:
                encoder = build_encoder(inner, n_dims)
                self.encoders.append(encoder)
                self.slices.append((begin, begin + n_dims))
                inner = encoder.config
            resolved.append({**inner, "n_dims_to_encode": n_dims, **({"dims_to_encode_begin": begin} if explicit_begin else {})})
            begin += n_dims
        if not self.encoders:
            raise config_error(self.otype, "no nested encoding encodes any dim")
        widths = [e.n_output_dims for e in self.encoders]
        if self.reduction != "Concatenation" and len(set(widths)) > 1:
            raise config_error(self.otype, f"reduction {self.reduction} needs nested encodings of equal width, got {widths}")
        self.n_output_dims = sum(widths) if self.reduction == "Concatenation" else widths[0]
        return {"nested": resolved, "reduction": self.reduction}

    def tcnn_config(self) -> dict[str, Any] | None:
        """The same composition for tcnn, or None when a nested encoding has no tcnn equivalent."""
        nested = []
        for encoder, (begin, end) in zip(self.encoders, self.slices):
            inner = encoder.tcnn_config()
            if inner is None:
                return None
            nested.append({**inner, "n_dims_to_encode": end - begin, "dims_to_encode_begin": begin})
        return {"otype": self.otype, "nested": nested, "reduction": self.reduction}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [enc.encode(x[:, begin:end]) for enc, (begin, end) in zip(self.encoders, self.slices)]
        if self.reduction == "Concatenation":
            return torch.cat(outputs, dim=-1)
        result = outputs[0]
        for out in outputs[1:]:
            result = result + out if self.reduction == "Sum" else result * out
        return result
