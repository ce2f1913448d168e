"""Learning-rate schedules of a resolved training section (field/schema.py ``SCHEDULES``), shared by inr-fit's
fit loop and the ns-train plugin's tcnn ExponentialDecay scheduler."""

from __future__ import annotations

import math
from typing import Any, Callable


def lr_factor(training: dict[str, Any]) -> Callable[[int], float]:
    """The learning-rate schedule: steps taken -> factor of the initial rate."""
    kind, steps = training["schedule"], training["steps"]
    if kind == "cosine":  # from lr down to lr / 100 at the last step
        return lambda step: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(step, steps) / max(steps, 1)))
    if kind == "exponential":  # tcnn's ExponentialDecay: x decay_base at start, start + interval, ... up to end
        base, start, interval, end = (training[k] for k in ("decay_base", "decay_start", "decay_interval", "decay_end"))
        return lambda step: (base ** ((min(step, end) - start) // interval + 1)
                             if start <= step and start <= end else 1.0)
    return lambda step: 1.0
