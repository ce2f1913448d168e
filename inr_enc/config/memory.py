"""How much memory a run may use, and the check every estimate goes through before anything is allocated.

Plain Python, no torch (the lowest layer). The limit is ``set_memory_limit``'s (``inr-fit --max-memory`` sets it
for its run: ``memory_limit_set``), else the environment variable ``INR_ENC_MAX_MEMORY`` (e.g. "64G"), else the
tightest of what this process can still get:
- this machine's physical memory (not MemAvailable: that moves with the page cache and other programs, so the same
  run would pass or fail by the moment; swap aside, physical memory is what a run cannot exceed);
- the soft RLIMIT_AS (``ulimit -v``) less the address space already mapped (VmSize: the interpreter, torch and its
  libraries map a gigabyte or more before anything is allocated, and every later allocation counts on top);
- the soft RLIMIT_DATA (``ulimit -d``) less the data already mapped (VmData);
- the cgroup's memory limit (a container's; v2 memory.max of this process's cgroup and its parents, v1
  hierarchical_memory_limit) less what the cgroup already holds apart from its file cache (memory.current or
  memory.usage_in_bytes minus active and inactive file pages, which the kernel reclaims before it kills).
Estimates are approximate (see ``field/schema.py`` ``estimate_run_memory``): the check refuses what cannot fit,
it does not promise that what passes fits.
"""

from __future__ import annotations

import math
import os
import re
import resource
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


def _read_text(path: str) -> str | None:
    """The text of a /proc or /sys file, None where it cannot be read (no such file, not Linux)."""
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _fields(text: str | None, separator: str | None = None) -> dict[str, int]:
    """"key value" lines (/proc/self/status with ":", memory.stat without) -> {key: first number}; others left out."""
    fields = {}
    for line in (text or "").splitlines():
        key, _, value = line.partition(separator) if separator else line.partition(" ")
        number = value.split()[:1]
        if number and number[0].isdigit():
            fields[key.strip()] = int(number[0])
    return fields


def _number(text: str | None) -> int | None:
    """A cgroup file's byte count; None for "max", a missing file or anything else."""
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _process_limits() -> list[tuple[int, str]]:
    """(bytes left, phrase) under the soft RLIMIT_AS and RLIMIT_DATA that are set."""
    status = _fields(_read_text("/proc/self/status"), ":")
    found = []
    for name, used_key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        try:
            soft = resource.getrlimit(getattr(resource, name))[0]
        except (AttributeError, ValueError, OSError):
            continue
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        used = 1024 * status.get(used_key, 0)  # kB
        found.append((max(soft - used, 0), f"the {format_bytes(max(soft - used, 0))} left under the process limit "
                                           f"({name}) {format_bytes(soft)} ({format_bytes(used)} {used_key} in use)"))
    return found


V1_NO_LIMIT = 2**60  # cgroup v1 writes "no limit" as the largest page-aligned 64-bit number (about 2^63)


def _cgroup_v2(place: str) -> tuple[int, int] | None:
    """(limit, bytes held apart from file cache) of cgroup v2: the tightest memory.max from this process's cgroup
    up to the root (a parent's limit binds its children); None without one."""
    parts = [part for part in place.split("/") if part]
    folders = ["/sys/fs/cgroup/" + "/".join(parts[:i]) for i in range(len(parts), -1, -1)]
    limits = [n for n in (_number(_read_text(f"{folder}/memory.max")) for folder in folders) if n is not None]
    if not limits:
        return None
    stat = _fields(_read_text(f"{folders[0]}/memory.stat"))
    usage = _number(_read_text(f"{folders[0]}/memory.current")) or 0
    return min(limits), usage - stat.get("active_file", 0) - stat.get("inactive_file", 0)


def _cgroup_v1(place: str) -> tuple[int, int] | None:
    """The same for cgroup v1 (memory.stat's hierarchical_memory_limit: the walk done by the kernel), in this
    process's cgroup under the mount or, in a container, the mount's own."""
    for folder in (f"/sys/fs/cgroup/memory/{place.strip('/')}", "/sys/fs/cgroup/memory"):
        stat = _fields(_read_text(f"{folder}/memory.stat"))
        limit = stat.get("hierarchical_memory_limit")
        if limit is not None:
            if limit >= V1_NO_LIMIT:
                return None
            usage = _number(_read_text(f"{folder}/memory.usage_in_bytes")) or 0
            return limit, usage - stat.get("total_active_file", 0) - stat.get("total_inactive_file", 0)
    return None


def _cgroup_limit() -> tuple[int, str] | None:
    """(bytes left, phrase) under this process's cgroup memory limit (v2, else v1), None without one."""
    places = {}  # /proc/self/cgroup lines "id:controllers:path"; v2's controllers are ""
    for line in (_read_text("/proc/self/cgroup") or "").splitlines():
        _, controllers, place = line.split(":", 2) if line.count(":") >= 2 else ("", "-", "")
        for controller in controllers.split(","):
            places[controller] = place.strip()
    found = _cgroup_v2(places.get("", "/")) or _cgroup_v1(places.get("memory", "/"))
    if found is None:
        return None
    limit, held = found[0], max(found[1], 0)
    left = max(limit - held, 0)
    return left, (f"the {format_bytes(left)} left under the cgroup limit {format_bytes(limit)} "
                  f"({format_bytes(held)} in use)")


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
        return _limit, f"the memory limit {format_bytes(_limit)}"
    env = os.environ.get(ENV_VAR)
    if env:
        try:
            limit = parse_bytes(env)
            return limit, f"the memory limit ({ENV_VAR}) {format_bytes(limit)}"
        except ValueError as error:
            raise ValueError(f"{ENV_VAR}: {error}") from None
    physical = physical_memory()
    found = [(physical, f"this machine's {format_bytes(physical)}")] if physical else []
    found += _process_limits() + [x for x in [_cgroup_limit()] if x is not None]
    return min(found, default=(None, ""), key=lambda x: x[0])


def memory_limit() -> int | None:
    """Bytes a run may use: ``set_memory_limit``'s, else ``INR_ENC_MAX_MEMORY``'s, else the tightest of the
    physical memory and what the process and cgroup limits leave (module docstring; None where none is known:
    nothing is refused)."""
    return _limit_and_source()[0]


def check_memory(what: str, nbytes: int, limit: int | None = None) -> None:
    """ValueError like "HashGrid: parameters need 3.2 TiB, more than this machine's 23.4 GiB; ..." when ``nbytes``
    exceeds ``limit`` (default ``memory_limit()``). ``what``: the section and the part, e.g. "HashGrid: parameters"."""
    source = f"the limit {format_bytes(limit)}" if limit is not None else ""
    if limit is None:
        limit, source = _limit_and_source()
    if limit is None or nbytes <= limit:
        return
    raise ValueError(f"{what} need {format_bytes(nbytes)}, more than {source}; pass --max-memory "
                     f"(inr-fit), set {ENV_VAR} or call inr_enc.config.memory.set_memory_limit to allow more")
