"""Loading configs: JSON or YAML files, by path or by name from the package's configs/ folder (inr_enc/configs,
package data: in a wheel too)."""

from __future__ import annotations

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
