"""Every field a snapshot import reads (snapshot_import.py, snapshot_cli.py), checked once the file is unpacked
(snapshot.py ``read_snapshot``) and again for a snapshot dict built in memory: type, length, finite, range, each
failure a ValueError naming its key path, e.g. ``snapshot.nerf.dataset.offset: expected 3 finite numbers, got
[0.5]``. Fields the import does not read may hold anything, except that every map key is a string."""

from __future__ import annotations

import math
from typing import Any, NoReturn

GRID_SIZE = 128  # NERF_GRIDSIZE
# the model settings rendering reads besides the field and grid, kept so that an import renders the same
RENDER_SETTINGS = ("render_step_size", "early_stop_eps", "render_alpha_threshold", "occupancy_threshold")
CONFIG_SECTIONS = ("loss", "optimizer", "encoding", "network", "dir_encoding", "rgb_network")  # tcnn's, as JSON
FIELD_SECTIONS = CONFIG_SECTIONS[2:]  # the field's: an import needs them
PARAM_BYTES = {"float": 4, "__half": 2}  # tcnn's params_type -> bytes per value
MISSING = object()


def _shown(value: Any) -> str:
    if value is MISSING:
        return "nothing"
    if isinstance(value, bytes) and len(value) > 16:
        return f"{len(value)} bytes"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _fail(path: str, expected: str, value: Any) -> NoReturn:
    raise ValueError(f"{path}: expected {expected}, got {_shown(value)}")


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any, path: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        _fail(path, f"an integer >= {low}", value)
    return value


def _flag(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        _fail(path, "true or false", value)


def _mapping(value: Any, path: str, optional: bool = True) -> dict[str, Any]:
    if value is None or value is MISSING:
        if optional:
            return {}
        _fail(path, "a mapping", value)
    if not isinstance(value, dict):
        _fail(path, "a mapping", value)
    return value


def _matrix(value: Any, path: str, rows: int, columns: int) -> list[list[float]]:
    """``rows`` lists of ``columns`` finite numbers (rows 1: a flat list)."""
    shape = f"{columns} finite numbers" if rows == 1 else f"{rows} rows of {columns} finite numbers"
    flat = [value] if rows == 1 else value
    if not isinstance(flat, list) or len(flat) != rows or not all(
            isinstance(row, list) and len(row) == columns and all(map(_real, row)) for row in flat):
        _fail(path, shape, value)
    return flat


def _binary(value: Any, path: str, what: str, unit: int) -> None:
    if not isinstance(value, bytes) or len(value) % unit:
        _fail(path, f"{what} (bytes, a multiple of {unit})", value)


def _keys_and_values(snapshot: dict[str, Any]) -> None:
    """Every map key a string; in the network config sections, JSON values only (they become the model's JSON
    config). A loop, not recursion: msgpack nests up to 1024 deep, past Python's recursion limit."""
    stack: list[tuple[str, Any, bool]] = [("", snapshot, False)]  # (key path, value, JSON only)
    while stack:
        path, value, json_only = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    _fail(path or "the snapshot", "string keys", key)
                stack.append((f"{path}.{key}" if path else key, item,
                              json_only or (not path and key in CONFIG_SECTIONS)))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item, json_only) for i, item in enumerate(value))
        elif json_only and not (value is None or isinstance(value, (bool, str)) or _real(value)):
            _fail(path, "a JSON value (a string, finite number, true, false or null)", value)


def _dataset(dataset: dict[str, Any], path: str) -> None:
    """nerf_loader.h's transform and the dataset flags the import reads."""
    if "scale" in dataset and not (_real(dataset["scale"]) and dataset["scale"] > 0):
        _fail(f"{path}.scale", "a finite number > 0", dataset["scale"])
    if "offset" in dataset:
        _matrix(dataset["offset"], f"{path}.offset", 1, 3)
    for key in ("from_mitsuba", "is_hdr"):
        if key in dataset:
            _flag(dataset[key], f"{path}.{key}")
    for key in ("n_images", "n_extra_learnable_dims"):
        if key in dataset:
            _integer(dataset[key], f"{path}.{key}", 0)


