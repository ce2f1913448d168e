"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2), the optimizer of
tiny-cuda-nn's Lion config (tcnn pull request #262, not merged at tcnn 6ee3546).

Per element, with gradient g and momentum m (zero at first):
    c = beta1 m + (1 - beta1) g;  w <- w - lr (sign(c) + weight_decay w);  m <- beta2 m + (1 - beta2) g.
torch ships no Lion (2.14), and its update is these three lines, hence this class.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch


class Lion(torch.optim.Optimizer):
    """``Lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0)`` (the paper's defaults); dense gradients only
    (grid tables: ``optim.enable_sparse_gradients(model, False)``). Parameters without a gradient are skipped."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0) -> None:
        if not lr > 0 or not all(0 <= b < 1 for b in betas) or not weight_decay >= 0:
            raise ValueError(f"Lion: need lr > 0, betas in [0, 1) and weight_decay >= 0, got {lr}, {betas}, "
                             f"{weight_decay}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None if closure is None else torch.enable_grad()(closure)()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise ValueError("Lion needs dense gradients: optim.enable_sparse_gradients(model, False)")
                momentum = self.state[param].setdefault("exp_avg", torch.zeros_like(param))
                direction = (momentum * beta1).add_(param.grad, alpha=1 - beta1).sign_()
                param.mul_(1 - group["lr"] * group["weight_decay"]).sub_(direction, alpha=group["lr"])
                momentum.mul_(beta2).add_(param.grad, alpha=1 - beta2)
        return loss
