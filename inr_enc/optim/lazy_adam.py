"""tiny-cuda-nn's lazy Adam update of one flat parameter (include/tiny-cuda-nn/optimizers/adam.h): elements with a
zero gradient keep their value, moments and step count; each element counts its own steps.

On CPU the update runs in a small C++ kernel (lazy_adam.cpp, built at first use); elsewhere, or where it cannot
be built, in torch ops. Both take a dense gradient or a flat sparse one (the grid kernel's, ops/grid/cpu_kernel.py).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch

from ..ops.cpp_extension import build_extension
from ..ops.precision import wide_dtype

SOURCES = (str(Path(__file__).with_name("lazy_adam.cpp")),)


def lazy_adam_extension() -> ModuleType | None:
    """The compiled update, or None (after a one-line notice on stderr) when it cannot be built here."""
    return build_extension("lazy Adam kernel", SOURCES)


def _lazy_update_torch(param: torch.Tensor, state: dict[str, torch.Tensor], grad: torch.Tensor, lr: float,
                       betas: tuple[float, float], eps: float) -> None:
    """The lazy update with torch ops (devices without the CPU kernel)."""
    grad = grad.coalesce() if grad.is_sparse else grad
    index, values = (grad.indices()[0], grad.values()) if grad.is_sparse else (None, grad.reshape(-1))
    keep = values != 0
    index = keep.nonzero()[:, 0] if index is None else index[keep]
    values = values[keep]
    flat = {name: tensor.view(-1) for name, tensor in state.items()}
    steps = flat["step"][index] + 1
    exp_avg = flat["exp_avg"][index].lerp_(values, 1 - betas[0])
    exp_avg_sq = flat["exp_avg_sq"][index].mul_(betas[1]).addcmul_(values, values, value=1 - betas[1])
    wide = steps.to(wide_dtype(param.device))
    step_size = (lr / (1 - betas[0] ** wide)).to(param.dtype)
    correction2_sqrt = (1 - betas[1] ** wide).sqrt().to(param.dtype)
    param.view(-1).index_add_(0, index, -step_size * exp_avg / (exp_avg_sq.sqrt() / correction2_sqrt + eps))
    flat["step"][index], flat["exp_avg"][index], flat["exp_avg_sq"][index] = steps, exp_avg, exp_avg_sq


def lazy_adam_step(param: torch.Tensor, state: dict[str, torch.Tensor], grad: torch.Tensor, lr: float,
                   betas: tuple[float, float], eps: float) -> None:
    """In place: the lazy update of the flat ``param`` with a dense or a flat sparse ``grad``; ``state`` holds
    ``exp_avg``, ``exp_avg_sq`` (like param) and ``step`` (int32, one count per element). On the C++ kernel a
    sparse gradient is coalesced (a sort) only where its indices repeat: the grid kernel's own never do, while
    gradients accumulated over several backwards do."""
    extension = lazy_adam_extension() if param.device.type == "cpu" else None
    if extension is None:
        _lazy_update_torch(param, state, grad, lr, betas, eps)
        return

    def apply(grad: torch.Tensor) -> bool:
        indices, values = ((grad._indices()[0], grad._values()) if grad.is_sparse
                           else (grad.new_empty(0, dtype=torch.int64), grad))
        return extension.lazy_adam(param, state["exp_avg"], state["exp_avg_sq"], state["step"],
                                   indices.contiguous(), values.contiguous(), lr, betas[0], betas[1], eps)

    if not apply(grad) and not apply(grad.coalesce()):
        raise AssertionError("lazy_adam rejected a coalesced gradient")
