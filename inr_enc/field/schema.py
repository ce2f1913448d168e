"""The run-config schema: every check of an ``inr-fit`` run (task, encoding, network, training, seed) in one
place, done before any output file is touched or any model tensor allocated.

A run config has the sections ``encoding`` (default Identity), ``network`` (default MLP), ``training`` and ``seed``;
a saved run (config.yaml next to a checkpoint) also has ``task`` and ``config_name``. The encoding and network are
resolved through their registries' pure ``resolve_config``; the field config alone (``resolve_field``) is what the
nerfstudio plugin and ``Field`` use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_keys,
    check_mapping,
    check_seed,
    config_error,
)
from ..config.memory import check_memory, format_bytes
from ..encoders.backends import BACKENDS, check_backend
from ..encoders.base import EncoderSpec
from ..encoders.registry import encoder_class, encoder_spec
from ..networks.base import Network
from ..networks.registry import network_class, resolve_network
from ..optim.ema import check_ema_decay
from ..optim.losses import check_loss
from .tcnn_sections import EXPONENTIAL_DECAY, LION, training_from_tcnn

# loss, optimizer: tcnn's sections
RUN_KEYS = ("encoding", "network", "training", "seed", "backend", "loss", "optimizer")
SAVED_RUN_KEYS = ("task", "config_name", *RUN_KEYS, "provenance")  # provenance: written with the run, not read
FIELD_KEYS = ("encoding", "network")
DEFAULT_ENCODING = {"otype": "Identity"}

TRAINING_DEFAULTS: dict[str, Any] = {
    "steps": 2000, "batch_size": None, "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "loss": "MSE",
    "schedule": "constant", "eval_every": 50, "checkpoint_every": 100, "eval_chunk": 65536,
    "solver": "adam", "ridge": 0.0, "lazy_tables": True,
    # tcnn's Adam l2_reg (added to the gradient of the network's weight matrices), its Ema wrapper (the evaluated and
    # saved weights are the bias-corrected moving average; None: off) and its ExponentialDecay (schedule exponential)
    "l2_reg": 0.0, "ema_decay": None, **EXPONENTIAL_DECAY,
    "weight_decay": 0.0,  # Lion's decoupled weight decay (solver lion)
}
LION_DEFAULTS = {"lr": LION["learning_rate"], "betas": [LION["beta1"], LION["beta2"]]}  # solver lion: the paper's
SCHEDULES = ("constant", "cosine", "exponential")
SOLVERS = ("adam", "lion", "closed-form")  # closed-form: a linear model's least-squares solve instead of steps
MAX_LR, MAX_EPS, MAX_RIDGE = 10.0, 1.0, 1e6  # Adam's lr and eps, the closed-form solve's ridge
ADAM_COPIES = 4  # a parameter, its gradient and Adam's two moments
EMA_COPIES = 2  # tcnn's Ema: the average, and the raw weights kept while it is evaluated
FORWARD_BACKWARD = 3  # per activation: the value kept for the backward, its gradient and a temporary


def resolve_training(config: Any) -> dict[str, Any]:
    """Fill in and check the ``training`` section; raises ValueError naming a bad key or value."""
    given = check_mapping("training", "training", config) or {}
    config = {**TRAINING_DEFAULTS, **(LION_DEFAULTS if given.get("solver") == "lion" else {}), **given}
    check_keys("training", config, TRAINING_DEFAULTS)
    betas = config["betas"]
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2):
        raise config_error("training", f"'betas' must be a pair of numbers, got {betas!r}")
    betas = [check_float("training", "betas", b, 0.0) for b in betas]
    if not all(b < 1 for b in betas):  # Adam's moments decay with each beta
        raise config_error("training", f"'betas' must both be in [0, 1), got {betas}")
    batch = config["batch_size"]
    return {
        "steps": check_int("training", "steps", config["steps"], 0),
        "batch_size": None if batch is None else check_int("training", "batch_size", batch, 1),
        "lr": check_float("training", "lr", config["lr"], 0.0, low_inclusive=False, high=MAX_LR),
        "betas": betas,
        "eps": check_float("training", "eps", config["eps"], 0.0, high=MAX_EPS),
        "loss": check_loss("training", "loss", config["loss"]),
        "schedule": check_choice("training", "schedule", config["schedule"], SCHEDULES),
        "eval_every": check_int("training", "eval_every", config["eval_every"], 1),
        "checkpoint_every": check_int("training", "checkpoint_every", config["checkpoint_every"], 1),
        "eval_chunk": check_int("training", "eval_chunk", config["eval_chunk"], 1),
        "solver": check_choice("training", "solver", config["solver"], SOLVERS),
        "ridge": check_float("training", "ridge", config["ridge"], 0.0, high=MAX_RIDGE),
        "lazy_tables": check_bool("training", "lazy_tables", config["lazy_tables"]),
        "l2_reg": check_float("training", "l2_reg", config["l2_reg"], 0.0, high=MAX_LR),
        "ema_decay": check_ema_decay("training", config["ema_decay"]),
        "decay_base": check_float("training", "decay_base", config["decay_base"], 0.0, high=1.0),
        "decay_start": check_int("training", "decay_start", config["decay_start"], 0),
        "decay_interval": check_int("training", "decay_interval", config["decay_interval"], 1),
        "decay_end": check_int("training", "decay_end", config["decay_end"], 0),
        "weight_decay": _lion_only(config),
    }


def _lion_only(config: dict[str, Any]) -> float:
    """Lion's weight_decay, which only Lion reads (and Lion takes no l2_reg: its sign update would undo it; nor eps
    or lazy tables, which it leaves unread); lr * weight_decay below 1 (else each step flips the weights' sign)."""
    weight_decay = check_float("training", "weight_decay", config["weight_decay"], 0.0, high=MAX_LR)
    if weight_decay * float(config["lr"]) >= 1:
        raise config_error("training", f"'weight_decay' x 'lr' must be below 1, got {weight_decay} x {config['lr']}")
    if config["solver"] != "lion" and weight_decay:
        raise config_error("training",
                           f"'weight_decay' is Lion's (solver lion), not {config['solver']}'s; Adam: l2_reg")
    if config["solver"] == "lion" and config["l2_reg"]:
        raise config_error("training", "solver lion takes 'weight_decay' (decoupled), not 'l2_reg'")
    return weight_decay


def resolve_seed(value: Any) -> int:
    return check_seed("config", value)


def resolve_backend(value: Any, encoding: Mapping[str, Any]) -> str:
    """The run's ``backend`` (encoders/backends.py BACKENDS; None: "auto") for every encoder of the resolved
    ``encoding``, nested ones included; ValueError naming an encoder that has no implementation of it and those it
    has. As building passes it on: an encoder that runs tcnn itself runs its nested ones inside tcnn."""
    backend = check_choice("config", "backend", "auto" if value is None else value, BACKENDS)
    pending = [(dict(encoding), backend)]
    while pending:
        config, asked = pending.pop()
        cls = encoder_class(config.get("otype"))
        check_backend(cls, asked)
        if cls.passes_backend_to_nested:
            inner = cls.nested_backend(asked)
            nested = config.get("nested")
            pending += [(n, inner) for n in (nested if isinstance(nested, list) else [nested])
                        if isinstance(n, Mapping)]
    return backend


@dataclass(frozen=True)
class FieldSpec:
    """A resolved field config: the encoding's spec and the network's class and canonical config (no tensors).
    ``Field`` builds from it without checking anything again."""

    encoding: EncoderSpec
    network_cls: type[Network]
    network: dict[str, Any]
    n_output_dims: int

    @classmethod
    def of_resolved(cls, config: Mapping[str, Any], n_input_dims: int, n_output_dims: int) -> FieldSpec:
        """The spec of ``config``'s ``encoding`` and ``network`` as :func:`resolve_field` or :func:`resolve_run`
        returned them (canonical: nothing is checked again)."""
        encoding = encoder_class(config["encoding"]["otype"]).spec_of(config["encoding"], n_input_dims)
        return cls(encoding, network_class(config["network"]), config["network"], n_output_dims)

    @property
    def config(self) -> dict[str, dict[str, Any]]:
        return {"encoding": self.encoding.config, "network": self.network}

    def parameter_count(self) -> int:
        """Elements of the encoder's and the network's parameters and buffers."""
        spec = self.encoding
        return (spec.cls.parameter_count(spec.n_input_dims, spec.config)
                + self.network_cls.parameter_count(spec.n_output_dims, self.n_output_dims, self.network, spec))


def field_spec(config: Any, n_input_dims: int, n_output_dims: int) -> FieldSpec:
    """A field config ``{"encoding": ..., "network": ...}`` resolved for ``n_input_dims`` -> ``n_output_dims``
    (encoding default Identity, network default MLP), without building anything; ValueError naming the problem."""
    config = check_mapping("field", "field config", config, allow_none=False)
    check_keys("field", config, FIELD_KEYS)
    encoding = check_mapping("field", "encoding", config.get("encoding")) or default_encoding(config.get("network"))
    spec = encoder_spec(encoding, n_input_dims)
    network = resolve_network(config.get("network"), n_output_dims, spec)
    return FieldSpec(spec, network_class(network), network, n_output_dims)


def resolve_field(config: Any, n_input_dims: int, n_output_dims: int) -> dict[str, dict[str, Any]]:
    """:func:`field_spec`'s canonical config ``{"encoding": ..., "network": ...}``."""
    return field_spec(config, n_input_dims, n_output_dims).config


def default_encoding(network: Any) -> dict[str, Any]:
    """The encoding of a config that names none: the network's own default (Separable: ShiftedBasis), else Identity."""
    return dict(network_class(network).default_encoding or DEFAULT_ENCODING)


def _encoding_with_seed(encoding: dict[str, Any], seed: int) -> dict[str, Any]:
    """The encoding config with ``seed`` filled in where it takes one and has none, nested encodings included."""
    encoding = dict(encoding)
    if "seed" in encoder_class(encoding.get("otype")).defaults:
        encoding.setdefault("seed", seed)
    nested = encoding.get("nested")
    if isinstance(nested, Mapping):
        encoding["nested"] = _encoding_with_seed(dict(nested), seed)
    elif isinstance(nested, list):
        encoding["nested"] = [_encoding_with_seed(dict(n), seed) if isinstance(n, Mapping) else n for n in nested]
    return encoding


def estimate_run_memory(run: Mapping[str, Any], n_input_dims: int, n_output_dims: int,
                        n_samples: int) -> dict[str, int]:
    """:func:`estimate_memory` of a resolved run (``encoding``, ``network``, ``training``)."""
    return estimate_memory(FieldSpec.of_resolved(run, n_input_dims, n_output_dims), run["training"], n_samples)


def estimate_memory(field: FieldSpec, training: Mapping[str, Any], n_samples: int) -> dict[str, int]:
    """Approximate bytes of a resolved field and training section on ``n_samples`` samples, by part:
    - "parameters": float32 parameters and buffers of the encoding and network, times ADAM_COPIES with Adam (the
      gradient and two moments), plus EMA_COPIES with ema_decay;
    - "training step": the batch (every sample where batch_size is null) times the floats per sample (coordinates,
      encoding, the network's ``activation_width``), FORWARD_BACKWARD times, plus activations that do not grow with
      the batch (``Encoder.fixed_activation_count``, LatentGrid's feature map);
      With the closed-form solver: no steps, the solve's float64 copies of the signal's values;
    - "evaluation": one chunk of eval_chunk samples, forward only;
    - "signal": coordinates, values and a prediction per sample.
    An estimate to refuse what cannot fit, not a promise that the rest does: allocator overhead, a backend's
    workspace and per-encoder temporaries are not counted."""
    spec, network, net_config, n_params = field.encoding, field.network_cls, field.network, field.parameter_count()
    n_input_dims, n_output_dims = spec.n_input_dims, field.n_output_dims
    fixed = spec.cls.fixed_activation_count(n_input_dims, spec.config)
    width = (n_input_dims + spec.n_output_dims
             + network.activation_width(spec.n_output_dims, n_output_dims, net_config, spec))
    batch = n_samples if training["batch_size"] is None else min(training["batch_size"], n_samples)
    steps = training["solver"] != "closed-form"  # Adam or Lion (counted as Adam: one moment fewer)
    step = 4 * FORWARD_BACKWARD * (batch * width + fixed) if steps else 2 * 8 * n_samples * n_output_dims
    copies = (ADAM_COPIES + (EMA_COPIES if training.get("ema_decay") is not None else 0)) if steps else 1
    return {"parameters": 4 * copies * n_params, "training step": step,
            "evaluation": 4 * (min(training["eval_chunk"], n_samples) * width + fixed),
            "signal": 4 * n_samples * (n_input_dims + 2 * n_output_dims)}


def check_task(task: Any) -> dict[str, Any]:
    """The task section: a mapping with ``kind`` (a task name: fitting/tasks/), ``path`` and ``train_split``."""
    task = check_mapping("task", "task", task, allow_none=False)
    if not isinstance(task.get("kind"), str):
        raise config_error("task", f"'kind' must be a task name, got {task.get('kind')!r}")
    if not isinstance(task.get("path"), str):
        raise config_error("task", f"'path' must be a file path, got {task.get('path')!r}")
    check_bool("task", "train_split", task.get("train_split", False))
    return task


def resolve_run(config: Any, task: Mapping[str, Any], n_input_dims: int, n_output_dims: int,
                coordinate_shape: list[int], *, seed: Any = None, backend: str | None = None,
                training: Mapping[str, Any] | None = None,
                config_name: str | None = None, saved: bool = False, max_memory: int | None = None) -> dict[str, Any]:
    """The whole run, resolved: ``{"task", "config_name", "seed", "backend", "encoding", "network", "training"}``.

    ``config``: a run config (sections RUN_KEYS), or with ``saved`` a saved run (SAVED_RUN_KEYS, its own task and
    config_name). ``task``: the task section (kind, path, train_split and what the task reports of its signal);
    ``n_input_dims``/``n_output_dims``: the signal's coordinate and value dims; ``coordinate_shape``: its samples
    per coordinate dim (sets an encoding's signal-sized key left null, e.g. LatentGrid's resolution).
    ``seed``, ``backend`` and ``training`` override the config's. Raises ValueError naming the first problem, and when
    the run's approximate memory (``estimate_run_memory``) passes ``max_memory`` bytes (default
    config.memory.memory_limit(): INR_ENC_MAX_MEMORY, else this machine's physical memory).
    """
    config = check_mapping("config", "config", config, allow_none=False)
    check_keys("config", config, SAVED_RUN_KEYS if saved else RUN_KEYS)
    seed = resolve_seed(seed if seed is not None else config.get("seed", 0))
    network = check_mapping("config", "network", config.get("network"))
    encoding = check_mapping("config", "encoding", config.get("encoding")) or default_encoding(network)
    encoding = _encoding_with_seed(encoding, seed)
    sized = encoder_class(encoding.get("otype")).sized_by_signal
    if sized is not None and encoding.get(sized) is None:
        encoding[sized] = list(coordinate_shape)
    if "seed" in network_class(network).defaults:
        network.setdefault("seed", seed)
    field = field_spec({"encoding": encoding, "network": network}, n_input_dims, n_output_dims)
    backend = resolve_backend(backend if backend is not None else config.get("backend"), field.encoding.config)
    from_tcnn = training_from_tcnn(config.get("loss"), config.get("optimizer"))
    own = check_mapping("config", "training", config.get("training"))
    if saved and own is not None and own.get("ema_decay") == 0:  # saved by 0.4.0, which took 0: no average, i.e. null
        own = {**own, "ema_decay": None}
    twice = sorted(set(from_tcnn) & set(own))
    if twice:
        raise config_error("config", f"training key(s) {', '.join(twice)} given both in 'training' and by tcnn's "
                                     "'loss'/'optimizer' sections; give each once")
    training = resolve_training({**own, **from_tcnn, **(training or {})})
    if training["solver"] == "closed-form" and not field.network_cls.solves_closed_form:
        raise config_error("training",
                           "solver 'closed-form' needs network otype Separable (a model linear in its weights)")
    if training["solver"] == "closed-form" and (training["l2_reg"] or training["ema_decay"] is not None):
        raise config_error("training",
                           "solver 'closed-form' takes no steps: 'l2_reg' and 'ema_decay' do not apply (use 'ridge')")
    parts = estimate_memory(field, training, math.prod(coordinate_shape))
    described = ", ".join(f"{part} {format_bytes(size)}" for part, size in parts.items())
    check_memory(f"run: parameters, a training step, evaluation and the signal ({described}) together",
                 sum(parts.values()), max_memory)
    return {"task": check_task(task),
            "config_name": config_name if config_name is not None else config.get("config_name"),
            "seed": seed, "backend": backend, **field.config, "training": training}
