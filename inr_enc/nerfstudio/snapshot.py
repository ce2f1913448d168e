"""Instant-NGP snapshots both ways: ``.ingp`` (msgpack, gzip-compressed) or ``.msgpack`` (plain), for a model of
the Instant-NGP layout (field.py) on a bounded scene.

Format facts from instant-ngp abe236e and tcnn 6ee3546:
- testbed.cu save_snapshot/load_snapshot: the network config (loss, optimizer, encoding, network, dir_encoding,
  rgb_network) with a "snapshot" section: version 1, mode "nerf", density_grid_size 128, density_grid_binary,
  nerf {aabb_scale, rgb {rays_per_batch, ...}, dataset?}, training_step, loss, aabb, render_aabb, up_dir, ...
- tcnn trainer.h serialize: n_params, params_type ("float" or "__half"), params_binary: the inference params
  (Ema's average where the optimiser has one); nerf_network.h: density network, rgb network, position encoding,
  direction encoding, each in tcnn's layout (field/tcnn_layout.py).
- nerf_device.cuh: the density grid is 128^3 cells per cascade in Morton order (tcnn's morton3D), each the optical
  thickness density * MIN_CONE_STEPSIZE (sqrt(3) / 1024 unit-cube lengths), float16.
- nerf_loader.h: NeRF world -> Instant-NGP's unit cube: p * scale + offset, axes cycled (x, y, z) <- (y, z, x);
  directions cycled only (defaults scale 0.33, offset 0.5).

An exported snapshot's unit cube is the scene box (nerfstudio's axes, z up: its "up_dir"); it carries an "inr_enc"
section (ignored by Instant-NGP) with the occupancy grid in float32 and the scene box, so that importing it gives
back the same renders exactly. A snapshot from Instant-NGP itself is read through its dataset transform.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path
from typing import Any

import msgpack
import torch

from ..field.tcnn_layout import tcnn_params
from ..io import atomic_path
from ..nerf.occupancy import OccupancyGrid
from ..nerf.space import unit_to_world
from ..networks import TcnnMLP
from ..version import __version__
from .snapshot_schema import GRID_SIZE, RENDER_SETTINGS, check_snapshot

SUFFIXES = (".ingp", ".msgpack")
# What the largest snapshot a user would save holds, the default cap on a file's size and on what it inflates to: the
# Instant-NGP paper's largest hash grid (2^24 entries x 16 levels x 2 features) in float32 (params_type "float";
# tcnn's "__half" takes half): 2 GiB; 8 cascades (aabb_scale 128) of 128^3 float16 densities: 32 MiB; inr_enc's
# float32 occupancy grid: 8 MiB; 64 MiB for the networks (under 1 MiB in Instant-NGP's configs) and the config and
# dataset sections. A file is inflated as it is unpacked: refused once past the cap (a gzip bomb too), or once what
# it holds is not a snapshot's msgpack; msgpack holds its largest binary at once (then a copy), not the whole file.
MAX_BYTES = (1 << 24) * 16 * 2 * 4 + 8 * GRID_SIZE**3 * 2 + GRID_SIZE**3 * 4 + (64 << 20)
MAX_BYTES_VARIABLE = "INR_SNAPSHOT_MAX_BYTES"  # another cap, in bytes
CHUNK = 1 << 20  # bytes read, and inflated, at a time
# msgpack's limits beside the cap: strings (paths, names) of 1 MiB; 2^16 entries per array or map (an Instant-NGP
# dataset's per-image lists: 65,536 images), which msgpack allocates as declared, before reading them (up to 1024
# nested: 512 MiB); 2^22 array and map entries in all (~55 per image), each a Python object of up to ~70 bytes for
# one byte of msgpack (an empty list): ~300 MiB.
MAX_STRING, MAX_ENTRIES, MAX_ALL_ENTRIES = 1 << 20, 1 << 16, 1 << 22
MIN_CONE_STEPSIZE = math.sqrt(3) / 1024  # nerf_device.cuh: SQRT3() / NERF_STEPS()
# rgb_loss -> Instant-NGP's NeRF loss (testbed.cu string_to_loss_type; its MAPE divides by the prediction)
NGP_LOSS_NAMES = {"MSE": "L2", "L1": "L1", "RelativeL1": "MAPE", "RelativeL2": "RelativeL2", "SMAPE": "SMAPE",
                  "Huber": "Huber"}
CYCLE = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])  # (x, y, z) -> (y, z, x)


def morton3d(ijk: torch.Tensor) -> torch.Tensor:
    """[..., 3] cell coordinates < 1024 -> [...] Morton code (tcnn's morton3D: x in bit 0, y bit 1, z bit 2)."""
    v = ijk.long()
    for multiplier, mask in ((0x00010001, 0xFF0000FF), (0x00000101, 0x0F00F00F), (0x00000011, 0xC30C30C3),
                             (0x00000005, 0x49249249)):
        v = (v * multiplier) & mask
    return v[..., 0] | (v[..., 1] << 1) | (v[..., 2] << 2)


def cell_centres(resolution: int) -> torch.Tensor:
    """[resolution^3, 3] cell centres in [0, 1]^3, x slowest (OccupancyGrid's order)."""
    axis = (torch.arange(resolution, dtype=torch.float64) + 0.5) / resolution
    return torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)


