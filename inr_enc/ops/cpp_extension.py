"""Building inr_enc's C++ kernels with torch's C++ extension tooling, once per environment, at first use.

Used by the grid kernel (ops/grid/cpu_kernel.py) and the lazy Adam update (optim/lazy_adam.py). Where nothing can
be built (no compiler, no headers, ``INR_ENC_NO_EXTENSION=1``) callers fall back to their PyTorch paths.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from types import ModuleType


@functools.cache
def build_extension(label: str, sources: tuple[str, ...], headers: tuple[str, ...] = ()) -> ModuleType | None:
    """The extension compiled from ``sources`` (paths), or None after a one-line notice on stderr naming
    ``label`` when it cannot be built here. ``INR_ENC_NO_EXTENSION=1`` skips every build."""
    if os.environ.get("INR_ENC_NO_EXTENSION") == "1":
        return None
    try:
        import torch
        from torch.utils.cpp_extension import _get_build_directory, load

        # one build per environment, torch version, kernel source (headers included: torch's own rebuild check
        # reads the listed sources only) and checkout (the sources' paths: the build rules name them, so two
        # checkouts or environments sharing torch's build folder would otherwise rebuild in turn, each at first use)
        stamp = b"".join(Path(path).read_bytes() for path in (*sources, *headers)) + sys.prefix.encode()
        stamp += "\n".join(str(Path(path).resolve()) for path in sources).encode()
        digest = hashlib.sha1(stamp).hexdigest()[:10]
        name = "_".join(re.sub(r"\W", "_", part) for part in ("inr_enc", label, torch.__version__, digest))
        build = Path(_get_build_directory(name, verbose=False))  # the folder load() builds in
        if not any(build.glob("*.so")) and not any(build.glob("*.pyd")):
            print(f"inr_enc: building the {label} for this environment (once, about a minute)", file=sys.stderr)
        try:
            return load(name=name, sources=list(sources), extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
        except Exception:  # e.g. Apple clang, which has no -fopenmp: one thread, still compiled
            return load(name=name + "_serial", sources=list(sources), extra_cflags=["-O3"])
    except Exception as error:  # no compiler, no headers, a failed build: all mean "use the torch path"
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        print(f"inr_enc: the {label} is unavailable ({reason[:200]}); using the PyTorch path", file=sys.stderr)
        return None
