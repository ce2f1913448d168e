"""Training pieces shared by inr-fit (fitting/) and the ns-train plugin (nerfstudio/): the optimisers
:class:`GridAdam` (torch.optim.Adam with tiny-cuda-nn's lazy update for grid tables; its kernel lazy_adam.py) and
:class:`Lion`; the losses (losses.py, one registry); the learning-rate schedules (schedule.py); tcnn's weight moving
average (ema.py); what a resolved training section builds (setup.py)."""

from .grid_adam import GridAdam, enable_sparse_gradients, grid_tables
from .lion import Lion

__all__ = ["GridAdam", "Lion", "enable_sparse_gradients", "grid_tables"]