def _inr_enc(ours: dict[str, Any], path: str) -> None:
    """inr_enc's own section (snapshot.py export_snapshot): scene box, exact grid, frame, render settings."""
    aabb = _matrix(ours.get("aabb", MISSING), f"{path}.aabb", 2, 3)
    if not all(low < high for low, high in zip(*aabb)):
        _fail(f"{path}.aabb", "min < max on each axis", aabb)
    if not isinstance(ours.get("opacity"), bytes) or len(ours["opacity"]) != 4 * GRID_SIZE**3:
        _fail(f"{path}.opacity", f"{GRID_SIZE}^3 float32 cells ({4 * GRID_SIZE**3} bytes)",
              ours.get("opacity", MISSING))
    if ours.get("unit_frame") is not None:
        (a, b, c, _), (d, e, f, _), (g, h, i, _) = frame = _matrix(ours["unit_frame"], f"{path}.unit_frame", 3, 4)
        determinant = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
        largest = max(abs(x) for row in frame for x in row[:3])
        if not abs(determinant) > 1e-12 * largest**3:  # relative to its size: a near-singular frame too
            _fail(f"{path}.unit_frame", "an invertible [3, 4] world -> unit cube transform", frame)
    settings = _mapping(ours.get("settings"), f"{path}.settings")
    unknown = [key for key in settings if key not in RENDER_SETTINGS]
    if unknown:  # they become model settings: only those export writes
        raise ValueError(f"{path}.settings: unknown key {unknown[0]!r} (known: {', '.join(RENDER_SETTINGS)})")
    for key, value in settings.items():
        if not (_real(value) or (key == "render_step_size" and value is None)):
            _fail(f"{path}.settings.{key}", "a finite number", value)


def check_snapshot(snapshot: Any) -> dict[str, Any]:
    """``snapshot`` if it holds what an import reads, else ValueError naming the first bad field."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("snapshot"), dict):
        raise ValueError("not an Instant-NGP NeRF snapshot (a map with a 'snapshot' section)")
    _keys_and_values(snapshot)
    missing = [name for name in FIELD_SECTIONS if name not in snapshot]
    if missing:
        raise ValueError(f"{', '.join(missing)}: missing (a snapshot holds its network config: "
                         f"{', '.join(FIELD_SECTIONS)})")
    for name in CONFIG_SECTIONS:
        _mapping(snapshot.get(name), name, optional=name not in FIELD_SECTIONS)
    section, path = snapshot["snapshot"], "snapshot"
    _integer(section.get("version", MISSING), f"{path}.version", 1)
    if section.get("mode", "nerf") != "nerf":
        _fail(f"{path}.mode", "'nerf'", section["mode"])
    if section.get("density_grid_size", MISSING) != GRID_SIZE:
        _fail(f"{path}.density_grid_size", f"{GRID_SIZE}", section.get("density_grid_size", MISSING))
    kind = section.get("params_type", "float")
    if not isinstance(kind, str) or kind not in PARAM_BYTES:
        _fail(f"{path}.params_type", "'float' or '__half'", kind)
    _binary(section.get("params_binary", MISSING), f"{path}.params_binary", f"{PARAM_BYTES[kind]}-byte {kind!r} values",
            PARAM_BYTES[kind])
    count = len(section["params_binary"]) // PARAM_BYTES[kind]
    if "n_params" in section and section["n_params"] != count:
        _fail(f"{path}.n_params", f"the count params_binary holds ({count})", section["n_params"])
    _binary(section.get("density_grid_binary", MISSING), f"{path}.density_grid_binary",
            f"float16 cells, {GRID_SIZE}^3 per cascade", 2 * GRID_SIZE**3)
    _integer(section.get("training_step", MISSING), f"{path}.training_step", 0)
    if "background_color" in section:
        _matrix(section["background_color"], f"{path}.background_color", 1, 4)
    nerf = _mapping(section.get("nerf", MISSING), f"{path}.nerf", optional=False)
    _integer(nerf.get("aabb_scale", 1), f"{path}.nerf.aabb_scale", 1)
    _dataset(_mapping(nerf.get("dataset"), f"{path}.nerf.dataset"), f"{path}.nerf.dataset")
    if section.get("inr_enc") is not None:
        _inr_enc(_mapping(section["inr_enc"], f"{path}.inr_enc"), f"{path}.inr_enc")
    return snapshot
