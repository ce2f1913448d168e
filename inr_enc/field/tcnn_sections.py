"""tiny-cuda-nn's ``loss`` and ``optimizer`` config sections (as Instant-NGP's configs use them too), read as the
``training`` keys they mean. The loss otypes are optim/losses.py's (``TCNN_LOSSES``); this module imports optim/,
so it sits at the schema's layer (tests/test_structure.py).

Defaults and meanings from tcnn (DOCUMENTATION.md; include/tiny-cuda-nn/losses/*.h, optimizers/adam.h,
exponential_decay.h, ema.h) and Instant-NGP (include/neural-graphics-primitives/nerf_device.cuh: Huber, also
named SmoothL1). Optimizers nest: ``{"otype": "Ema", "decay": 0.95, "nested": {"otype": "ExponentialDecay", ...,
"nested": {"otype": "Adam", ...}}}``; each wrapper appears at most once, Adam (or Lion) innermost.
"""

from __future__ import annotations

from typing import Any

from ..config.checks import check_keys, check_mapping, config_error, without_unread_inherited
from ..optim.losses import TCNN_LOSSES

ADAM = {"learning_rate": 1e-3, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "l2_reg": 1e-8}
# Adam keys tcnn reads whose other values inr_enc does not compute: accepted at tcnn's default only (adam.h members)
ADAM_AT_DEFAULT = {"relative_decay": 0.0, "absolute_decay": 0.0, "adabound": False, "clipping_magnitude": 0.0,
                   "gradient_clipping_magnitude": 0.0, "non_matrix_learning_rate_factor": 1.0, "non_matrix_l2_reg": 0.0,
                   "optimize_matrix_params": True, "optimize_non_matrix_params": True,
                   "skip_zero_grad_non_matrix_params": True}  # (skipping zero gradients: GridAdam's lazy tables)
EXPONENTIAL_DECAY = {"decay_base": 0.1, "decay_start": 10000, "decay_interval": 10000, "decay_end": 10000000}
EMA = {"decay": 0.99, "full_precision": False}  # the average is float32 here either way
# Lion: tcnn pull request #262 (not merged at 6ee3546); missing keys take the Lion paper's defaults
LION = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0}
OPTIMIZERS = {"adam": "Adam", "lion": "Lion", "exponentialdecay": "ExponentialDecay", "ema": "Ema"}  # case ignored
INNERMOST = ("Adam", "Lion")


def _otype(section: str, config: dict[str, Any], names: dict[str, str], default: str) -> str:
    """The canonical otype of a section (tcnn's default where it has none; case ignored, as tcnn's and Instant-NGP's
    lookups ignore it), or ValueError naming the supported ones."""
    given = config.get("otype", default)
    if not isinstance(given, str) or given.casefold() not in names:
        raise config_error(section, f"otype {given!r} is not supported here; supported: {', '.join(names.values())}"
                                    + (" (Adam or Lion, wrapped at most once each by ExponentialDecay and Ema)"
                                       if section == "optimizer" else ""))
    return names[given.casefold()]


def training_from_tcnn(loss: Any, optimizer: Any) -> dict[str, Any]:
    """The training keys that tcnn's ``loss`` and ``optimizer`` sections set (either may be None); ValueError
    naming an otype or key that has no counterpart here. A section without otype is tcnn's default (RelativeL2,
    Adam), as is a wrapper without ``nested`` (Adam)."""
    training: dict[str, Any] = {}
    if loss is not None:
        loss = without_unread_inherited(check_mapping("loss", "loss", loss, allow_none=False), {"otype"})
        check_keys("loss", loss, {"otype": None})
        training["loss"] = TCNN_LOSSES[_otype("loss", loss, {name.casefold(): name for name in TCNN_LOSSES},
                                              "RelativeL2")]
    seen: list[str] = []
    while optimizer is not None:
        optimizer = check_mapping("optimizer", "optimizer", optimizer, allow_none=False)
        otype = _otype("optimizer", optimizer, OPTIMIZERS, "Adam")
        if otype in seen:
            raise config_error("optimizer", f"{otype} appears twice in the chain; each wrapper at most once")
        seen.append(otype)
        keys = {"Ema": EMA, "ExponentialDecay": EXPONENTIAL_DECAY, "Adam": {**ADAM, **ADAM_AT_DEFAULT},
                "Lion": LION}[otype]
        valid = {"otype": None, **keys, **({} if otype in INNERMOST else {"nested": None})}
        optimizer = without_unread_inherited(optimizer, valid)
        check_keys(f"optimizer {otype}", optimizer, valid)
        settings = {**keys, **{k: v for k, v in optimizer.items() if k in keys}}
        if otype == "Ema":
            training["ema_decay"] = settings["decay"]
        elif otype == "ExponentialDecay":
            training["schedule"] = "exponential"
            training.update({key: settings[key] for key in EXPONENTIAL_DECAY})
        elif otype == "Lion":
            training.update({"solver": "lion", "lr": settings["learning_rate"],
                             "weight_decay": settings["weight_decay"],
                             "betas": [settings["beta1"], settings["beta2"]]})
        else:
            for key, default in ADAM_AT_DEFAULT.items():
                if settings[key] != default:
                    raise config_error("optimizer Adam", f"'{key}' is supported at tcnn's default {default!r} only, "
                                                         f"got {settings[key]!r}")
            training.update({"lr": settings["learning_rate"], "betas": [settings["beta1"], settings["beta2"]],
                             "eps": settings["epsilon"], "l2_reg": settings["l2_reg"]})
        optimizer = (optimizer.get("nested") or {"otype": "Adam"}) if otype not in INNERMOST else None
    return training
