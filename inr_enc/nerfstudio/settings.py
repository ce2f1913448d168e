"""The checks of the model's settings (InrNerfModelConfig's dicts, ``encoding_config`` and ``camera_optimizer``):
pure, nothing built, run when the config is made (what a scene settles for "auto" is scene_defaults.py's).
ns-train's command line is parsed by tyro into the config, so a bad setting stops ns-train there, before
nerfstudio writes the run's config.yml (and with it the output folder).

While tyro builds the config from a command line, a bad setting prints one line on stderr, ``ns-train: <message>``,
and exits with code 2 (tyro's code for rejected input) instead of tyro's framed error box; made in Python, the
config raises the ValueError as usual.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig

from ..config import check_mapping, load_config
from ..config.parsing import parse_text
from ..encoders import encoder_spec
from ..field.schema import FIELD_KEYS, RUN_KEYS, resolve_field
from ..networks import MLP, TcnnMLP
from ..networks.registry import network_class, resolve_network
from ..optim.ema import check_ema_decay
from ..optim.losses import check_loss
from .instant_ngp import color_input_encoding, read_instant_ngp_config
from .scene_defaults import CAMERA_OPTIMIZER_MODES, SAMPLERS, SCENE_CONTRACTIONS
from .scene_defaults import AutoCameraOptimizerConfig as AutoCameraOptimizerConfig  # config.yml files name it here


@contextmanager
def naming(setting: str, section: str | None = None) -> Iterator[None]:
    """A ValueError raised inside gets ``setting: `` in front of its message, in place of the schema's
    ``section: `` (the settings' dicts are the schema's encoding and network sections) or of nothing."""
    try:
        yield
    except ValueError as error:
        message = str(error)
        for prefix in (f"{setting}: ", f"{section or setting}: "):
            message = message.removeprefix(prefix)
        raise ValueError(f"{setting}: {message}") from None


def resolve_encoding_config(text: str, geo_feat_dim: int) -> dict[str, Any]:
    """``--pipeline.model.encoding-config``: JSON text, a .json/.yaml file or an inr_enc config name -> a resolved
    field config {"encoding"[, "network"]} for 3D positions, checked by the run-config schema (field/schema.py).

    The text holds an encoding config, or a field config with "encoding" (and optionally "network") keys; an
    inr-fit config's "training" and "seed" are accepted and unused."""
    with naming("encoding_config"):
        if text.lstrip().startswith("{"):
            try:
                config = parse_text(text, json=True)
            except ValueError as error:
                raise ValueError(f"not valid JSON: {error}") from None
        else:
            config = load_config(text)
        if not isinstance(config, dict) or not ("otype" in config or "encoding" in config):
            raise ValueError("expected an encoding config (with 'otype') or a field config (with 'encoding')")
        if "otype" in config:
            return {"encoding": resolve_field({"encoding": config}, 3, 1 + geo_feat_dim)["encoding"]}
        unknown = sorted(set(config) - set(RUN_KEYS))
        if unknown:
            raise ValueError(f"unknown field config keys {unknown}; expected {list(RUN_KEYS)}")
        resolved = resolve_field({key: config[key] for key in FIELD_KEYS if key in config}, 3, 1 + geo_feat_dim)
        return {key: resolved[key] for key in FIELD_KEYS if key in config}


def saved_as_built(state: dict[str, Any]) -> dict[str, Any]:
    """A config.yml's saved settings, as its run was built: one from before the ``sampler`` setting sampled through
    the occupancy grid (today's "auto" may choose proposal sampling); one from before the proposal render counts
    rendered with its training counts; one written before inr_enc 0.2.0 (no ``written_by``) named inr_enc's MLP
    with biases FullyFusedMLP/CutlassMLP (networks/tcnn_mlp.py ``class_for``)."""
    state = {"sampler": "occupancy", **state}
    if {"proposal_samples", "proposal_samples_per_ray"} <= state.keys() and "proposal_render_samples" not in state:
        state = {**state, "proposal_render_samples": state["proposal_samples"],
                 "proposal_render_samples_per_ray": state["proposal_samples_per_ray"]}
    network = state.get("network")
    if "written_by" in state or not isinstance(network, dict) or "bias" in network:
        return state
    try:
        tcnn = network_class(network) is TcnnMLP  # the otypes TcnnMLP is registered for
    except ValueError:  # an otype unknown here: building the model reports it
        return state
    return {**state, "network": {**network, "bias": True}} if tcnn else state


