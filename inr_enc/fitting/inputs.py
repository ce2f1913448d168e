"""The inputs of a folder run (``inr-fit images|audios``): which files (``list_signals``), the run folder each is
fitted into (``run_names``), and each file's identity (size and SHA-256 of its bytes, ``file_identity``), recorded in
its run's task section so that a changed file is never taken for its earlier fit (``check_unchanged``).

Run names never leave ``--out``: a name is the file's stem made safe (no leading dot, so never ``.`` or ``..``, no
separator, none of the folder run's own files, no name Windows reserves). A file whose run an earlier folder run
recorded keeps that folder; the others take their safe stem, or the first free ``stem-2``, ``stem-3``, ... in the
files' sorted order, skipping folders that hold something else. summary.csv records each file's run folder.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
from pathlib import Path
from typing import Any

from .run_folder import read_config, visible_entries
from .summary import COMPARISON_PLOT, SUMMARY_CSV, SUMMARY_MD
from .tasks import task_info

RESERVED = {name.lower() for name in (SUMMARY_CSV, SUMMARY_MD, COMPARISON_PLOT)}
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"{port}{k}" for port in ("COM", "LPT") for k in range(1, 10))}
MAX_NAME_BYTES = 240  # under NAME_MAX (255) with room for "-N"
IDENTITY_KEYS = ("file_size", "sha256")  # what file_identity adds to a run's task section


def list_signals(kind: str, where: str, out: Path | None = None) -> list[Path]:
    """The files to fit, sorted: a folder's files with a ``kind`` suffix (its task's, tasks.py), or every file a glob
    pattern matches, leaving out anything under ``out`` (a run's own outputs) and second paths to one file (links).
    ValueError when there are none.

    Patterns are expanded by pathlib, whose ``**`` does not descend into linked folders: a link loop (``D/self ->
    .``) cannot list a file many times, nor take exponential time as ``glob.glob`` does with two such links."""
    if Path(where).is_dir():
        suffixes = task_info(kind).suffixes
        files = [p for p in Path(where).iterdir() if p.is_file() and p.suffix.lower() in suffixes]
        if not files:
            raise ValueError(f"{where}: no {kind} files in the folder ({' '.join(suffixes)})")
    elif glob.has_magic(where):
        parts = Path(where).parts
        first = next(i for i, part in enumerate(parts) if glob.has_magic(part))
        anchor = Path(*parts[:first]) if first else Path()
        try:
            files = [p for p in anchor.glob(str(Path(*parts[first:]))) if p.is_file()]
        except (ValueError, NotImplementedError) as error:
            raise ValueError(f"{where}: not a usable glob pattern ({error})") from None
        if not files:
            raise ValueError(f"{where}: the pattern matches no file")
    else:
        raise ValueError(f"{where}: neither a folder nor a glob pattern (such as 'photos/*.png')")
    if out is not None:
        try:
            inside = out.resolve()
        except (OSError, RuntimeError) as error:  # a link loop
            raise ValueError(f"--out {out}: cannot be resolved ({error})") from None
        files = [file for file in files if not file.resolve().is_relative_to(inside)]
        if not files:
            raise ValueError(f"{where}: no file outside --out {out}")
    seen: set[tuple[int, int]] = set()
    unique = []
    for file in sorted(files, key=lambda p: (p.is_symlink(), len(p.parts), str(p))):  # a file's plainest path is kept
        try:
            stat = file.stat()
        except OSError:  # gone since it was listed
            continue
        if (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            unique.append(file)
    return sorted(unique)


def default_name(where: str) -> str:
    """A name for a folder run's default --out: the folder's, or for a glob the folder before its first wildcard."""
    parts = Path(where).parts
    plain = parts[:next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))]
    return Path(*plain).resolve().name if plain else Path.cwd().name


def default_out(where: str, configs: list[str], folder: bool) -> Path:
    """The default --out: out/<signal>-<configs>, the signal named by its file's stem, or for a folder run
    (``folder``) by ``default_name``; the configs by their names' stems, joined by "+"."""
    name = default_name(where) if folder else Path(where).stem
    return Path("out") / f"{name}-{'+'.join(Path(config).stem for config in configs)}"


def safe_name(stem: str) -> str:
    """``stem`` as the name of a folder inside --out: "_" before a leading dot (never ".", ".." or hidden), before the
    folder run's own file names and Windows' device names; "\\" as "_"; at most MAX_NAME_BYTES bytes."""
    name = os.fsencode(stem).decode(errors="replace").replace("\\", "_")  # a name's undecodable bytes as U+FFFD
    if not name or name.startswith(".") or name.lower() in RESERVED or name.split(".")[0].upper() in WINDOWS_RESERVED:
        name = "_" + name
    return name.encode()[:MAX_NAME_BYTES].decode(errors="ignore")


def recorded_inputs(out: Path) -> dict[str, Path | None]:
    """Each folder in ``out`` -> the input file its run records (resolved), or None where it holds something else
    (files but no readable run); empty folders are left out (free to use)."""
    if not out.is_dir():
        return {}
    recorded: dict[str, Path | None] = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            task = read_config(folder).get("task")
            recorded[folder.name] = Path(os.path.realpath(task["path"]))
        except Exception:  # no config.yaml, or not one of ours: someone else's, unless empty but for leftovers
            try:
                used = bool(visible_entries(folder))
            except OSError:
                used = True
            if used:
                recorded[folder.name] = None
    return recorded


def run_names(files: list[Path], out: Path | None = None) -> list[str]:
    """A distinct run-folder name inside ``out`` per file (see the module's docstring)."""
    recorded = recorded_inputs(out) if out is not None else {}
    owner = {path: name for name, path in reversed(recorded.items()) if path is not None}  # the first name wins
    names = [owner.get(Path(os.path.realpath(file))) for file in files]
    taken = set(recorded) | {name for name in names if name is not None}
    for i, file in enumerate(files):
        if names[i] is None:
            base = name = safe_name(file.stem)
            k = 1
            while name in taken:
                k += 1
                name = f"{base}-{k}"
            names[i] = name
            taken.add(name)
    return names  # type: ignore[return-value]


@functools.lru_cache(maxsize=4096)
def _digest(path: str, size: int, mtime_ns: int, inode: int) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def file_identity(path: str | Path) -> dict[str, Any]:
    """{"file_size": bytes, "sha256": hex digest of the file's bytes} (read once per file version: cached by
    size, mtime and inode)."""
    stat = os.stat(path)
    return {"file_size": stat.st_size, "sha256": _digest(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns,
                                                          stat.st_ino)}


def same_input_and_facts(saved_task: Any, task: dict[str, Any]) -> bool:
    """Whether a saved run's task section names the same file (however the path is spelt: both resolved against
    the working directory) and the same facts of its signal as ``task``; the identity is ``check_unchanged``'s."""
    if not isinstance(saved_task, dict) or not isinstance(saved_task.get("path"), str):
        return False
    facts = [{k: v for k, v in t.items() if k not in (*IDENTITY_KEYS, "path")} for t in (saved_task, task)]
    return os.path.realpath(saved_task["path"]) == os.path.realpath(task["path"]) and facts[0] == facts[1]


def check_unchanged(saved_task: Any, task: dict[str, Any], folder: Path) -> None:
    """ValueError if the input of ``task`` is not the file the run saved in ``folder`` was fitted to (another size
    or SHA-256). A run saved before identities were recorded (inr_enc < 0.4) has none to compare: it is trusted,
    as it was then (a file's modification time is no evidence: copies and checkouts change it)."""
    saved = saved_task if isinstance(saved_task, dict) else {}
    if all(key in saved for key in IDENTITY_KEYS) and any(saved[key] != task[key] for key in IDENTITY_KEYS):
        raise ValueError(f"{task['path']} changed since its run in {folder} was saved; "
                         f"pass --overwrite to fit it again")
