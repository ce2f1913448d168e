"""Optional tiny-cuda-nn: found at first use, never required.

``import tinycudann`` raises OSError (not ImportError) on a machine without a usable GPU, so both are caught.
"""

from __future__ import annotations

import functools
from types import ModuleType


@functools.lru_cache(maxsize=1)
def tinycudann() -> ModuleType | None:
    """The tinycudann module if it imports here, else None."""
    try:
        import tinycudann as tcnn
    except (ImportError, OSError):
        return None
    return tcnn


def tcnn_available() -> bool:
    return tinycudann() is not None
