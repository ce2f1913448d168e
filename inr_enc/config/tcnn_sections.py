"""tiny-cuda-nn's ``loss`` and ``optimizer`` config sections (as Instant-NGP's configs use them too), read as the
``training`` keys they mean.

Defaults and meanings from tcnn (DOCUMENTATION.md; include/tiny-cuda-nn/losses/*.h, optimizers/adam.h,
exponential_decay.h, ema.h) and Instant-NGP (include/neural-graphics-primitives/nerf_device.cuh: Huber, also
named SmoothL1). Optimizers nest: ``{"otype": "Ema", "decay": 0.95, "nested": {"otype": "ExponentialDecay", ...,
"nested": {"otype": "Adam", ...}}}``; each wrapper appears at most once, Adam innermost.
"""

from __future__ import annotations

from typing import Any

from .checks import check_keys, check_mapping, config_error

LOSSES = {"L1": "L1", "L2": "MSE", "RelativeL1": "RelativeL1", "RelativeL2": "RelativeL2", "MAPE": "MAPE",
          "SMAPE": "SMAPE", "Huber": "Huber", "SmoothL1": "Huber"}  # tcnn/Instant-NGP name -> training.loss
ADAM = {"learning_rate": 1e-3, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "l2_reg": 1e-8,
        "relative_decay": 0.0, "absolute_decay": 0.0, "adabound": False}
EXPONENTIAL_DECAY = {"decay_base": 0.1, "decay_start": 10000, "decay_interval": 10000, "decay_end": 10000000}
EMA = {"decay": 0.99}
UNSUPPORTED_AT = {"relative_decay": 0.0, "absolute_decay": 0.0, "adabound": False}  # Adam keys only at tcnn's default


def training_from_tcnn(loss: Any, optimizer: Any) -> dict[str, Any]:
    """The training keys that tcnn's ``loss`` and ``optimizer`` sections set (either may be None); ValueError
    naming an otype or key that has no counterpart here."""
    training: dict[str, Any] = {}
    if loss is not None:
        loss = check_mapping("loss", "loss", loss, allow_none=False)
        check_keys("loss", loss, {"otype": None})
        if loss.get("otype") not in LOSSES:
            raise config_error("loss", f"otype {loss.get('otype')!r} is not supported; supported: {', '.join(LOSSES)}")
        training["loss"] = LOSSES[loss["otype"]]
    seen: list[str] = []
    while optimizer is not None:
        optimizer = check_mapping("optimizer", "optimizer", optimizer, allow_none=False)
        otype = optimizer.get("otype")
        if otype in seen or otype not in ("Ema", "ExponentialDecay", "Adam"):
            raise config_error("optimizer", f"otype {otype!r} is not supported here; supported: Adam, wrapped at most "
                                            "once each by ExponentialDecay and Ema")
        seen.append(otype)
        keys = {"Ema": EMA, "ExponentialDecay": EXPONENTIAL_DECAY, "Adam": ADAM}[otype]
        check_keys(f"optimizer {otype}", optimizer, {"otype": None, **keys, **({} if otype == "Adam" else {"nested": None})})
        settings = {**keys, **{k: v for k, v in optimizer.items() if k in keys}}
        if otype == "Ema":
            training["ema_decay"] = settings["decay"]
        elif otype == "ExponentialDecay":
            training["schedule"] = "exponential"
            training.update({key: settings[key] for key in EXPONENTIAL_DECAY})
        else:
            for key, default in UNSUPPORTED_AT.items():
                if settings[key] != default:
                    raise config_error("optimizer Adam", f"'{key}' is supported at tcnn's default {default!r} only, "
                                                         f"got {settings[key]!r}")
            training.update({"lr": settings["learning_rate"], "betas": [settings["beta1"], settings["beta2"]],
                             "eps": settings["epsilon"], "l2_reg": settings["l2_reg"]})
        optimizer = optimizer.get("nested") if otype != "Adam" else None
        if optimizer is None and otype != "Adam":
            raise config_error(f"optimizer {otype}", "'nested' must hold the optimizer it wraps (Adam at the end)")
    return training
