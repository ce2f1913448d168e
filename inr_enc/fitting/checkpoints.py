"""checkpoint.pt: one run's model, optimiser, schedule, batch generator and curve, read and written for the fit loop
(loop.py). A model of a group (a FieldBatch) is saved as its run alone would save it, with its slice of the group's
optimiser state, so any member resumes alone and any single run's checkpoint can join a group.

Groups saved by inr_enc up to 0.4.0 (commit 8e693f1) as one file, ``OUT/.group-<first run>-<models>.pt``, are still
read (:func:`load_group_file`): the group continues and saves its models' checkpoints from then on.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import torch

from ..encoders.backends import backends_used
from ..field.batch import FieldBatch
from ..io import atomic_path
from ..version import __version__
from .image_formats import first_line

# state-dict keys renamed since a checkpoint was written: the separable model kept W at the top level before it
# became the Separable network (commit 0e5031c)
RENAMED_KEYS = {"weight": "network.weight"}
GROUP_CHECKPOINTS = ".group-*.pt"  # the legacy group files, OUT/.group-<first run>-<models>.pt


def provenance(model: torch.nn.Module, device: torch.device) -> dict[str, Any]:
    """What produced a run's numbers: the implementation each encoder of ``model`` last ran on (tcnn, cpp, triton
    or torch, by module name), the device and torch's thread count, and the inr_enc, torch and Python versions."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {"encoders": backends_used(model), "device": str(device), "device_name": name,
            "threads": torch.get_num_threads(), "inr_enc": __version__, "torch": str(torch.__version__),
            "python": platform.python_version()}


def error_line(error: BaseException) -> str:
    """The error's type and first line, cut at 240 characters (a garbage file's unpickling error quotes it)."""
    return first_line(error)[:240]


def read_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    """The payload of checkpoint.pt at ``path``; ValueError (one line) for a damaged file."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # truncated, empty or garbage: torch raises many types
        raise ValueError(f"{path}: not a readable checkpoint ({error_line(error)})") from None


def write_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def saved_step(path: Path) -> int | None:
    """The step of the checkpoint at ``path`` (read without loading its tensors); None if it does not read."""
    try:
        step = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("step")
    except Exception:
        return None
    return step if isinstance(step, int) else None


def model_state(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The model's state dict of a checkpoint payload, keys renamed since (RENAMED_KEYS) under today's names."""
    return {RENAMED_KEYS.get(key, key): value for key, value in payload["model"].items()}


def member_optimizer_state(batch: FieldBatch, optimizer: torch.optim.Optimizer, m: int, model: torch.nn.Module,
                           single: torch.optim.Optimizer) -> dict[str, Any]:
    """Model ``m``'s share of the group ``optimizer`` over ``batch`` as the state dict of ``single``, the optimiser
    its run alone has over ``model`` (``batch.field(m)``): per element (moments, lazy step counts) its slice,
    Adam's one step count as is; the groups' learning rates."""
    for group, own in zip(optimizer.param_groups, single.param_groups):
        own["lr"], own["initial_lr"] = group["lr"], group["initial_lr"]
    for name, param in model.named_parameters():
        stacked = batch.stacked(name)
        state = optimizer.state.get(stacked)
        if state:
            single.state[param] = {key: value.reshape(batch.n_models, -1)[m].reshape(param.shape).clone()
                                   if value.numel() == stacked.numel() else value.clone()
                                   for key, value in state.items()}
    return single.state_dict()


def stack_optimizer_states(batch: FieldBatch, optimizer: torch.optim.Optimizer, models: list[torch.nn.Module],
                           singles: list[torch.optim.Optimizer]) -> None:
    """The inverse of :func:`member_optimizer_state`: each model's optimiser ``singles[m]`` (over ``models[m]``, the
    checkpoint loaded) into the group ``optimizer`` over ``batch``; ValueError when their states differ in kind."""
    for group, own in zip(optimizer.param_groups, singles[0].param_groups):
        group["lr"], group["initial_lr"] = own["lr"], own["initial_lr"]
    for name, _ in models[0].named_parameters():
        stacked = batch.stacked(name)
        states = [single.state.get(model.get_parameter(name)) for model, single in zip(models, singles)]
        if not any(states):
            continue
        if not all(states) or any(state.keys() != states[0].keys() for state in states):
            raise ValueError(f"the models' optimiser states of {name} differ (some have taken no step)")
        optimizer.state[stacked] = {
            key: torch.stack([state[key].reshape(-1) for state in states]).reshape(stacked.shape)
            if value.numel() * batch.n_models == stacked.numel() else value for key, value in states[0].items()}


def saved_group_files(path: Path) -> list[str]:
    """The input paths of the legacy group file at ``path`` (read without loading its tensors); [] for a file that
    is not one."""
    try:
        names = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("names")
    except Exception:
        return []
    return names if isinstance(names, list) and all(isinstance(name, str) for name in names) else []


def load_group_file(fitter: Any, path: Path) -> None:
    """Continue a legacy group file in ``fitter`` (a loop.Fitter over a FieldBatch); ValueError if it is not this
    group's (other files, or since changed; another config) or does not load (then build the fitter again)."""
    try:
        payload = torch.load(path, map_location=fitter.device, weights_only=True)
    except Exception:
        raise ValueError(f"{path}: not a readable group checkpoint") from None
    config = payload.get("config")
    if isinstance(config, dict):  # written before runs had a backend key: they ran "auto"
        config = {"backend": "auto", **config}
    if payload.get("tasks") != [run["task"] for run in fitter.runs] or config != fitter.runs[0]:
        raise ValueError(f"{path}: a group of other files (or since changed) or another config")
    try:
        fitter.model.load_state_dict(payload["model"])
        fitter.optimizer.load_state_dict(payload["optimizer"])
        fitter.scheduler.load_state_dict(payload["scheduler"])
        fitter.batches.set_state(payload["batches"])
        fitter.set_states([dict(state) for state in payload["states"]])
        for m, step in dict(payload["diverged"]).items():
            fitter.diverge(m, step, "the loss or evaluation error was not finite")
    except Exception:
        raise ValueError(f"{path}: does not load into this group") from None
