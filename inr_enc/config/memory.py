"""How much memory a run may use, and the check every estimate goes through before anything is allocated.

Plain Python, no torch (the lowest layer). The limit is this machine's physical memory unless the environment
variable ``INR_ENC_MAX_MEMORY`` (e.g. "64G") or ``set_memory_limit`` says otherwise; ``inr-fit --max-memory``
sets it for its run (``memory_limit_set``). Estimates are approximate (see ``config/schema.py`` ``estimate_run_memory``):
the check refuses what cannot fit, it does not promise that what passes fits.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

ENV_VAR = "INR_ENC_MAX_MEMORY"
UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_BYTES = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([+-]?[0-9]+))?\s*([KMGTP]?)(I?B)?\s*", re.IGNORECASE)
_limit: int | None = None  # set_memory_limit's


def parse_bytes(text: str | int) -> int:
    """A size in bytes from "8G", "512M", "1.5GiB", "2TB", "1e9" or a plain count (units are powers of 1024);
    ValueError for anything else (negative, zero, not a size)."""
    if isinstance(text, bool):
        raise ValueError(f"memory size must be a number of bytes like 8G or 512M, got {text!r}")
    if isinstance(text, int):
        value = float(text)
    else:
        match = _BYTES.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"memory size must be a number of bytes like 8G, 512M or 1.5GiB, got {text!r}")
        number, exponent, unit, _ = match.groups()
        value = float(number) * 10.0 ** int(exponent or 0) * UNITS[unit.upper()]
    if not (math.isfinite(value) and 1 <= value < 2**63):
        raise ValueError(f"memory size must be between 1 byte and 8 EiB, got {text!r}")
    return int(value)


def format_bytes(nbytes: float) -> str:
    """1536 -> "1.5 KiB"; in the largest binary unit that keeps the number >= 1."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(nbytes) < 1024:
            return f"{nbytes:.0f} B" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes / 1024:.3g} EiB"


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def set_memory_limit(nbytes: int | str | None) -> None:
    """The limit for this process (a count of bytes or a size like "8G"); None goes back to the default."""
    global _limit
    _limit = None if nbytes is None else parse_bytes(nbytes)


@contextmanager
def memory_limit_set(nbytes: int | str | None) -> Iterator[None]:
    """``set_memory_limit(nbytes)`` within the block (None: leave it as it is), the earlier limit restored after."""
    global _limit
    earlier = _limit
    if nbytes is not None:
        set_memory_limit(nbytes)
    try:
        yield
    finally:
        _limit = earlier


def _limit_and_source() -> tuple[int | None, str]:
    if _limit is not None:
        return _limit, "the memory limit"
    env = os.environ.get(ENV_VAR)
    if env:
        try:
            return parse_bytes(env), f"the memory limit ({ENV_VAR})"
        except ValueError as error:
            raise ValueError(f"{ENV_VAR}: {error}") from None
    return physical_memory(), "this machine's"


def memory_limit() -> int | None:
    """Bytes a run may use: ``set_memory_limit``'s, else ``INR_ENC_MAX_MEMORY``'s, else the physical memory (None
    where unknown: nothing is refused)."""
    return _limit_and_source()[0]


def check_memory(what: str, nbytes: int, limit: int | None = None) -> None:
    """ValueError like "HashGrid: parameters need 3.2 TiB, more than this machine's 23.4 GiB; ..." when ``nbytes``
    exceeds ``limit`` (default ``memory_limit()``). ``what``: the section and the part, e.g. "HashGrid: parameters"."""
    source = "the limit"
    if limit is None:
        limit, source = _limit_and_source()
    if limit is None or nbytes <= limit:
        return
    raise ValueError(f"{what} need {format_bytes(nbytes)}, more than {source} {format_bytes(limit)}; pass --max-memory "
                     f"(inr-fit), set {ENV_VAR} or call inr_enc.config.memory.set_memory_limit to allow more")
