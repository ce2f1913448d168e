"""Optimisers: :class:`GridAdam` (torch.optim.Adam with tiny-cuda-nn's lazy update for grid tables) and its
lazy-Adam kernel."""

from .grid_adam import GridAdam, enable_sparse_gradients, grid_tables

__all__ = ["GridAdam", "enable_sparse_gradients", "grid_tables"]
