"""An Instant-NGP snapshot (snapshot.py) into a model: the settings it needs (``snapshot_settings``), then its
weights and occupancy grid (``load_snapshot``). One exported by inr_enc comes back exactly (its "inr_enc"
section); one written by Instant-NGP is read through its dataset transform (NeRF world -> unit cube: p * scale +
offset, axes cycled) composed with the dataparser's (nerfstudio's poses: scale * (R p + t)), its density grid
resampled at the model's cells."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from ..field.tcnn_layout import load_tcnn_params, tcnn_n_params
from .snapshot import CYCLE, GRID_SIZE, MIN_CONE_STEPSIZE, cell_centres, morton3d
from .snapshot_schema import CONFIG_SECTIONS, PARAM_BYTES, check_snapshot

NGP_SCALE, NGP_OFFSET = 0.33, [0.5, 0.5, 0.5]  # nerf_loader.h's defaults (NERF_SCALE)


def ngp_unit_frame(snapshot: dict[str, Any], dataparser_transform: torch.Tensor, dataparser_scale: float
                   ) -> torch.Tensor:
    """[3, 4] world (the dataparser's) -> Instant-NGP's unit cube, for a snapshot Instant-NGP wrote (one that
    check_snapshot passes)."""
    dataset = snapshot["snapshot"].get("nerf", {}).get("dataset") or {}
    if dataset.get("from_mitsuba", False):
        raise ValueError("snapshot: Mitsuba-convention datasets (from_mitsuba) are not read")
    scale = float(dataset.get("scale", NGP_SCALE))
    offset = torch.tensor(dataset.get("offset", NGP_OFFSET), dtype=torch.float64)
    rotation, shift = dataparser_transform[:, :3].double(), dataparser_transform[:, 3].double()
    linear = scale / dataparser_scale * CYCLE.double() @ rotation.T
    return torch.cat([linear, (CYCLE.double() @ (offset - scale * rotation.T @ shift))[:, None]], 1)


def snapshot_settings(snapshot: dict[str, Any], dataparser_transform: torch.Tensor | None = None,
                      dataparser_scale: float = 1.0) -> dict[str, Any]:
    """InrNerfModelConfig settings that build the snapshot's field: its network config, a bounded scene, the
    128^3 grid, its background, and (one Instant-NGP wrote) the unit frame. ValueError for what is not read, or a
    field of another type, length or range (snapshot_schema.py)."""
    section = check_snapshot(snapshot)["snapshot"]
    nerf, ours = section["nerf"], section.get("inr_enc")
    dataset = nerf.get("dataset") or {}
    if nerf.get("aabb_scale", 1) != 1 or dataset.get("n_extra_learnable_dims", 0) or dataset.get("is_hdr", False):
        raise ValueError("snapshot: only aabb_scale 1 (one cascade: the unit cube), without extra dims and not HDR "
                         "(Instant-NGP's exponential colour), is read")
    if ours is None and dataset.get("n_images", 1) == 0:  # Instant-NGP saved it without a dataset: no transform
        raise ValueError("snapshot: its dataset section is empty, so its unit cube's place in the world is unknown "
                         "(a snapshot inr_enc exported and Instant-NGP re-saved); import inr_enc's own export")
    background = section.get("background_color", [1.0, 1.0, 1.0, 1.0])
    config = {key: snapshot[key] for key in CONFIG_SECTIONS if key in snapshot}
    settings: dict[str, Any] = {"instant_ngp_config": json.dumps(config), "scene_contraction": "none",
                                "grid_resolution": GRID_SIZE,
                                "background_color": "black" if float(background[0]) < 0.5 else "white"}
    if ours is not None:
        settings.update(ours.get("settings", {}))
    if ours is None or ours.get("unit_frame") is not None:
        frame = torch.tensor(ours["unit_frame"]) if ours else ngp_unit_frame(
            snapshot, torch.eye(4)[:3] if dataparser_transform is None else dataparser_transform, dataparser_scale)
        settings["unit_frame"] = frame.tolist()
    return settings


def _params(section: dict[str, Any]) -> torch.Tensor:
    kind = section.get("params_type", "float")
    values = np.frombuffer(section["params_binary"], dtype=f"<f{PARAM_BYTES[kind]}")
    return torch.from_numpy(values.astype(np.float32))


def load_snapshot(model: Any, snapshot: dict[str, Any]) -> None:
    """Put the snapshot's weights and occupancy grid into ``model`` (built from ``snapshot_settings``); ValueError
    if they do not fit it, or for a field of another type, length or range (snapshot_schema.py)."""
    section, field = check_snapshot(snapshot)["snapshot"], model.field
    parts = (field.density_network, field.color_network, field.position_encoder, field.color_encoder)
    sizes = [tcnn_n_params(m) for m in parts]
    params = _params(section)
    if len(params) != sum(sizes):
        raise ValueError(f"snapshot: {len(params)} params; its network config makes {sum(sizes)}")
    for module, chunk in zip(parts, params.split(sizes)):
        load_tcnn_params(module, chunk)
    ours = section.get("inr_enc")
    if ours is not None:  # exported by inr_enc: the same scene box and the exact grid
        if field.unit_frame is None and not torch.equal(field.aabb, torch.tensor(ours["aabb"], dtype=field.aabb.dtype)):
            raise ValueError(f"snapshot: exported from the scene box {ours['aabb']}; this data gives "
                             f"{field.aabb.tolist()}")
        opacity = torch.from_numpy(np.frombuffer(ours["opacity"], dtype="<f4").copy())
        if len(opacity) != model.occupancy.resolution**3:
            raise ValueError(f"snapshot: an occupancy grid of {len(opacity)} cells; this model's has "
                             f"{model.occupancy.resolution**3}")
    else:  # Instant-NGP's cascade 0: optical thickness -> density * our step
        thickness = torch.from_numpy(np.frombuffer(section["density_grid_binary"], dtype="<f2").astype(np.float32))
        if len(thickness) not in (0, GRID_SIZE**3):
            raise ValueError(f"snapshot: a density grid of {len(thickness)} cells; one cascade has {GRID_SIZE**3}")
        opacity = _resampled(model, thickness) / MIN_CONE_STEPSIZE * field.density_scale * model.step_size
    model.occupancy.set_opacity(opacity.to(model.occupancy.opacity))


def _resampled(model: Any, thickness: torch.Tensor) -> torch.Tensor:
    """Instant-NGP's cells [128^3, Morton order] at the model's cells [R^3]: the largest over 2^3 points spread
    through each (a rotated frame tilts its cells against ours; one point could miss a thin occupied one)."""
    grid, frame = model.occupancy, model.field.unit_frame.double()
    lo, hi = grid.aabb[0].double(), grid.aabb[1].double()
    centres = cell_centres(grid.resolution)
    values = torch.zeros(len(centres))
    if not len(thickness):  # never populated: an untrained model's
        return values
    for corner in torch.cartesian_prod(*[torch.tensor([-0.25, 0.25], dtype=torch.float64)] * 3):
        world = lo + (centres + corner / grid.resolution) * (hi - lo)
        ijk = ((world @ frame[:, :3].T + frame[:, 3]) * GRID_SIZE).floor().long()
        inside = ((ijk >= 0) & (ijk < GRID_SIZE)).all(-1)
        values[inside] = torch.maximum(values[inside], thickness[morton3d(ijk[inside])])
    return values
