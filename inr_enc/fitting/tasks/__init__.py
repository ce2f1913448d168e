"""The task registry: each kind of signal inr-fit fits is one class in a module of this folder (fitting/tasks/),
decorated with ``@register_task(...)`` where it is defined. What the decorator declares is all the rest of inr-fit
reads of a task: its sub-command (``inr-fit image FILE``, also the saved run's ``task.kind``), its folder
sub-command (``inr-fit images DIR``), a folder's file suffixes, the unit of its rate (bits per pixel), its default
config and the files its ``finish`` writes, and a sample signal shipped with the package, if it has one.

Torch-free: ``tasks()`` imports every module of this folder, and a task module loads torch and its signal readers
inside its methods only, so that inr-fit builds its command line (``--help`` included) before torch loads.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

if TYPE_CHECKING:
    import torch

    from ..problem import Problem

T = TypeVar("T", bound=type)


class Task(Protocol):
    """What the fit loop and the outputs read of a task, built as ``cls(path, train_split)`` (header only)."""

    n_input_dims: int  # coordinate dims (image 2, audio 1)
    n_output_dims: int  # values per sample (channels)
    coordinate_shape: list[int]  # samples per coordinate dim ([width, height], [n_samples])
    n_samples: int

    def describe(self) -> dict[str, Any]:
        """The task section of the run: ``kind``, ``path`` and the signal's facts (size, channels, ...)."""

    def problem(self) -> Problem:
        """Training and evaluation points (decodes the signal)."""

    def finish(self, model: Callable[[torch.Tensor], torch.Tensor], out: Path, chunk: int, device: torch.device,
               name: str = ..., comparison: bool = True) -> dict[str, Any]:
        """Write the reconstruction (and COMPARISON_FILE) into ``out``; its metrics."""

    def score(self, model: Callable[[torch.Tensor], torch.Tensor], chunk: int, device: torch.device) -> float:
        """PSNR of ``model`` on the evaluation samples."""


@dataclass(frozen=True)
class TaskInfo:
    """What a task declares (see the module's docstring); ``cls(path, train_split)`` reads the signal's header."""

    kind: str  # "image": inr-fit image FILE, and the saved run's task.kind
    folder: str  # "images": inr-fit images DIR|GLOB, every file of the kind
    suffixes: tuple[str, ...]  # a folder's files of this kind, lower case (".png", ...)
    unit: str  # what a sample is ("pixel"): metrics' bits_per_<unit>
    config: str  # the default --config (a name in inr_enc/configs/)
    outputs: tuple[str, ...]  # glob patterns of the files its finish writes (the reconstructions)
    sample: Path | None  # a signal shipped with the package: the path when none is given (None: a path is needed)
    cls: type


_TASKS: dict[str, TaskInfo] = {}


def register_task(kind: str, folder: str, suffixes: tuple[str, ...], unit: str, config: str,
                  outputs: tuple[str, ...], sample: Path | None = None) -> Callable[[T], T]:
    """Class decorator: register the task ``kind`` (see :class:`TaskInfo` for the arguments)."""
    def add(cls: T) -> T:
        if kind in _TASKS or any(folder == info.folder for info in _TASKS.values()):
            raise AssertionError(f"task {kind!r} or {folder!r} registered twice")
        _TASKS[kind] = TaskInfo(kind, folder, tuple(suffix.lower() for suffix in suffixes), unit, config,
                                tuple(outputs), sample, cls)
        return cls

    return add


def tasks() -> dict[str, TaskInfo]:
    """kind -> :class:`TaskInfo` of every task, sorted by kind."""
    _import_task_modules()
    return dict(sorted(_TASKS.items()))


@functools.cache
def _import_task_modules() -> None:
    """Import every module of this folder (each registers its tasks), as the encoders' package does."""
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}")


def task_info(kind: str) -> TaskInfo:
    """The task ``kind``; ValueError naming the tasks."""
    found = tasks()
    if kind not in found:
        raise ValueError(f"unknown task {kind!r}; tasks: {', '.join(found)}")
    return found[kind]


def folder_tasks() -> dict[str, TaskInfo]:
    """Folder sub-command ("images") -> its task."""
    return {info.folder: info for info in tasks().values()}
