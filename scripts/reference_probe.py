"""What a component's keys accept, read from the checks its code makes (for scripts/reference.py).

A component's config is resolved under ``inr_enc.config.checks.recording_checks``, which collects the bounds or
choices the check helpers held each key to. Its defaults and a few variants reach the keys checked only in some
branches; each key is then probed (its bounds, numbers between, each choice) to find values its range does not tell
(a further condition: NOT_EVERY) and bounds set by another key or by the context ("set by ...").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inr_enc.config.checks import Check, recording_checks

NOT_EVERY = "not every value: see the class"
SEE_CLASS = "see the class"
INPUT_DIMS = "n_input_dims"


@dataclass
class Component:
    """Something configured by a section of keys: ``resolve(config, context)`` returns the canonical config or
    raises ValueError; ``sections``: the names its own checks report (nested components' are left out);
    ``contexts``: what it is resolved in (input dims, the encoding feeding a network), the first one shown;
    ``variants``: label -> keys that reach more checks ("": the base, for components whose defaults need one)."""

    name: str
    defaults: dict[str, Any]
    resolve: Callable[[dict[str, Any], Any], dict[str, Any]]
    sections: tuple[str, ...]
    contexts: list[Any]
    describe_context: Callable[[Any], str]  # None -> what the contexts vary ("the input dims")
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    shows_input_dims: bool = False  # an encoding: its n_input_dims check is a row


@dataclass
class Facts:
    checks: dict[str, dict[str, Check]] = field(default_factory=dict)  # key -> variant label -> check
    named: dict[str, dict[str, str]] = field(default_factory=dict)  # key -> "low"/"high" -> what sets it
    notes: dict[str, set[str]] = field(default_factory=dict)
    resolved: dict[str, Any] = field(default_factory=dict)  # the base resolved in the first context


def record(comp: Component, config: dict[str, Any], context: Any) -> tuple[dict[str, Check], dict[str, Any]] | None:
    """The first check of each of ``comp``'s own keys while resolving ``config`` in ``context``, and the resolved
    config; None when it is refused."""
    with recording_checks() as checks:
        try:
            resolved = comp.resolve(config, context)
        except ValueError:
            return None
    keys = {*comp.defaults, *([INPUT_DIMS] if comp.shows_input_dims else [])} - {"otype"}
    own: dict[str, Check] = {}
    for check in checks:
        if check.section in comp.sections and check.key in keys:
            own.setdefault(check.key, check)
    return own, resolved


def probes(check: Check, value: Any) -> list[Any]:
    """Values to try for a key held to ``check`` whose resolved value is ``value``: each choice, both booleans, or
    the bounds and a few numbers between; for a list of numbers, the list with its first entry set to each of them."""
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return [[v, *value[1:]] for v in probes(check, value[0])]
    if check.kind == "bool":
        return [False, True]
    if check.kind == "choice":
        return list(check.choices)
    if isinstance(value, (list, dict)):
        return []
    if check.kind == "int":
        low, high = int(check.low), int(check.high) if check.high is not None else 2**31 - 1
        near = {value - 1, value + 1} if isinstance(value, int) else set()
        return sorted(v for v in {low, low + 1, low + 2, low + 3, high, *near} if low <= v <= high)
    low = check.low if check.low is not None else -1e30
    high = check.high if check.high is not None else 1e30
    start = low if check.low_inclusive else low + 1e-6 * max(1.0, abs(low))
    end = high if check.high_inclusive else high - 1e-6 * max(1.0, abs(high))
    near = {value / 2, value * 2} if isinstance(value, float) and value else set()
    return sorted(v for v in {start, (start + end) / 2, end, *near} if start <= v <= end)


def gather(comp: Component) -> Facts:
    """Every check of ``comp``'s keys over its variants and contexts, with what probing them found."""
    facts = Facts()
    base = comp.variants.get("", {})
    for label, overrides in [("", base), *((k, {**base, **v}) for k, v in comp.variants.items() if k)]:
        runs = [record(comp, overrides, context) for context in comp.contexts]
        good = [(context, run) for context, run in zip(comp.contexts, runs) if run is not None]
        if not good:
            if label:
                continue
            raise SystemExit(f"reference: {comp.name}'s defaults resolve in no context; give it a base in VARIANTS")
        context, (own, resolved) = good[0]
        if not label:
            facts.resolved = resolved
            if len(good) < len(runs) and INPUT_DIMS in own:
                facts.notes.setdefault(INPUT_DIMS, set()).add(NOT_EVERY)
        for key, check in own.items():
            facts.checks.setdefault(key, {})[label] = check
        for _, (other, _) in good[1:]:
            for key in own.keys() & other.keys():
                _moved(facts, key, own[key], other[key], f"set by {comp.describe_context(None)}")
        for key, check in own.items():
            if key != INPUT_DIMS:
                _probe(comp, facts, overrides, context, own, resolved, key, check)
    return facts


def _moved(facts: Facts, key: str, before: Check, after: Check, by: str, name: str | None = None, value: Any = None,
           was: Any = None) -> None:
    """Note how ``key``'s check moved from ``before`` to ``after`` when something else changed (``by``, in words):
    a bound that took key ``name``'s new ``value`` (and had its old one, ``was``) reads as that key."""
    for bound in ("low", "high"):
        old, new = getattr(before, bound), getattr(after, bound)
        if old != new:
            named = name is not None and new == value and old == was
            facts.named.setdefault(key, {})[bound] = f"`{name}`" if named else by
    if before.choices != after.choices or before.kind != after.kind:
        facts.notes.setdefault(key, set()).add(by)


def _probe(comp: Component, facts: Facts, config: dict[str, Any], context: Any, own: dict[str, Check],
           resolved: dict[str, Any], key: str, check: Check) -> None:
    """Resolve ``config`` with ``key`` set to each of its probe values: note a refused one, and each other key's
    check that moves with it."""
    for value in probes(check, resolved.get(key)):
        run = record(comp, {**config, key: value}, context)
        if run is None:
            facts.notes.setdefault(key, set()).add(NOT_EVERY)
            continue
        for other, moved in run[0].items():
            before = own.get(other)
            if other != key and before is not None and before != moved:
                _moved(facts, other, before, moved, f"set by '{key}'", key, value, resolved.get(key))


def number(value: float | None, integer: bool) -> str:
    if value is None:
        return ""
    if integer:
        value = int(value)
        for power in range(20, 65):
            if value in (2**power, 2**power - 1):
                return f"2^{power}" + (" - 1" if value != 2**power else "")
        return str(value)
    return f"{value:g}"


def valid_text(check: Check, named: dict[str, str]) -> str:
    """What ``check`` allows, in words; a bound set by something else reads as what sets it."""
    if check.kind == "bool":
        return "true or false"
    if check.kind == "choice":
        return "one of " + ", ".join(f"`{c}`" for c in check.choices) + " (any case)"
    integer = check.kind == "int"
    low = named.get("low", number(check.low, integer))
    high = named.get("high", number(check.high, integer))
    noun = "integer" if integer else "number"
    if check.high is None:
        limit = "int64" if integer else "float32"
        return f"{noun} {'>=' if check.low_inclusive else '>'} {low} (at most {limit}'s maximum)"
    return f"{noun} in {'[' if check.low_inclusive else '('}{low}, {high}{']' if check.high_inclusive else ')'}"


def value_text(facts: Facts, key: str, entry: bool = False) -> str:
    """``key``'s valid values over the variants (each labelled where they differ), and the notes; for a list-valued
    key, its entries' (``entry``: the entries' alone)."""
    by_label = facts.checks.get(key)
    if not by_label:
        return SEE_CLASS
    texts = {label: valid_text(check, facts.named.get(key, {})) for label, check in by_label.items()}
    text = next(iter(texts.values())) if len(set(texts.values())) == 1 else "; ".join(
        f"{label or 'by default'}: {t}" for label, t in texts.items())
    if isinstance(facts.resolved.get(key), list) and not entry:
        text = f"a list, each entry {text}; its length: {SEE_CLASS}"
    return "; ".join([text, *sorted(facts.notes.get(key, ()))])


def key_table(comp: Component, facts: Facts) -> list[str]:
    """The markdown table of ``comp``'s keys: default (and what a null default resolves to), valid values."""
    keys = ([INPUT_DIMS] if INPUT_DIMS in facts.checks else []) + [k for k in comp.defaults if k != "otype"]
    if not keys:
        return ["No keys besides `otype`."]
    rows = ["| key | default | valid values |", "|---|---|---|"]
    base = comp.variants.get("", {})
    for key in keys:
        default = "(the input's)" if key == INPUT_DIMS else f"`{json.dumps(comp.defaults[key])}`"
        if key in base:
            default += " (required)"
        elif comp.defaults.get(key, 0) is None and facts.resolved.get(key) is not None:
            default += f" -> `{json.dumps(facts.resolved[key])}` {comp.describe_context(comp.contexts[0])}"
        rows.append(f"| `{key}` | {default} | {value_text(facts, key)} |")
    return rows