def check_field_settings(encoding: Any, network: Any, direction_encoding: Any, color_network: Any,
                         geo_feat_dim: int, appearance_embedding_dim: int = 0, layout: str = "inr_enc") -> None:
    """What EncodedRadianceField (field.py) builds from these settings, resolved without building anything:
    ValueError naming the setting and the problem (unknown otype or key, with a close match; a bad value)."""
    with naming("encoding"):
        position = encoder_spec(encoding, 3)
    with naming("network"):
        network = check_mapping("network", "network", network, allow_none=False)
        resolve_network({**network, "output_activation": "None"}, 1 + geo_feat_dim, position)
    with naming("color_network", "network"):
        color = {**check_mapping("network", "color_network", color_network, allow_none=False),
                 "output_activation": "Sigmoid"}
    if layout == "instant-ngp":  # the direction encoding reads [direction, appearance code]; any colour network
        with naming("direction_encoding", "encoding"):
            inputs = encoder_spec(color_input_encoding(direction_encoding, 1 + geo_feat_dim),
                                  1 + geo_feat_dim + 3 + appearance_embedding_dim)
        with naming("color_network", "network"):
            resolve_network(color, 3, inputs)
        return
    with naming("direction_encoding", "encoding"):
        direction = encoder_spec(direction_encoding, 3)
    with naming("color_network", "network"):
        MLP.resolve_config(color, direction.n_output_dims + geo_feat_dim + appearance_embedding_dim, 3)


def canonical_instant_ngp_field(config: Any) -> None:
    """The field sections an Instant-NGP config set, resolved (defaults filled in; keys a section kept from a parent
    of another otype and does not read dropped), so that config.yml shows what is built."""
    with naming("encoding"):
        position = encoder_spec(config.encoding, 3)
    with naming("network"):
        config.network = resolve_network(config.network, 1 + config.geo_feat_dim, position)
    config.encoding = position.config
    with naming("direction_encoding", "encoding"):
        n_inputs = 1 + config.geo_feat_dim + 3 + config.appearance_embedding_dim
        inputs = encoder_spec(color_input_encoding(config.direction_encoding, 1 + config.geo_feat_dim), n_inputs)
    with naming("color_network", "network"):
        config.color_network = resolve_network(config.color_network, 3, inputs)
    config.direction_encoding = inputs.config["nested"][-1]


