"""The checks every config key goes through, and the otype registries (tiny-cuda-nn style).

The lowest layer of inr_enc: plain Python, no torch. Each check raises ValueError naming the section (an otype or
"training", "network", ...) and the key, and returns the value in its canonical form.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")
INT64_MAX = 2**63 - 1  # every count ends up in int64 tensors and index math
FLOAT32_MAX = 3.4028234663852886e38  # beyond it a number is inf as a float32
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range
# How deep a config may nest: resolving one, its error messages (repr) and json5's parser recurse, and a "nested"
# encoding is resolved again by each level above it (Progressive inside Progressive: 10x the time per level). The
# deepest shipped or Instant-NGP config nests 4 levels, with 2 "nested" (Ema > ExponentialDecay > Adam).
MAX_DEPTH = 16  # levels of mappings and lists, the outermost one included
MAX_NESTED = 4  # tcnn's "nested" sections inside one another: Composite, Progressive, optimizer wrappers


def config_error(section: str, message: str) -> ValueError:
    return ValueError(f"{section}: {message}")


@dataclass(frozen=True)
class Check:
    """One check a helper below made: the bounds (or choices) it held ``key`` of ``section`` to, whatever the
    value. ``kind``: "int" | "float" | "choice" | "bool"; ``high`` None: no upper bound but int64's or float32's."""

    section: str
    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    choices: tuple[str, ...] = ()
    high_inclusive: bool = True


_RECORDER: ContextVar[list[Check] | None] = ContextVar("inr_enc_check_recorder", default=None)


@contextmanager
def recording_checks() -> Iterator[list[Check]]:
    """``with recording_checks() as checks:`` collects every ``Check`` the helpers make inside the block, in order
    (nested blocks collect their own): how scripts/reference.py reads each key's range from the code that checks it."""
    checks: list[Check] = []
    token = _RECORDER.set(checks)
    try:
        yield checks
    finally:
        _RECORDER.reset(token)


def _record(check: Check) -> None:
    checks = _RECORDER.get()
    if checks is not None:
        checks.append(check)


INHERITED = "__inherited__"  # the keys merge_patch kept from a parent section of another otype (files.py)


def without_unread_inherited(config: Mapping[str, Any], valid: Iterable[str]) -> dict[str, Any]:
    """``config`` less the keys it inherited from a parent section of another otype (``INHERITED``) that are not in
    ``valid``: tcnn and Instant-NGP ignore keys an otype does not read; inr_enc refuses only a config's own."""
    inherited = config.get(INHERITED, ())
    valid = set(valid)
    return {key: value for key, value in config.items()
            if key != INHERITED and (key in valid or key not in inherited)}


def check_keys(section: str, config: Mapping[str, Any], valid: Iterable[str]) -> None:
    """Raise ValueError naming each unknown key, a close match, and the valid keys."""
    valid = sorted(set(valid))
    for key in config:
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise config_error(section, f"unknown config key '{key}'{hint}; valid keys: {', '.join(valid)}")


def check_nesting(section: str, key: str, value: Any) -> None:
    """Raise ValueError naming the path where ``value`` nests mappings and lists deeper than MAX_DEPTH, or "nested"
    sections deeper than MAX_NESTED. A walk with its own stack (no recursion, whatever the depth); what several
    places share (YAML aliases, even cycles) is walked again only when reached deeper."""
    stack: list[tuple[Any, tuple[Any, ...], int, int]] = [(value, (), 1, 0)]
    reached: dict[int, tuple[int, int]] = {}  # id -> (depth, nested) it was walked at
    while stack:
        node, path, depth, nested = stack.pop()
        if not isinstance(node, (Mapping, list, tuple)):
            continue
        if depth > MAX_DEPTH or nested > MAX_NESTED:
            where = "".join(f"[{part}]" if isinstance(part, int) else f".{str(part)[:40]}" for part in path)
            limit = (f"{MAX_DEPTH} levels of mappings and lists" if depth > MAX_DEPTH
                     else f"{MAX_NESTED} 'nested' sections")
            raise config_error(section, f"{key}{where} is nested too deep (at most {limit})")
        before = reached.get(id(node))
        if before is not None and before[0] >= depth and before[1] >= nested:
            continue
        reached[id(node)] = (depth, nested)
        items = node.items() if isinstance(node, Mapping) else enumerate(node)
        stack.extend((child, (*path, part), depth + 1, nested + (part == "nested" and isinstance(node, Mapping)))
                     for part, child in items)


