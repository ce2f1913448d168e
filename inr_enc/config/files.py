"""Loading configs: JSON or YAML files, by path or by name from the package's configs/ folder (inr_enc/configs,
package data: in a wheel too). Each file is read by parsing.py's ``parse_file``; here, the ``parent`` chains
and ``--set`` overrides."""

from __future__ import annotations

import copy
import os
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from .checks import INHERITED, check_nesting
from .parsing import parse_file, parse_text

CONFIG_DIR = Path(resources.files("inr_enc") / "configs")  # a regular folder: pip installs wheels unpacked
SUFFIXES = (".yaml", ".yml", ".json")
MAX_PARENTS = 16  # 'parent' files in one chain (Instant-NGP's configs use one)
ROOT_VARIABLE = "INR_ENC_CONFIG_ROOT"  # a folder (and its subfolders) 'parent' may also name files in


def available_configs() -> list[str]:
    """Names of the configs in inr_enc/configs/ (usable as ``load_config(name)``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*") if p.suffix in SUFFIXES)


def load_config(name_or_path: str | Path, parent_root: str | Path | None = None) -> dict[str, Any]:
    """Read a config dict from a .json/.yaml file, or from inr_enc/configs/NAME.{yaml,yml,json}.

    As Instant-NGP reads its configs (src/testbed.cu): JSON may hold ``//`` and ``/* */`` comments, and a
    ``"parent": "base.json"`` key names a config (relative to this file's folder, itself resolved the same way)
    that this one patches (``merge_patch``). A parent must lie in the folder of the file named here or its
    subfolders (symlinks resolved), or in ``parent_root`` (default: the INR_ENC_CONFIG_ROOT environment variable)
    or its subfolders. Raises ValueError (one line) if nothing matches, a file cannot be read as a config
    (``parse_file``) or does not hold a mapping, or parents form a cycle, a chain longer than MAX_PARENTS or leave
    those folders.
    """
    path = Path(name_or_path)
    if _is_file(path, Path.is_dir):
        raise ValueError(f"{path}: a folder, not a config file")
    if not _is_file(path):
        candidates = [CONFIG_DIR / f"{name_or_path}{suffix}" for suffix in SUFFIXES]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise ValueError(f"no config file or named config {str(name_or_path)!r}; "
                             f"named configs: {', '.join(available_configs())}")
    root = parent_root if parent_root is not None else os.environ.get(ROOT_VARIABLE) or None
    return _with_parents(path, [path.parent.resolve(), *([Path(root).resolve()] if root is not None else [])])


def _is_file(path: Path, test: Callable[[Path], bool] = Path.is_file) -> bool:
    """Whether ``path`` is a file (or passes ``test``); False also where the OS refuses the name (too long, a null
    byte)."""
    try:
        return test(path)
    except (OSError, ValueError):
        return False


def _with_parents(path: Path, roots: list[Path]) -> dict[str, Any]:
    """The config at ``path`` patched onto its parent's, and so on up its chain of ``parent`` files, each in one
    of ``roots`` or their subfolders."""
    chain: list[tuple[Path, dict[str, Any]]] = []
    while True:
        resolved = path.resolve()
        if resolved in (p.resolve() for p, _ in chain):
            raise ValueError(f"{path}: 'parent' configs form a cycle: "
                             f"{' -> '.join(str(p) for p, _ in chain)} -> {path}")
        config = parse_file(path)
        if not isinstance(config, dict):
            got = "nothing (an empty file)" if config is None else type(config).__name__
            raise ValueError(f"{path}: a config must be a mapping, got {got}")
        chain.append((path, config))
        if "parent" not in config:
            break
        parent = config.pop("parent")
        if not isinstance(parent, str) or not _is_file(path.parent / parent):
            raise ValueError(f"{path}: 'parent' must name a config file next to it, got {parent!r}"[:300])
        if not any((path.parent / parent).resolve().is_relative_to(root) for root in roots):
            raise ValueError(f"{path}: 'parent' {parent!r} is outside {' and '.join(map(str, roots))}, where parents "
                             f"may be; to allow its folder, pass load_config(..., parent_root=) or set {ROOT_VARIABLE}")
        if len(chain) > MAX_PARENTS:
            raise ValueError(f"{chain[0][0]}: more than {MAX_PARENTS} 'parent' configs in its chain")
        path = path.parent / parent
    merged = chain[-1][1]
    for _, config in reversed(chain[:-1]):
        merged = merge_patch(merged, config)
    return merged


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
        value = parse_text(text)
    except ValueError as error:
        raise ValueError(f"{text[:60]!r}: not a YAML value ({error})") from None
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
    check_nesting("--set", "config", config)
    return config
