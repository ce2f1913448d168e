"""Write docs/reference.md: every registered encoding and network, the run config's training keys, its losses and
optimisers, with defaults, valid values and sources, all read from the code (valid values: reference_probe.py,
from the checks the code makes while resolving each component).

    python scripts/reference.py            # rewrite docs/reference.md
    python scripts/reference.py --check    # exit 1 if docs/reference.md is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reference_probe import SEE_CLASS, Component, Facts, gather, key_table, value_text

from inr_enc.config.checks import recording_checks
from inr_enc.encoders import ENCODERS, encoder_spec
from inr_enc.field import tcnn_sections
from inr_enc.field.schema import TRAINING_DEFAULTS, resolve_training
from inr_enc.io import write_text_atomically
from inr_enc.networks import NETWORKS
from inr_enc.optim.losses import LOSSES

DOC = Path(__file__).resolve().parent.parent / "docs" / "reference.md"
# Configs that reach checks the defaults alone do not (or, for Composite and Progressive, that resolve at all)
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "Composite": {"": {"nested": [{"otype": "Frequency", "n_dims_to_encode": 1}, {"otype": "Identity"}]}},
    "Progressive": {"": {"nested": {"otype": "Frequency"}}},
    "ShiftedBasis": {"width given": {"width": 0.05}},
    "Grid": {"n_features given": {"n_features": 32}, "n_grid_features given": {"n_grid_features": 32}},
    "MLP": {"activation Sine": {"activation": "Sine"}},
    "FullyFusedMLP": {"CutlassMLP": {"otype": "CutlassMLP"}},
    "training": {"solver lion": {"solver": "lion"}, "ema_decay given": {"ema_decay": 0.99},
                 "batch_size given": {"batch_size": 4096}},
}
for _grid in ("HashGrid", "DenseGrid", "TiledGrid"):
    VARIANTS[_grid] = VARIANTS["Grid"]
ENCODER_DIMS = (2, 3, 1)  # the input dims each encoding is resolved for (the first one's resolved values are shown)
NETWORK_INPUTS = [({"otype": "Frequency"}, 2, 3), ({"otype": "Frequency", "n_frequencies": 6}, 3, 1),
                  ({"otype": "ShiftedBasis"}, 2, 3), ({"otype": "ShiftedBasis", "n_bases": 64}, 2, 1)]


def by_class(registry: Any) -> dict[type, list[str]]:
    """Each registered class with the otypes it is registered under, sorted by its own otype."""
    names: dict[type, list[str]] = {}
    for otype, cls in registry.items():
        names.setdefault(cls, []).append(otype)
    return dict(sorted(names.items(), key=lambda item: item[0].otype.lower()))


def encoder_component(cls: type) -> Component:
    def describe(d: int | None) -> str:
        return "the input dims" if d is None else f"(for {d} input dims)"

    return Component(cls.otype, cls.defaults, lambda config, d: cls.resolve_config({"otype": cls.otype, **config}, d),
                     (cls.otype,), list(ENCODER_DIMS), describe, VARIANTS.get(cls.otype, {}), shows_input_dims=True)


def network_component(cls: type) -> Component:
    def resolve(config: dict[str, Any], inputs: tuple[dict[str, Any], int, int]) -> dict[str, Any]:
        spec = encoder_spec(inputs[0], inputs[1])
        return cls.resolve_config(config, spec.n_output_dims, inputs[2], spec)

    def describe(inputs: Any) -> str:
        if inputs is None:
            return "the encoding that feeds it"
        return f"(fed by {json.dumps(inputs[0])} of {inputs[1]} input dims, {inputs[2]} outputs)"

    return Component(cls.otype, cls.defaults, resolve, ("network", cls.otype), NETWORK_INPUTS, describe,
                     VARIANTS.get(cls.otype, {}))


def training_component() -> Component:
    return Component("training", TRAINING_DEFAULTS, lambda config, _: resolve_training(config), ("training",), [None],
                     lambda _: "", VARIANTS["training"])


def losses() -> list[tuple[str, list[str], list[str], str]]:
    """(loss, names the training section's ``loss`` reads as it, names tcnn's ``loss`` section reads as it, formula
    and source) for every loss of optim/losses.py's registry, the names found by what the code accepts."""
    names = {*LOSSES, *(otype for loss in LOSSES.values() for otype in loss.tcnn)}
    rows = []
    for loss in LOSSES.values():
        own = [n for n in sorted(names) if (_accepted(resolve_training, {"loss": n}) or {}).get("loss") == loss.name]
        tcnn = [n for n in sorted(names)
                if (_accepted(tcnn_sections.training_from_tcnn, {"otype": n}, None) or {}).get("loss") == loss.name]
        doc = " ".join((loss.function.__doc__ or SEE_CLASS).split()).replace("|", "\\|")  # a table cell
        rows.append((loss.name, own, tcnn, doc))
    return rows


