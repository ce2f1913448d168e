"""Writing a dataset folder whole: the scene scripts build it in a staging folder beside ``out`` and swap it in at
the end, so an interrupted or failed run leaves ``out`` as it was. Plain Python (the scripts run under Blender's
or pycolmap's Python, without inr_enc)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def staged_folder(out: str) -> Iterator[str]:
    """Yield a new empty folder beside ``out``; when the block ends without an error it replaces ``out`` (the old
    one is removed only after the swap), otherwise it is deleted and ``out`` is untouched."""
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    try:
        yield staging
        if os.path.exists(out):
            old = staging + ".old"
            os.replace(out, old)
            os.replace(staging, out)
            shutil.rmtree(old)
        else:
            os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