def check_model_settings(config: Any) -> None:
    """An InrNerfModelConfig's settings checked, ``encoding_config`` and ``instant_ngp_config`` resolved into the
    settings they set (then None: config.yml holds the resolved settings); ValueError naming what is wrong."""
    if config.encoding_config is not None and config.instant_ngp_config is not None:
        raise ValueError("InrNerfModelConfig: give encoding_config or instant_ngp_config, not both")
    if config.encoding_config is not None:
        resolved = resolve_encoding_config(config.encoding_config, config.geo_feat_dim)
        config.encoding = dict(resolved["encoding"])
        if "network" in resolved:
            config.network = dict(resolved["network"])
        config.encoding_config = None
    from_instant_ngp = config.instant_ngp_config is not None
    if from_instant_ngp:
        with naming("instant_ngp_config"):
            settings = read_instant_ngp_config(config.instant_ngp_config)
        settings["field_layout"] = "instant-ngp"
        defaults = {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
                    for f in fields(config)}
        changed = [key for key in settings if key != "optimizer" and getattr(config, key) != defaults[key]]
        if changed:  # a flag the config would silently override
            raise ValueError(f"instant_ngp_config sets {', '.join(changed)}: leave those flags out (edit the config)")
        config.tcnn_optimizer = settings.pop("optimizer")
        for key, value in settings.items():
            setattr(config, key, value)
        config.instant_ngp_config = None
    config.rgb_loss = check_loss("InrNerfModelConfig", "rgb_loss", config.rgb_loss)  # inr-fit's rules, as it says them
    config.ema_decay = check_ema_decay("InrNerfModelConfig", config.ema_decay)
    checks = {"grid_resolution >= 1": config.grid_resolution >= 1,
              "grid_update_every >= 1": config.grid_update_every >= 1,
              "grid_warmup_steps >= 0": config.grid_warmup_steps >= 0, "geo_feat_dim >= 0": config.geo_feat_dim >= 0,
              "occupancy_threshold >= 0": config.occupancy_threshold >= 0,
              "render_step_size > 0": config.render_step_size is None or config.render_step_size > 0,
              "0 < early_stop_eps < 1": 0 < config.early_stop_eps < 1,
              "0 <= render_alpha_threshold < 1": 0 <= config.render_alpha_threshold < 1,
              "0 <= train_alpha_threshold < 1": config.train_alpha_threshold is None
              or 0 <= config.train_alpha_threshold < 1,
              "appearance_embedding_dim >= 0": config.appearance_embedding_dim >= 0,
              "distortion_loss_mult >= 0": config.distortion_loss_mult >= 0,
              "proposal_samples: one or more counts >= 1": len(config.proposal_samples) >= 1
              and all(count >= 1 for count in config.proposal_samples),
              "proposal_samples_per_ray >= 1": config.proposal_samples_per_ray >= 1,
              "proposal_render_samples: as many counts as proposal_samples, each >= 1":
                  len(config.proposal_render_samples) == len(config.proposal_samples)
                  and all(count >= 1 for count in config.proposal_render_samples),
              "proposal_render_samples_per_ray >= 1": config.proposal_render_samples_per_ray >= 1,
              f"sampler in ({', '.join(SAMPLERS)})": config.sampler in SAMPLERS,
              f"scene_contraction in ({', '.join(SCENE_CONTRACTIONS)})": config.scene_contraction in SCENE_CONTRACTIONS,
              **camera_optimizer_rules(config.camera_optimizer)}
    failed = [rule for rule, ok in checks.items() if not ok]
    if failed:
        raise ValueError(f"InrNerfModelConfig: need {', '.join(failed)}")
    if from_instant_ngp:  # resolving the sections checks them as check_field_settings would
        canonical_instant_ngp_field(config)
    else:
        check_field_settings(config.encoding, config.network, config.direction_encoding, config.color_network,
                             config.geo_feat_dim, config.appearance_embedding_dim, config.field_layout)


def camera_optimizer_rules(config: object) -> dict[str, bool]:
    """The rules a ``camera_optimizer`` setting must meet (rule -> met), for the model config's one-line error."""
    if not isinstance(config, CameraOptimizerConfig):
        return {"camera_optimizer: a CameraOptimizerConfig": False}
    def penalty(value: object) -> bool:  # a finite number >= 0
        return isinstance(value, (int, float)) and math.isfinite(value) and value >= 0

    return {f"camera_optimizer.mode in ({', '.join(CAMERA_OPTIMIZER_MODES)})": config.mode in CAMERA_OPTIMIZER_MODES,
            "camera_optimizer.trans_l2_penalty >= 0": penalty(config.trans_l2_penalty),
            "camera_optimizer.rot_l2_penalty >= 0": penalty(config.rot_l2_penalty)}


def _constructed_by_tyro(config: object) -> bool:
    """Whether tyro (ns-train's command-line parser) itself called ``config``'s ``__init__``: only the frame that
    constructs the config counts, so code that merely runs inside a tyro-parsed program keeps its ValueError."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is config):
        frame = frame.f_back
    caller = frame.f_back if frame is not None else None
    module = (caller.f_globals.get("__name__") or "") if caller is not None else ""
    return module == "tyro" or module.startswith("tyro.")


@contextmanager
def command_line_errors(config: object) -> Iterator[None]:
    """A ValueError raised inside ``config``'s ``__post_init__`` while tyro builds it from a command line:
    ``<prog>: <message>`` on stderr, exit code 2 (tyro would frame the message in a box, its internal field path in
    front); otherwise raised unchanged."""
    try:
        yield
    except ValueError as error:
        if not _constructed_by_tyro(config):
            raise
        print(f"{Path(sys.argv[0]).name or 'ns-train'}: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
