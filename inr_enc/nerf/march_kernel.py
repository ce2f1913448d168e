"""The compiled marching step (march_cpu.cpp): each ray walks its steps and keeps the next ones in occupied cells,
for both grids (the box's fixed steps, occupancy.py; cone steps over contracted space, unbounded.py).

Why C++ rather than torch: in torch a window of W steps of A rays is a dozen passes over [A, W] tensors (times,
points, cells, the occupancy lookup, the compaction), whatever the occupancy, and the window's size is a guess: an
unbounded ray crosses hundreds of empty steps (Instant-NGP's cone steps, about 600 from the camera to the far
field) before it meets a surface. Walking each ray in a loop touches each step once, skips empty ones at the cost
of one lookup, and fills a window with occupied steps only, as Instant-NGP's CUDA marching does (its
``generate_training_samples_nerf`` walks each ray the same way). The torch windows stay the reference (tests
compare the two step for step) and the path on other devices or where nothing can be built.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch

from ..ops.cpp_extension import build_extension

SOURCES = (str(Path(__file__).with_name("march_cpu.cpp")),)
KINDS = {"box": 0, "linf": 1, "l2": 2}  # march_cpu.cpp's kinds of steps and cells


def marching_kernel(device: torch.device, dtype: torch.dtype) -> ModuleType | None:
    """The compiled kernel for rays of ``dtype`` on ``device``, or None (then the grids march in torch): float32
    rays on CPU only."""
    if device.type != "cpu" or dtype != torch.float32:
        return None
    return build_extension("CPU marching kernel", SOURCES)


def occupied_window(kernel: ModuleType, origins: torch.Tensor, directions: torch.Tensor, near: torch.Tensor,
                    far: torch.Tensor, offset: torch.Tensor, first: torch.Tensor, count: int, grid: dict
                    ) -> tuple[torch.Tensor, ...]:
    """Rays [A] (float32 origins, directions [A, 3]; near, far, offset [A]; first [A] int64, the next step of
    each) -> each ray's next ``count`` steps in occupied cells, packed: (rows [M] into the A rays, ascending and in
    order of t within a row; starts [M]; ends [M]; points [M, 3]; next [A] int64, the step after the last one
    walked; more [A] bool, whether steps are left). ``grid``: march_cpu.cpp's description (bounds, step,
    occupied, resolution, kind, a, b)."""
    counts, starts, ends, points, following, more = kernel.occupied_steps(
        origins.contiguous(), directions.contiguous(), near.float().contiguous(), far.float().contiguous(),
        offset.float().contiguous(), first.contiguous(), grid["bounds"], float(grid["step"]),
        grid["occupied"].contiguous(), grid["resolution"], KINDS[grid["kind"]], grid["a"], grid["b"], count)
    rows, j = (torch.arange(count, device=counts.device) < counts[:, None]).nonzero(as_tuple=True)
    return rows, starts[rows, j], ends[rows, j], points[rows, j], following, more
