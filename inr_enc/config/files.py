"""Loading configs: JSON or YAML files, by path or by name from the package's configs/ folder (inr_enc/configs,
package data: in a wheel too)."""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import json5
import yaml

from .checks import INHERITED

CONFIG_DIR = Path(resources.files("inr_enc") / "configs")  # a regular folder: pip installs wheels unpacked
SUFFIXES = (".yaml", ".yml", ".json")


def available_configs() -> list[str]:
    """Names of the configs in inr_enc/configs/ (usable as ``load_config(name)``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*") if p.suffix in SUFFIXES)


def load_config(name_or_path: str | Path) -> dict[str, Any]:
    """Read a config dict from a .json/.yaml file, or from inr_enc/configs/NAME.{yaml,yml,json}.

    As Instant-NGP reads its configs (src/testbed.cu): JSON may hold ``//`` and ``/* */`` comments, and a
    ``"parent": "base.json"`` key names a config (relative to this file's folder, itself resolved the same way)
    that this one patches (``merge_patch``). Raises ValueError if nothing matches, a file does not hold a mapping,
    or parents form a cycle.
    """
    path = Path(name_or_path)
    if not path.is_file():
        candidates = [CONFIG_DIR / f"{name_or_path}{suffix}" for suffix in SUFFIXES]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise ValueError(f"no config file or named config {str(name_or_path)!r}; named configs: {', '.join(available_configs())}")
    return _with_parents(path, ())


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        # json5: JSON with comments, as Instant-NGP's parser (nlohmann::json, ignore_comments) takes them
        config = json5.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise ValueError(f"{path}: not valid {path.suffix[1:].upper()}: {error}") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a config must be a mapping, got {type(config).__name__}")
    return config


def _with_parents(path: Path, children: tuple[Path, ...]) -> dict[str, Any]:
    """The config at ``path`` patched onto its parent's (recursively); ``children``: the files that led here."""
    if path.resolve() in children:
        chain = " -> ".join(str(p) for p in (*children, path.resolve()))
        raise ValueError(f"{path}: 'parent' configs form a cycle: {chain}")
    config = _read_mapping(path)
    if "parent" not in config:
        return config
    parent = config.pop("parent")
    if not isinstance(parent, str) or not (path.parent / parent).is_file():
        raise ValueError(f"{path}: 'parent' must name a config file next to it, got {parent!r}")
    return merge_patch(_with_parents(path.parent / parent, (*children, path.resolve())), config)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as Instant-NGP applies a child config to its parent (nlohmann's merge_patch):
    mappings merge key by key, null removes a key, anything else replaces; on copies. Where a mapping names another
    ``otype`` than the one it patches (configs/nerf/densegrid.json: DenseGrid over base.json's HashGrid), the keys
    it keeps from the parent are listed under ``INHERITED``: the otype's own check ignores those it does not read,
    as tcnn does (checks.py ``without_unread_inherited``), and uses the others (densegrid.json's
    n_features_per_level 4). Written here: a few lines, and the marking is ours."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(target) if isinstance(target, dict) else {}
    if isinstance(merged.get("otype"), str) and isinstance(patch.get("otype"), str) \
            and merged["otype"].lower() != patch["otype"].lower():
        merged[INHERITED] = sorted(set(merged) - set(patch) - {"otype", INHERITED})
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


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