def check_mapping(section: str, key: str, value: Any, allow_none: bool = True) -> dict[str, Any]:
    """A config section: a mapping with string keys (None -> {} where allowed), nested at most MAX_DEPTH and
    MAX_NESTED deep (``check_nesting``); returned as a new dict."""
    if value is None and allow_none:
        return {}
    check_nesting(section, key, value)  # first: the message below shows the value
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise config_error(section,
                           f"'{key}' must be a mapping of keys to values, got {type(value).__name__} {value!r}"[:300])
    return dict(value)


def check_int(section: str, key: str, value: Any, low: int, high: int | None = None) -> int:
    """An integer in [low, high]; with no ``high``, at most int64's maximum. A float that is a whole number counts."""
    _record(Check(section, key, "int", low, high))
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise config_error(section, f"'{key}' must be an integer, got {value!r}"[:300])
    given, value = value, int(value)
    if high is not None and not low <= value <= high:
        raise config_error(section, f"'{key}' must be in [{low}, {high}], got {given!r}"[:300])
    if value < low:
        raise config_error(section, f"'{key}' must be >= {low}, got {given!r}"[:300])
    if high is None and value > INT64_MAX:
        raise config_error(section, f"'{key}' must be at most {INT64_MAX} (int64), got {given!r}"[:300])
    return value


def check_seed(section: str, value: Any) -> int:
    """A ``seed``: an integer in torch.Generator.manual_seed's range [0, 2^64 - 1]."""
    return check_int(section, "seed", value, 0, MAX_SEED)


def check_float(section: str, key: str, value: Any, low: float | None = None, low_inclusive: bool = True,
                high: float | None = None, high_inclusive: bool = True) -> float:
    """A finite number >= ``low`` (> where not ``low_inclusive``) and <= ``high`` (< where not
    ``high_inclusive``); with no ``high`` its magnitude is at most float32's maximum, so that it stays finite in a
    float32 tensor."""
    _record(Check(section, key, "float", low, high, low_inclusive, high_inclusive=high_inclusive))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise config_error(section, f"'{key}' must be a finite number, got {value!r}"[:300])
    value = float(value)
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise config_error(section, f"'{key}' must be {'>=' if low_inclusive else '>'} {low}, got {value}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        end = "]" if high_inclusive else ")"
        interval = (f"in {'[' if low_inclusive else '('}{low:g}, {high:g}{end}" if low is not None
                    else f"{'<=' if high_inclusive else '<'} {high:g}")
        raise config_error(section, f"'{key}' must be {interval}, got {value:g}")
    if abs(value) > FLOAT32_MAX:
        raise config_error(section,
                           f"'{key}' must be within float32's range (magnitude <= {FLOAT32_MAX:.4g}), got {value:g}")
    return value


def check_choice(section: str, key: str, value: Any, choices: Iterable[str]) -> str:
    """Case-insensitive choice (tcnn matches its enum strings case-insensitively); returns the canonical spelling."""
    choices = list(choices)
    _record(Check(section, key, "choice", choices=tuple(choices)))
    for choice in choices:
        if isinstance(value, str) and value.lower() == choice.lower():
            return choice
    raise config_error(section, f"'{key}' must be one of {', '.join(choices)}; got {value!r}")


def check_bool(section: str, key: str, value: Any) -> bool:
    _record(Check(section, key, "bool"))
    if not isinstance(value, bool):
        raise config_error(section, f"'{key}' must be true or false, got {value!r}")
    return value


def lookup_otype(kind: str, otype: Any, registry: Mapping[str, T]) -> T:
    """``registry[otype]`` matched case-insensitively as tcnn does; ValueError naming ``kind`` and the valid otypes."""
    by_lower = {name.lower(): value for name, value in registry.items()}
    if not isinstance(otype, str) or otype.lower() not in by_lower:
        raise ValueError(f"unknown {kind} otype {otype!r}; valid otypes: {', '.join(sorted(registry))}")
    return by_lower[otype.lower()]


class Registry(Mapping[str, type]):
    """otype -> class for one ``kind`` of component ("encoding", "network"); filled by the ``register`` decorator
    where each class is defined, so adding a component touches no central list."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: dict[str, type] = {}

    def register(self, *aliases: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: register ``cls.otype`` and any ``aliases`` (other otypes that build the same class)."""
        def add(cls: type[T]) -> type[T]:
            for name in (cls.otype, *aliases):
                if name.lower() in (known.lower() for known in self._classes):
                    raise AssertionError(f"{self.kind} otype {name!r} registered twice")
                self._classes[name] = cls
            return cls

        return add

    def lookup(self, otype: Any) -> type:
        """The class registered for ``otype`` (case-insensitive); ValueError listing the valid ones."""
        return lookup_otype(self.kind, otype, self._classes)

    def __getitem__(self, otype: str) -> type:
        return self._classes[otype]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)
