"""The one place that decides which implementation computes an encoder: tcnn, the C++ or Triton grid kernels, or
PyTorch, and says why.

Each encoder class declares ``supported_backends`` (the implementations it has) and ``auto_backends`` (the order
"auto" tries them). Backend "auto" takes the first that can run the input here; a named backend runs or raises
ValueError saying why it cannot. Encoders that nest others (Composite, Progressive) pass their backend on, so
``backend="torch"`` reaches every nested grid; where they have no implementation of a named backend themselves,
their own part runs in torch and the nested encoders run the named one.
"Auto" prefers tcnn for grids only: tcnn has second derivatives for grids alone, and torch is as fast as tcnn for
the parameter-free encodings. Every forward records its choice in ``encoder.last_backend``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..config.backends import BACKENDS
from ..config.checks import check_choice
from ..ops.grid import kernel_unavailable_reason
from .tcnn import tcnn_unavailable_reason

if TYPE_CHECKING:
    from torch import nn


@dataclass(slots=True)
class Choice:
    """What computed an encoder's last forward, and why: ``reason`` says how it was chosen, naming each backend
    "auto" tried first and why it could not run."""

    backend: str  # one of config/backends.py IMPLEMENTATIONS
    asked: str
    skipped: tuple[str, ...] = ()  # "not <backend>: <why>", in the order tried

    @property
    def reason(self) -> str:
        if self.asked == "auto":
            return "; ".join(["auto", *self.skipped])
        if self.backend != self.asked:
            return f"{self.asked} asked: the nested encoders run it, this encoder's own part torch"
        return f"{self.asked} asked"


def check_backend(encoder: nn.Module, backend: str) -> str:
    """The canonical ``backend`` for ``encoder``; ValueError where it names an implementation the encoder lacks."""
    backend = check_choice(encoder.otype, "backend", backend, BACKENDS)
    if backend != "auto" and backend not in encoder.supported_backends and not encoder.passes_backend_to_nested:
        have = ", ".join(sorted(encoder.supported_backends))
        raise ValueError(f"{encoder.otype}: backend {backend!r} has no implementation of this encoding; "
                         f"it has {have} (or 'auto')")
    return backend


def unavailable_reason(encoder: nn.Module, backend: str, x: torch.Tensor,
                       cov: torch.Tensor | None = None) -> str | None:
    """Why ``backend`` cannot run ``encoder`` on ``x: [N, d]`` (and ``cov``) here, or None when it can."""
    if backend not in encoder.supported_backends:
        return f"{encoder.otype} has no {backend} implementation"
    if backend == "torch":
        return None
    if backend == "tcnn":
        return tcnn_unavailable_reason(encoder, x, cov)
    return kernel_unavailable_reason(backend, x, encoder.table_parameters())


def choose_backend(encoder: nn.Module, x: torch.Tensor, cov: torch.Tensor | None = None) -> Choice:
    """The implementation that runs ``encoder`` (its ``backend`` setting) on ``x: [N, d]`` here."""
    asked = encoder.backend
    if asked == "auto":
        skipped = []
        for name in encoder.auto_backends:
            reason = unavailable_reason(encoder, name, x, cov)
            if reason is None:
                return Choice(name, asked, tuple(skipped))
            skipped.append(f"not {name}: {reason}")
        raise AssertionError(f"{encoder.otype}: auto_backends must end with 'torch'")
    if asked not in encoder.supported_backends:  # passed on to nested encoders, checked by check_backend
        return Choice("torch", asked)
    reason = unavailable_reason(encoder, asked, x, cov)
    if reason is not None:
        raise ValueError(f"{encoder.otype}: backend {asked!r} unavailable: {reason}")
    return Choice(asked, asked)


def backends_used(model: nn.Module) -> dict[str, str]:
    """{module name: backend} of every encoder in ``model`` that has run a forward ("" is ``model`` itself)."""
    return {name: module.last_backend.backend for name, module in model.named_modules()
            if isinstance(getattr(module, "last_backend", None), Choice)}
