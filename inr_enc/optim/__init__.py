"""Optimisers: :class:`GridAdam` (torch.optim.Adam with tiny-cuda-nn's lazy update for grid tables) and its
lazy-Adam kernel; :class:`Lion`."""

from .grid_adam import GridAdam, enable_sparse_gradients, grid_tables
from .lion import Lion

__all__ = ["GridAdam", "Lion", "enable_sparse_gradients", "grid_tables"]
