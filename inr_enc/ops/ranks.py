"""torch.distributed facts the library adapts to (DistributedDataParallel training, e.g. nerfstudio's
``--machine.num-devices``): whether several ranks run, and the per-element maximum over them."""

from __future__ import annotations

import torch
from torch import distributed


def several_ranks() -> bool:
    """Whether a torch.distributed process group of more than one rank is running."""
    return distributed.is_available() and distributed.is_initialized() and distributed.get_world_size() > 1


def max_over_ranks(values: torch.Tensor) -> None:
    """In place: the elementwise maximum over the ranks when :func:`several_ranks`; else nothing."""
    if several_ranks():
        distributed.all_reduce(values, op=distributed.ReduceOp.MAX)


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """The mean of ``value`` over the ranks when :func:`several_ranks` (a new tensor; every rank must call this at
    the same point), else ``value``."""
    if not several_ranks():
        return value
    total = value.detach().clone()
    distributed.all_reduce(total)
    return total / distributed.get_world_size()
