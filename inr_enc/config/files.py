"""Loading configs: JSON or YAML files, by path or by name from the package's configs/ folder (inr_enc/configs,
package data: in a wheel too)."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

CONFIG_DIR = Path(resources.files("inr_enc") / "configs")  # a regular folder: pip installs wheels unpacked
SUFFIXES = (".yaml", ".yml", ".json")


def available_configs() -> list[str]:
    """Names of the configs in inr_enc/configs/ (usable as ``load_config(name)``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*") if p.suffix in SUFFIXES)


def load_config(name_or_path: str | Path) -> dict[str, Any]:
    """Read a config dict from a .json/.yaml file, or from inr_enc/configs/NAME.{yaml,yml,json}.

    Raises ValueError if nothing matches or the file does not hold a mapping.
    """
    path = Path(name_or_path)
    if not path.is_file():
        candidates = [CONFIG_DIR / f"{name_or_path}{suffix}" for suffix in SUFFIXES]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise ValueError(f"no config file or named config {str(name_or_path)!r}; named configs: {', '.join(available_configs())}")
    text = path.read_text()
    try:
        config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"{path}: not valid {path.suffix[1:].upper()}: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a config must be a mapping, got {type(config).__name__}")
    return config


def config_source(name: str) -> str:
    """A named config's header comment (the source it follows) cut to one line: up to its first ': ' or '; '
    outside parentheses after 30 characters, at most 130 characters."""
    path = next(CONFIG_DIR / f"{name}{suffix}" for suffix in SUFFIXES if (CONFIG_DIR / f"{name}{suffix}").is_file())
    header = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    text, depth = " ".join(header), 0
    for i, char in enumerate(text):  # the first ': ' or '; ' outside parentheses, past 30 characters
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and i >= 30 and text[i:i + 2] in (": ", "; "):
            text = text[:i]
            break
    return text if len(text) <= 130 else text[:129].rsplit(" ", 1)[0] + "…"


def _yaml_value(text: str) -> Any:
    """A command-line value read as YAML (15 -> int, true -> bool, [1, 2] -> list), and numbers YAML 1.1 reads as
    strings (1e-3) as floats."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"{text!r}: not a YAML value ({str(error).splitlines()[0]})") from None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def apply_overrides(config: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """``config`` with KEY=VALUE assignments applied (a copy): dotted keys reach into sections
    (``encoding.log2_hashmap_size=15``, a missing section is created), values are read as YAML. Whether the keys
    and values are valid is the schema's to say, when the run is resolved. ValueError for a malformed assignment."""
    config = copy.deepcopy(config)
    for assignment in assignments:
        key, equals, text = assignment.partition("=")
        parts = key.strip().split(".")
        if not equals or not all(parts):
            raise ValueError(f"--set {assignment!r}: expected KEY=VALUE with a dotted KEY, e.g. encoding.n_levels=8")
        section = config
        for depth, part in enumerate(parts[:-1]):
            section = section.setdefault(part, {})
            if not isinstance(section, dict):
                raise ValueError(f"--set {assignment!r}: {'.'.join(parts[:depth + 1])} is a value, not a section")
        section[parts[-1]] = _yaml_value(text)
    return config
