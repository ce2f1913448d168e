"""Adam with tiny-cuda-nn's lazy update for grid tables.

A batch reads only some rows of a hash grid's table. tiny-cuda-nn's Adam (include/tiny-cuda-nn/optimizers/
adam.h) skips every non-matrix parameter whose gradient is exactly 0 and counts steps per parameter for the
bias correction, so an unread row keeps its value, its moments and its step count. :class:`GridAdam` does the
same for the parameter groups marked ``lazy`` (the tables :func:`grid_tables` finds) and is
``torch.optim.Adam`` for the rest. Per element, an update is torch.optim.Adam's (lerp of the first moment,
eps added to the bias-corrected sqrt of the second) with t = that element's own step count; where every
element has a nonzero gradient at every step it equals torch.optim.Adam.

With :func:`enable_sparse_gradients` (which :meth:`GridAdam.for_model` calls), grids on the fused CPU kernel
hand their tables a sparse gradient of the rows the batch read when it makes few lookups for the table's size
(ops/grid/cpu_kernel.py: SPARSE_BELOW_READS_PER_ROW), so such a step costs in proportion to the batch, not to the
table. Dense gradients work too (other devices and paths, larger batches); then every element's gradient is
read once, as in tcnn. Sparse table gradients do not
suit other optimizers or ``torch.nn.utils.clip_grad_norm_``: use ``enable_sparse_gradients(model, False)``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .lazy_adam import lazy_adam_step


def grid_tables(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The grid tables of ``model``: parameters its encoders read by row lookups (``table_parameters()``)."""
    tables: list[torch.nn.Parameter] = []
    for module in model.modules():
        tables += [p for p in getattr(module, "table_parameters", lambda: [])() if all(p is not t for t in tables)]
    return tables


def enable_sparse_gradients(model: torch.nn.Module, enabled: bool = True) -> None:
    """Let every grid of ``model`` give its table sparse gradients where its kernel supports them (CPU)."""
    for module in model.modules():
        if hasattr(module, "table_parameters"):
            module.sparse_gradients = enabled


class GridAdam(torch.optim.Adam):
    """``torch.optim.Adam`` whose parameter groups with ``"lazy": True`` get tiny-cuda-nn's lazy update.

    Lazy groups take the ``lr``, ``betas`` and ``eps`` of Adam (no weight decay, amsgrad, maximize); their
    state per parameter is ``exp_avg``, ``exp_avg_sq`` and ``step`` (int32, one count per element), saved by
    ``state_dict`` like Adam's. Use :meth:`for_model` for a field: its grid tables lazy, the rest Adam.
    """

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        param_group.setdefault("lazy", False)
        options = {**self.defaults, **param_group}
        if options["lazy"] and (options["weight_decay"] or options["amsgrad"] or options["maximize"]):
            raise ValueError("GridAdam: lazy groups take no weight_decay, amsgrad or maximize")
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # a torch.optim.Adam state has no "lazy"
            group.setdefault("lazy", False)

    @classmethod
    def for_model(cls, model: torch.nn.Module, lr: float = 1e-3, lazy: bool = True, l2_reg: float = 0.0,
                  **kwargs: Any) -> GridAdam:
        """A GridAdam over ``model``'s parameters, lazy for its grid tables (see :func:`grid_tables`), which
        then get sparse gradients where their kernel has them; ``lazy=False``: torch.optim.Adam throughout.
        ``l2_reg``: Adam's (coupled) weight decay on ``model.matrix_parameters()`` alone, in a group of their own
        (tcnn's Adam adds l2_reg * w to the gradients of its weight matrices)."""
        enable_sparse_gradients(model, lazy)
        tables = grid_tables(model) if lazy else []
        matrices = model.matrix_parameters() if l2_reg else []
        rest = [p for p in model.parameters() if all(p is not q for q in tables + matrices)]
        groups = ({"params": rest}, {"params": tables, "lazy": True}, {"params": matrices, "weight_decay": l2_reg})
        return cls([group for group in groups if group["params"]], lr=lr, **kwargs)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        held = []  # lazy groups' gradients, kept from Adam's step
        for group in self.param_groups:
            if group["lazy"]:
                for param in group["params"]:
                    if param.grad is not None:
                        self._lazy_step(param, param.grad, group)
                        held.append((param, param.grad))
                        param.grad = None
        adam_step = torch.optim.Adam.step  # unwrapped: the step hooks already ran for GridAdam.step
        getattr(adam_step, "__wrapped__", adam_step)(self)
        for param, grad in held:
            param.grad = grad
        return loss

    def _lazy_step(self, param: torch.Tensor, grad: torch.Tensor, group: dict[str, Any]) -> None:
        state = self.state[param]
        if not state:  # "step" as Adam names it (its __setstate__ reads it), one count per element
            state.update(exp_avg=torch.zeros(param.shape, dtype=param.dtype, device=param.device),
                         exp_avg_sq=torch.zeros(param.shape, dtype=param.dtype, device=param.device),
                         step=torch.zeros(param.shape, dtype=torch.int32, device=param.device))
        state["step"] = state["step"].to(param.device)  # Adam's load_state_dict leaves "step" where it was saved
        if grad.is_sparse and (param.dim() != 1 or grad.dense_dim()):  # the updates index flat elements
            grad = grad.to_dense()
        work = param if param.is_contiguous() else param.contiguous()
        args = (work, state, grad, group["lr"], tuple(group["betas"]), group["eps"])
        lazy_adam_step(*args)
        if work is not param:
            param.copy_(work)
