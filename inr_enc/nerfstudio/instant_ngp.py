"""Instant-NGP's NeRF configs (NVlabs/instant-ngp configs/nerf/*.json) as this plugin's settings: the field
(``encoding``, ``network``, ``dir_encoding``, ``rgb_network``), the loss and the optimiser chain.

Facts from instant-ngp abe236e: include/neural-graphics-primitives/nerf_network.h (the density network has 16
outputs unless the config sets ``n_output_dims``; the rgb network reads all of them, the raw density included,
then the direction encoding of [direction, extra dims]), nerf_device.cuh (density = exp(output 0), colour =
logistic; Huber with delta 0.1, divided by 5), testbed.cu (the loss, L2 by default; the optimiser config; a grid
encoding's defaults). ``distortion_map`` (a learnt lens
distortion) and ``envmap`` (a learnt background) are trained only when asked for in the testbed; they are read and
left unused here.
"""

from __future__ import annotations

import math
from typing import Any

from ..config import load_config
from ..config.checks import check_int, check_keys, check_mapping, config_error
from ..config.parsing import parse_text
from ..field.tcnn_sections import training_from_tcnn
from ..networks import TcnnMLP
from ..networks.registry import network_class
from ..networks.tcnn_mlp import ALIGNMENT, round_up

FIELD_SECTIONS = ("encoding", "network", "dir_encoding", "rgb_network")
UNUSED_SECTIONS = ("distortion_map", "envmap")
FINEST_RESOLUTION = 2048  # testbed.cu: the finest grid level's cells across the unit cube, NeRF mode
DENSITY_OUTPUTS = 16  # nerf_network.h: n_output_dims of the density network when the config names none
# nerf_device.cuh: NeRF's MAPE divides by |prediction| + 0.01, not differentiated (tcnn's by |target|): RelativeL1
NERF_LOSSES = {"MAPE": "RelativeL1"}


def color_input_encoding(direction_encoding: dict[str, Any], n_density_outputs: int) -> dict[str, Any]:
    """The encoding of the colour network's input in Instant-NGP's layout, over [density outputs, direction,
    appearance code]: the density network's outputs as they are, then ``direction_encoding`` of the rest (the
    direction in [0, 1]^3, then the code: Instant-NGP's extra dims)."""
    return {"otype": "Composite", "nested": [{"otype": "Identity", "n_dims_to_encode": n_density_outputs},
                                             dict(direction_encoding)]}


def testbed_grid_defaults(encoding: dict[str, Any]) -> dict[str, Any]:
    """A grid position encoding (otype naming a grid) with the values the testbed fills in for NeRF where the
    config has none (testbed.cu reset_network): base_resolution 2^(log2_hashmap_size // 3) (15 when unset),
    and per_level_scale taking the finest level to FINEST_RESOLUTION cells across the unit cube (Instant-NGP
    multiplies that by its aabb_scale; here the scene box, or contracted space, is that cube)."""
    otype = encoding.get("otype")
    if not isinstance(otype, str) or "grid" not in otype.casefold():
        return encoding
    encoding = dict(encoding)
    log2_size = encoding.get("log2_hashmap_size", 15)  # read for this, not written: the grid keeps tcnn's default
    if isinstance(log2_size, int) and 0 <= log2_size < 64:  # else the grid's own check names it
        encoding.setdefault("base_resolution", 1 << (log2_size // 3))
    per_level, features = encoding.get("n_features_per_level", 2), encoding.get("n_features")
    levels = features // per_level if isinstance(features, int) and isinstance(per_level, int) and per_level > 0 \
        and features else encoding.get("n_levels", 16)
    base = encoding.get("base_resolution")
    if ("per_level_scale" not in encoding and isinstance(levels, int) and levels > 1
            and isinstance(base, int) and base > 0):
        encoding["per_level_scale"] = math.exp(math.log(FINEST_RESOLUTION / base) / (levels - 1))
    return encoding


def read_instant_ngp_config(source: str) -> dict[str, Any]:
    """``--pipeline.model.instant-ngp-config``: a .json file (comments and ``parent`` as Instant-NGP reads them) or
    JSON text -> the model settings it sets: encoding, network, direction_encoding, color_network, geo_feat_dim,
    rgb_loss, ema_decay, and ``optimizer`` (training keys for the trainer's optimizers, methods.py). Unchecked
    beyond the sections' shape: the model's checks follow. ValueError naming a key or otype without a meaning here."""
    if source.lstrip().startswith("{"):
        try:
            config = parse_text(source, json=True)
        except ValueError as error:
            raise config_error("instant_ngp_config", f"not valid JSON: {error}") from None
    else:
        config = load_config(source)
    config = check_mapping("instant_ngp_config", "instant_ngp_config", config, allow_none=False)
    check_keys("instant_ngp_config", config, ["loss", "optimizer", *FIELD_SECTIONS, *UNUSED_SECTIONS])
    missing = [section for section in FIELD_SECTIONS if section not in config]
    if missing:
        raise config_error("instant_ngp_config", f"missing {', '.join(map(repr, missing))} (an Instant-NGP NeRF config "
                                                 f"has {', '.join(FIELD_SECTIONS)})")
    sections = {name: dict(check_mapping(name, name, config[name], allow_none=False)) for name in FIELD_SECTIONS}
    network = sections["network"]
    outputs = check_int("network", "n_output_dims", network.pop("n_output_dims", DENSITY_OUTPUTS), 1)
    if network_class(network) is TcnnMLP:  # the rgb network reads every padded output (tcnn computes them all)
        outputs = round_up(outputs, ALIGNMENT)
    for name in ("network", "rgb_network"):
        activation = sections[name].get("output_activation", "None")
        if not isinstance(activation, str) or activation.casefold() != "none":
            raise config_error(name, f"'output_activation' {activation!r}: Instant-NGP's NeRF networks end in None "
                                     f"(exp for density and the logistic for colour follow; the field applies them)")
    for name in ("n_input_dims", "n_output_dims"):  # nerf_network.h sets them itself
        sections["rgb_network"].pop(name, None)
    network.pop("n_input_dims", None)
    sections["encoding"].pop("n_pos_dims", None)  # the testbed writes it into the config a snapshot holds
    sections["encoding"] = testbed_grid_defaults(sections["encoding"])
    loss = check_mapping("loss", "loss", config.get("loss"))
    training = training_from_tcnn({"otype": "L2", **loss}, config.get("optimizer"))  # the testbed's default: L2
    if training.get("solver") == "lion":
        raise config_error("optimizer", "Lion is trained by inr-fit only; ns-train takes Adam")
    loss = training.pop("loss")
    return {"encoding": sections["encoding"], "network": network, "direction_encoding": sections["dir_encoding"],
            "color_network": sections["rgb_network"], "geo_feat_dim": outputs - 1,
            "rgb_loss": NERF_LOSSES.get(loss, loss), "ema_decay": training.pop("ema_decay", None),
            "optimizer": training}
