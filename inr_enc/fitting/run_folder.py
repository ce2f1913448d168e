"""The output folder of one inr-fit run: exclusive while the run lives, and never left half replaced.

- **Lock.** A run holds an exclusive ``flock`` on the folder itself (a directory descriptor; no lock file is
  written). A second run into the same folder is refused while the first lives; the kernel drops the lock when
  its process ends, however it ends, so a killed run never blocks the next one.
- **Staging.** A new run writes into a staging folder inside ``out``; the staged files are moved in (replacing an
  earlier run's outputs, with ``--overwrite``) only once the new run's first checkpoint exists. A run that fails
  before that leaves the folder as it was (and removes it if it created it).
- **Whole folders** written by other commands (``inr-snapshot import``'s run folder) are staged beside their
  target and swapped in by :func:`staged_folder`.
- **Leftovers** of killed runs (temporary files of interrupted atomic writes, staging folders) are removed by the
  next run, under the lock, so a live run's files are never touched.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from ..config.parsing import parse_file
from ..io import write_text_atomically

try:
    import fcntl
except ImportError:  # Windows: no flock; runs into one folder are not serialised there
    fcntl = None

CHECKPOINT, CONFIG = "checkpoint.pt", "config.yaml"
STAGING_PREFIX = ".replacing-"
LEFTOVER_PATTERNS = (".*.tmp", f"{STAGING_PREFIX}*")


def check_target(out: Path, overwrite: bool) -> None:
    """ValueError if ``out`` holds files and ``overwrite`` is off (hidden leftovers of killed runs do not count)."""
    if out.is_dir() and not overwrite and visible_entries(out):
        raise ValueError(f"{out} exists and is not empty; pass --overwrite to replace it or --resume {out} to continue")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a folder")


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run: its config.yaml and checkpoint.pt (a finished run also has metrics.json)."""
    return (folder / CONFIG).is_file() and (folder / CHECKPOINT).is_file()


def visible_entries(folder: Path) -> list[Path]:
    """What ``folder`` holds besides the leftovers of killed runs (LEFTOVER_PATTERNS)."""
    return [p for p in folder.iterdir() if not any(p.match(pattern) for pattern in LEFTOVER_PATTERNS)]


def write_config(folder: Path, config: dict[str, Any]) -> None:
    """config.yaml: the resolved run config, written atomically."""
    write_text_atomically(folder / CONFIG, yaml.safe_dump(config, sort_keys=False))


def read_config(folder: Path) -> Any:
    """The run config saved in ``folder`` (config.yaml, parsed; ValueError with one line when it cannot be: not
    YAML, a key twice, nested too deep, too big)."""
    return parse_file(folder / CONFIG)


def lock_folder(folder: Path) -> int | None:
    """An exclusive ``flock`` on ``folder`` -> its descriptor (closing it unlocks; None where there is no flock);
    ValueError if another process holds it."""
    if fcntl is None:
        return None
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as error:
        raise ValueError(f"--out {folder}: cannot open the folder ({error.strerror or error})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ValueError(f"{folder} is in use by another inr-fit run; "
                         f"wait for it to finish or choose another --out") from None
    return fd


@contextmanager
def folder_run_locked(out: Path) -> Iterator[None]:
    """A folder run's lock on its whole ``out`` (created if missing, and removed again if left empty), so that a
    second folder run into it is refused at once instead of finding the first one's files in use."""
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--out {out}: cannot create the folder ({error.strerror or error})") from None
    fd = None
    try:
        fd = lock_folder(out)
        yield
    finally:
        if fd is not None:
            os.close(fd)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def _remove(path: Path) -> None:
    """A file, or a folder with what it holds (an output folder such as tensorboard/)."""
    shutil.rmtree(path) if path.is_dir() else path.unlink()


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A new folder (beside ``target``, hidden, named after it and this process) for the block to fill; when the
    block ends it replaces ``target`` whole, the earlier folder kept until the new one is in place. After an error
    the staged folder is removed and ``target`` stays as it was."""
    staged = target.with_name(f".{target.name}-{os.getpid()}")
    previous = staged.with_name(f"{staged.name}-previous")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    try:
        yield staged
        if target.exists():
            target.rename(previous)
        staged.rename(target)
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


class RunFolder:
    """Context manager around one run's writes into ``out``. ``path`` is where the run writes now (a staging
    folder while an earlier run is being replaced); ``checkpoint_saved()`` commits the staged files.

    ``output_patterns``: glob patterns of every file a run writes (what replacing deletes).
    """

    def __init__(self, out: Path, output_patterns: tuple[str, ...], resume: bool = False,
                 overwrite: bool = False) -> None:
        self.out, self.patterns, self.resume, self.overwrite = Path(out), output_patterns, resume, overwrite
        self.path = self.out
        self._fd: int | None = None
        self._created = False
        self._staged: list[str] | None = None  # the names being committed, once a commit has begun

    def __enter__(self) -> RunFolder:
        if not self.resume:
            check_target(self.out, self.overwrite)
        self._created = not self.out.exists()
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"--out {self.out}: cannot create the folder ({error.strerror or error})") from None
        self._lock()
        try:
            if not self.resume:
                check_target(self.out, self.overwrite)  # again, under the lock: another run may have just finished
            self._remove_leftovers()
            if not self.resume:  # a new run is staged until its first checkpoint, even into an empty folder
                self.path = self.out / f"{STAGING_PREFIX}{os.getpid()}"
                self.path.mkdir()
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._release(failed=self.path != self.out)

    def checkpoint_saved(self) -> None:
        """The run has a checkpoint: replace the earlier outputs with the staged files (no-op once committed; a
        commit stopped halfway is finished by calling it again).

        The earlier run's derived outputs go first (it stays resumable from its checkpoint and config), then the
        staged checkpoint and config move in by rename, checkpoint first."""
        if self.path == self.out:
            return
        if self._staged is None:
            self._staged = sorted((p.name for p in self.path.iterdir()),
                                  key=lambda name: (name != CHECKPOINT, name != CONFIG, name))
        for file in self._earlier_outputs():
            if file.name not in (CHECKPOINT, CONFIG):
                _remove(file)
        for name in self._staged:
            if (self.path / name).exists():
                os.replace(self.path / name, self.out / name)
        for file in self._earlier_outputs():  # an earlier run's config or checkpoint that nothing replaced
            if file.name not in self._staged:
                _remove(file)
        self.path.rmdir()
        self.path = self.out

    def _earlier_outputs(self) -> list[Path]:
        return [file for pattern in self.patterns for file in self.out.glob(pattern)]

    def _remove_leftovers(self) -> None:
        for pattern in LEFTOVER_PATTERNS:
            for leftover in self.out.glob(pattern):
                _remove(leftover)

    def _lock(self) -> None:
        try:
            self._fd = lock_folder(self.out)
        except ValueError:
            self._created = False  # the folder belongs to the run holding the lock
            self._release(failed=True)
            raise

    def _release(self, failed: bool) -> None:
        """Unlock; after a failure drop the staging folder, and the output folder if this run created it and it
        is still empty."""
        # stopped while committing: finish
        if failed and self.path != self.out and (self._staged is not None or holds_run(self.path)):
            self.checkpoint_saved()
        if failed and self.path != self.out:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = self.out
        if failed and self._created and self.out.is_dir() and not any(self.out.iterdir()):
            self.out.rmdir()
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
