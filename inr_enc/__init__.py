"""inr_enc: coordinate encoders for implicit neural representations and NeRF.

    >>> import torch, inr_enc
    >>> enc = inr_enc.build_encoder({"otype": "HashGrid", "n_levels": 16}, n_input_dims=3)
    >>> enc(torch.rand(8, 3)).shape
    torch.Size([8, 32])

Layers, one or two folders each, importing only those below (docs/architecture.md): ``config`` (checks, files,
memory) with ``io``, ``metrics`` and ``version`` at the root; ``ops`` (grid operations, schedules); ``encoders`` and
``optim`` (optimisers, losses); ``networks``; ``field`` (the run-config schema, Field, FieldBatch); the tasks
``fitting`` and ``nerf``; then the ``cli`` and the ``nerfstudio`` plugin.
"""

import importlib as _importlib
from typing import Any as _Any

from .version import __version__ as __version__  # re-exported

# name -> module it lives in. Imported on first use (PEP 562), so ``import inr_enc.config`` or the inr-fit command
# does not pay for torch before it needs it (inr-fit answers Ctrl-C or SIGTERM during that import with one line).
_EXPORTS = {
    "available_configs": "config", "load_config": "config",
    "ENCODERS": "encoders", "Encoder": "encoders", "build_encoder": "encoders", "tcnn_available": "encoders.tcnn",
    "Field": "field", "build_field": "field",
    "NETWORKS": "networks", "Network": "networks", "build_network": "networks",
    "load_tcnn_params": "field.tcnn_layout", "tcnn_n_params": "field.tcnn_layout", "tcnn_params": "field.tcnn_layout",
}
# subpackages and modules as attributes: name -> module (``inr_enc.tcnn_layout`` is where it has always been read)
_SUBMODULES = {name: name for name in ("cli", "config", "encoders", "field", "fitting", "io", "metrics", "nerf",
                                       "networks", "ops", "optim")} | {"tcnn_layout": "field.tcnn_layout"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _Any:
    """A public name, or a subpackage (``inr_enc.encoders`` after ``import inr_enc``), imported on first use."""
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    else:
        raise AttributeError(f"module 'inr_enc' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES, "__version__"})
