"""File handling the scene scripts share: a dataset folder is built in a staging folder beside ``out`` and swapped
in at the end, so an interrupted or failed run leaves ``out`` as it was; scratch folders are kept only when asked
for; transforms JSON files are written one way. Plain Python (the scripts run under Blender's or pycolmap's Python,
without inr_enc)."""

from __future__ import annotations

import json
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


@contextmanager
def scratch_folder(keep: str | None, prefix: str) -> Iterator[str]:
    """Yield ``keep`` (created if missing), which is left in place, or when ``keep`` is empty a new temporary folder
    named ``prefix...``, deleted when the block ends."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        yield keep
        return
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_transforms(path: str, meta: dict) -> None:
    """Write a transforms JSON file (NeRF-synthetic or nerfstudio-data) as JSON indented by 2."""
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