def training_choices(key: str) -> tuple[str, ...]:
    """The choices the training section's ``key`` is checked against."""
    with recording_checks() as checks:
        resolve_training({})
    return next(check.choices for check in checks if check.key == key)


def _accepted(read: Callable[..., Any], *args: Any) -> Any:
    """``read(*args)``, or None where it raises ValueError."""
    try:
        return read(*args)
    except ValueError:
        return None


def optimisers() -> tuple[list[tuple[str, str]], dict[str, tuple[str, dict[str, Any]]]]:
    """The training section's solvers with their sources, and tcnn's ``optimizer`` otypes with their source and
    keys (tcnn's defaults), from field/tcnn_sections.py."""
    solvers = {"adam": "Kingma & Ba 2014; tiny-cuda-nn include/tiny-cuda-nn/optimizers/adam.h (lazy on grid tables)",
               "lion": "Chen et al. 2023 (Symbolic Discovery of Optimization Algorithms)",
               "closed-form": "Zheng et al. 2022 (least squares with a ridge; network Separable only)"}
    choices = training_choices("solver")
    t = tcnn_sections
    sections = {"Adam": ("Kingma & Ba 2014; tiny-cuda-nn optimizers/adam.h", {**t.ADAM, **t.ADAM_AT_DEFAULT}),
                "Lion": ("Chen et al. 2023; tiny-cuda-nn pull request #262", t.LION),
                "ExponentialDecay": ("tiny-cuda-nn optimizers/exponential_decay.h", t.EXPONENTIAL_DECAY),
                "Ema": ("tiny-cuda-nn optimizers/ema.h", t.EMA)}
    if set(sections) != set(t.OPTIMIZERS.values()):
        raise SystemExit(f"reference.py: tcnn_sections.OPTIMIZERS has {sorted(t.OPTIMIZERS.values())}; "
                         f"this script knows {sorted(sections)}")
    return [(s, solvers.get(s, SEE_CLASS)) for s in choices], sections


def tcnn_key_rows(otype: str, keys: dict[str, Any], training: Facts) -> list[str]:
    """One row per key of tcnn's ``otype`` optimizer: the training key it sets (found by giving it another value)
    and that key's valid values."""
    base = tcnn_sections.training_from_tcnn(None, {"otype": otype})
    rows = ["| key | default | sets | valid values |", "|---|---|---|---|"]
    for key, default in keys.items():
        other = (not default) if isinstance(default, bool) else default + (7 if isinstance(default, int) else 0.0123)
        given = _accepted(tcnn_sections.training_from_tcnn, None, {"otype": otype, key: other})
        if given is None:
            sets, valid = "", f"tcnn's default only ({json.dumps(default)})"
        else:
            changed = [k for k in given if given[k] != base.get(k)]
            entries = [f"`{k}`" if given[k] == other else f"`{k}[{given[k].index(other)}]`" for k in changed]
            sets = ", ".join(entries) or "nothing"
            texts = [value_text(training, k, entry=given[k] != other) for k in changed]
            valid = "; ".join(texts) or "accepted, not used here"
        rows.append(f"| `{key}` | `{json.dumps(default)}` | {sets} | {valid} |")
    return rows