def _training_sections(config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model config's loss and optimizer as Instant-NGP's sections (Adam at base.json's values where the model
    was not made from an Instant-NGP config)."""
    training = config.tcnn_optimizer or {"lr": 1e-2, "betas": [0.9, 0.99], "eps": 1e-15, "l2_reg": 1e-6}
    optimizer: dict[str, Any] = {"otype": "Adam", "learning_rate": training["lr"], "beta1": training["betas"][0],
                                 "beta2": training["betas"][1], "epsilon": training["eps"],
                                 "l2_reg": training["l2_reg"]}
    if training.get("schedule") == "exponential":
        keys = ("decay_start", "decay_interval", "decay_base", "decay_end")
        optimizer = {"otype": "ExponentialDecay", **{k: training[k] for k in keys}, "nested": optimizer}
    if config.ema_decay is not None:
        optimizer = {"otype": "Ema", "decay": config.ema_decay, "nested": optimizer}
    return {"otype": NGP_LOSS_NAMES[config.rgb_loss]}, optimizer


def _network_section(network: TcnnMLP, n_outputs: int | None = None) -> dict[str, Any]:
    keys = ("otype", "activation", "n_neurons", "n_hidden_layers")
    return {**{k: network.config[k] for k in keys}, "output_activation": "None",
            **({} if n_outputs is None else {"n_output_dims": n_outputs})}


def export_snapshot(model: Any, step: int = 0) -> dict[str, Any]:
    """An InrNerfModel trained ``step`` steps -> Instant-NGP's snapshot (the network config with its "snapshot"
    section), with the weights evaluation uses (Ema's average). ValueError where Instant-NGP could not hold it."""
    field = getattr(model, "field", None)
    if not getattr(field, "instant_ngp_layout", False):
        raise ValueError("export_snapshot: Instant-NGP's snapshot needs a model of inr_enc's ns-train methods with "
                         "field_layout 'instant-ngp' (--pipeline.model.instant-ngp-config)")
    grid, extent = model.occupancy, (field.aabb[1] - field.aabb[0]).double()
    needs = {"a bounded scene (scene_contraction none)":
             lambda: field.contraction is None and type(grid) is OccupancyGrid,
             f"grid_resolution {GRID_SIZE}": lambda: grid.resolution == GRID_SIZE,
             "no appearance embedding": lambda: field.appearance_embedding is None,
             "tcnn networks (FullyFusedMLP or CutlassMLP)": lambda: isinstance(field.density_network, TcnnMLP)
             and isinstance(field.color_network, TcnnMLP),
             # Instant-NGP's rgb network reads the density network's 16-padded outputs: all must be ours too
             "1 + geo_feat_dim a multiple of 16": lambda: field.feature_dim % 16 == 0,
             "encodings tcnn has": lambda: field.position_encoder.tcnn_config() is not None
             and field.color_encoder.tcnn_config() is not None,
             "a loss Instant-NGP has (not MAPE of the target)": lambda: model.config.rgb_loss in NGP_LOSS_NAMES,
             "a cube scene box": lambda: field.unit_frame is not None
             or bool((extent - extent[0]).abs().max() <= 1e-6 * extent[0])}
    missing = [need for need, met in needs.items() if not met()]
    if missing:
        raise ValueError(f"export_snapshot: Instant-NGP's snapshot needs {', '.join(missing)}")
    training = model.training
    model.eval()  # Ema's average in the weights, as tcnn's inference params
    try:
        params = torch.cat([tcnn_params(m) for m in (field.density_network, field.color_network,
                                                     field.position_encoder, field.color_encoder)])
    finally:
        model.train(training)
    # each of Instant-NGP's cells takes our cell at its centre: density * MIN_CONE_STEPSIZE in unit-cube lengths
    unit = cell_centres(GRID_SIZE)
    world = _unit_to_world(field, unit)
    opacity = grid.opacity_at(world.float().to(grid.opacity.device)).cpu()  # the model may sit on a GPU
    thickness = opacity.double() / (model.step_size * field.density_scale) * MIN_CONE_STEPSIZE
    ngp_grid = torch.zeros(GRID_SIZE**3, dtype=torch.float16)
    ngp_grid[morton3d((unit * GRID_SIZE).long())] = thickness.to(torch.float16)
    loss, optimizer = _training_sections(model.config)
    direction = field.color_encoder.tcnn_config()["nested"][-1]  # Composite[Identity(density outputs), dir_encoding]
    dir_encoding = {k: v for k, v in direction.items() if k not in ("n_dims_to_encode", "dims_to_encode_begin")}
    unit_box = {"min": [0.0, 0.0, 0.0], "max": [1.0, 1.0, 1.0]}
    background = float(model.background[0])
    snapshot = {
        "version": 1, "mode": "nerf", "n_params": len(params), "params_type": "float",
        "params_binary": params.numpy().astype("<f4").tobytes(),
        "density_grid_size": GRID_SIZE, "density_grid_binary": ngp_grid.numpy().astype("<f2").tobytes(),
        "nerf": {"aabb_scale": 1, "rgb": {"rays_per_batch": 1 << 12, "measured_batch_size": 0,
                                          "measured_batch_size_before_compaction": 0}},
        "training_step": int(step), "loss": 0.0, "aabb": unit_box,
        "render_aabb": unit_box, "render_aabb_to_local": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        "bounding_radius": math.sqrt(3) / 2, "up_dir": [0.0, 0.0, 1.0], "background_color": [background] * 3 + [1.0],
        "inr_enc": {"version": __version__, "opacity": grid.opacity.cpu().numpy().astype("<f4").tobytes(),
                    "aabb": field.aabb.tolist(),
                    "unit_frame": None if field.unit_frame is None else field.unit_frame.tolist(),
                    "settings": {key: getattr(model.config, key) for key in RENDER_SETTINGS}},
    }
    return {"loss": loss, "optimizer": optimizer, "encoding": field.position_encoder.tcnn_config(),
            "network": _network_section(field.density_network, None if field.feature_dim == 16 else field.feature_dim),
            "dir_encoding": dir_encoding, "rgb_network": _network_section(field.color_network), "snapshot": snapshot}


def _unit_to_world(field: Any, unit: torch.Tensor) -> torch.Tensor:
    """Unit-cube points [P, 3] -> world [P, 3] on the CPU (the inverse of the field's frame, or of its scene box)."""
    if field.unit_frame is not None:
        return unit_to_world(unit, field.unit_frame.cpu())
    aabb = field.aabb.cpu().double()
    return aabb[0] + unit * (aabb[1] - aabb[0])


def write_snapshot(snapshot: dict[str, Any], path: str | Path) -> None:
    """Write ``snapshot`` atomically: .ingp gzip-compressed (Instant-NGP's zstr stream), .msgpack plain."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"{path}: name the snapshot .ingp (compressed) or .msgpack, as Instant-NGP reads them")
    data = msgpack.packb(snapshot, use_bin_type=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(gzip.compress(data) if Path(path).suffix.lower() == ".ingp" else data)


def _cap(max_bytes: int | None) -> tuple[int, str]:
    """(the cap in bytes, where it comes from, for the message)."""
    if max_bytes is None and MAX_BYTES_VARIABLE not in os.environ:
        return MAX_BYTES, f"the largest snapshot's size; {MAX_BYTES_VARIABLE} sets another"
    name, setting = ("max_bytes", max_bytes) if max_bytes is not None else \
        (MAX_BYTES_VARIABLE, os.environ[MAX_BYTES_VARIABLE])
    if not str(setting).strip().isdigit() or int(setting) < 1:
        raise ValueError(f"{name}: expected a number of bytes >= 1, got {setting!r}")
    return int(setting), name


class _Refused(ValueError):
    """A file refused as a whole (its size, its compressed stream): the message as is."""


class _Inflating:
    """A file-like ``read`` of the zlib or gzip stream in ``file`` (wbits 32 + 15: either header, as zstr reads),
    inflated as it is read; _Refused past ``cap`` bytes, for a truncated stream or data after it."""

    def __init__(self, file: Any, path: Path, cap: int, source: str) -> None:
        self.file, self.path, self.cap, self.source = file, path, cap, source
        self.inflater, self.pending, self.total = zlib.decompressobj(wbits=47), b"", 0

    def read(self, size: int) -> bytes:
        while not self.inflater.eof:
            data = self.pending or self.file.read(CHUNK)
            try:  # at most size bytes out (zlib keeps the rest for the next call, b"" in)
                chunk = self.inflater.decompress(data, max(size, 1))
            except zlib.error as error:
                raise _Refused(f"{self.path}: not a compressed Instant-NGP snapshot ({error})") from None
            self.pending, self.total = self.inflater.unconsumed_tail, self.total + len(chunk)
            if self.total > self.cap:
                raise _Refused(f"{self.path}: inflates to more than {self.cap} bytes, the cap ({self.source})")
            if chunk:
                return chunk
            if not data:  # the file ended, zlib holds nothing more
                raise _Refused(f"{self.path}: a truncated compressed stream (it ends before its end mark)")
        if self.inflater.unused_data or self.file.read(1):
            raise _Refused(f"{self.path}: data after the compressed stream")
        return b""


def _counted(limit: int) -> Any:
    """A msgpack list_hook/object_hook counting array and map entries (an empty one as 1); ValueError past
    ``limit``."""
    count = 0

    def hook(container: Any) -> Any:
        nonlocal count
        count += 1 + len(container)
        if count > limit:
            raise ValueError(f"more than {limit} array and map entries")
        return container
    return hook


def read_snapshot(path: str | Path, max_bytes: int | None = None) -> dict[str, Any]:
    """A snapshot file (.ingp: zlib or gzip stream, as zstr reads; else plain msgpack) -> its dict, each field an
    import reads checked (snapshot_schema.py). ValueError for a file that is not one, or past ``max_bytes`` (default:
    $INR_SNAPSHOT_MAX_BYTES, else MAX_BYTES) on disk or inflated, refused before more than that is read."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"{path}: a snapshot is a .ingp (compressed) or .msgpack file, as Instant-NGP names them")
    cap, source = _cap(max_bytes)
    size = path.stat().st_size
    if size > cap:
        raise ValueError(f"{path}: {size} bytes, more than {cap} bytes, the cap ({source})")
    hook = _counted(MAX_ALL_ENTRIES)
    with open(path, "rb") as file:
        stream = _Inflating(file, path, cap, source) if path.suffix.lower() == ".ingp" else file
        unpacker = msgpack.Unpacker(stream, read_size=min(CHUNK, cap), max_buffer_size=cap, max_bin_len=cap,
                                    max_str_len=MAX_STRING, max_ext_len=MAX_STRING, max_array_len=MAX_ENTRIES,
                                    max_map_len=MAX_ENTRIES, list_hook=hook, object_hook=hook, raw=False,
                                    strict_map_key=True)
        try:
            snapshot = unpacker.unpack()
            if unpacker.read_bytes(1):
                raise ValueError("data after its end")
        except _Refused:
            raise
        except msgpack.OutOfData:
            raise ValueError(f"{path}: not a snapshot's msgpack (it ends early)") from None
        except (ValueError, msgpack.UnpackException) as error:  # msgpack's (UnicodeDecodeError too), the hook's
            raise ValueError(f"{path}: not a snapshot's msgpack ({error or type(error).__name__})") from None
    try:
        return check_snapshot(snapshot)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