INTRO = """# Reference: every encoding, network, training key, loss and optimiser

Generated by `python scripts/reference.py` from the registries and from the checks the code makes; do not edit by
hand (tests/test_reference.py fails when this file is out of date). The layout follows tiny-cuda-nn's
DOCUMENTATION.md: one section per component, its keys and their defaults.

A run config is one mapping: `{"encoding": {...}, "network": {...}, "training": {...}, "seed": 0, "backend":
"auto"}` (`backend`: auto, torch, cpp, triton or tcnn, for every encoder of the field). `encoding` and
`network` pick a class by `otype` (case-insensitive, as in tiny-cuda-nn; unknown otypes and keys are refused with
the valid ones listed); a missing `encoding` is Identity (Separable's default: ShiftedBasis), a missing `network`
is MLP. tiny-cuda-nn's own `loss` and `optimizer` sections are read too, as the training keys they set. Encodings
read coordinates in [0, 1]^d, tiny-cuda-nn's convention.

Valid values are what the check helpers of `inr_enc/config/checks.py` held each key to while the component's
defaults (and the variants named) were resolved. "not every value: see the class": a value inside that range was
refused with the other keys at their defaults (a further condition: a power of two, a key that applies to one
activation only, ...). A bound in backquotes is that key's value; "set by ...": the bound or choices move with
another key or with the input. "see the class": no helper checks the key; the class's docstring says what it takes.
"""


def render() -> str:
    parts = [INTRO]
    kinds = (("Encodings", ENCODERS, encoder_component), ("Networks", NETWORKS, network_component))
    for title, registry, make in kinds:
        parts.append(f"## {title}\n")
        for cls, otypes in by_class(registry).items():
            comp = make(cls)
            also = [o for o in otypes if o != cls.otype]
            lines = [f"### {cls.otype}\n", f"Source: {cls.source}.  "]
            lines += [f"Also registered as: {', '.join(also)}.  "] if also else []
            lines += [f"Resolved with: {label}.  " for label in comp.variants if label] + [""]
            parts.append("\n".join(lines + key_table(comp, gather(comp))) + "\n")
    training = training_component()
    facts = gather(training)
    parts.append("## Training\n\nThe `training` section of a run config.  \n"
                 + "".join(f"Resolved with: {label}.  \n" for label in training.variants) + "\n"
                 + "\n".join(key_table(training, facts)) + "\n")
    parts.append("### Losses (`training.loss`)\n\n| loss | `training.loss` reads | tiny-cuda-nn's `loss` section "
                 "reads (`otype`) | source |\n|---|---|---|---|\n"
                 + "".join(f"| {loss} | {', '.join(own)} | {', '.join(tcnn) or '-'} | {source} |\n"
                           for loss, own, tcnn, source in losses()))
    solvers, sections = optimisers()
    parts.append("### Optimisers (`training.solver`)\n\n| solver | source |\n|---|---|\n"
                 + "".join(f"| {name} | {source} |\n" for name, source in solvers))
    parts.append("### tiny-cuda-nn's `optimizer` section\n\nAdam or Lion innermost, wrapped at most once each by "
                 "ExponentialDecay and Ema (`nested`); each key sets the training key shown.\n")
    for otype, (source, keys) in sections.items():
        parts.append(f"#### {otype}\n\nSource: {source}.\n\n" + "\n".join(tcnn_key_rows(otype, keys, facts)) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/reference.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        print("docs/reference.md is " + ("up to date" if current == text else "out of date: run scripts/reference.py"))
        return 0 if current == text else 1
    write_text_atomically(DOC, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
