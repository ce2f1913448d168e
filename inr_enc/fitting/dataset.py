"""``inr-fit images DIR`` and ``inr-fit audios DIR``: one config over every file of a folder (or a glob pattern).

Each file is fitted into a run folder of its own directly in ``out`` (named after the file: inputs.py), as
``inr-fit image`` fits one, and ``summary.csv`` and ``summary.md`` in ``out`` list per file its status, PSNR,
SSIM, bits per pixel (or sample), seconds and steps, with mean ± std (sample standard deviation) over the files
that have results.

Resumable: a file whose folder holds a finished run of the same resolved config and the same input bytes is
skipped (its metrics read back), a changed input is refused unless ``overwrite``, an interrupted one (config and
checkpoint, no metrics.json) resumes, and a file whose fit raises anything (unreadable, refused by the config,
diverged, a crash) is recorded as failed while the others go on; Ctrl-C stops.

Under torchrun (``WORLD_SIZE`` > 1) rank r fits files r, r + W, r + 2W, ... of the sorted list; the ranks' rows
are gathered (gloo on CPU, NCCL on CUDA, where each rank takes device ``LOCAL_RANK``) and rank 0 writes the summary.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from tqdm import tqdm

from .batched import GroupUnloadable, fit_group, group_unavailable_reason, plan_groups
from .checkpoints import GROUP_CHECKPOINTS, saved_group_files, saved_step
from .inputs import check_unchanged, run_names, same_input_and_facts
from .outputs import METRICS_FILE
from .run import fit_run, read_task, resolve_for, resolve_task_run
from .run_folder import CHECKPOINT, holds_run, read_config
from .stops import Diverged
from .summary import check_replaceable, finite_numbers, summary_row, write_summary
from .tasks import task_info

NO_MEMORY_LIMIT = 1 << 62  # bytes
GATHER_TIMEOUT = datetime.timedelta(days=7)  # ranks wait this long for the slowest one's share


@dataclass(frozen=True)
class Ranks:
    """This process's place among torchrun's: rank, world size, local rank (0, 1, 0 without torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_environment(cls) -> Ranks:
        values = {}
        for name, default in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)):
            text = os.environ.get(name, str(default))
            if not text.strip().isdigit():
                raise ValueError(f"environment variable {name}={text!r}: expected a whole number (torchrun sets it)")
            values[name] = int(text)
        if values["WORLD_SIZE"] < 1 or values["RANK"] >= values["WORLD_SIZE"]:
            raise ValueError(f"RANK {values['RANK']} and WORLD_SIZE {values['WORLD_SIZE']}: "
                             f"need 0 <= RANK < WORLD_SIZE")
        return cls(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])


def _as_saved(run: dict[str, Any]) -> Any:
    """``run`` as config.yaml holds it once read back (tuples become lists), to compare with a saved run."""
    return yaml.safe_load(yaml.safe_dump(run, sort_keys=False))


def plan_file(kind: str, config: dict[str, Any], options: dict[str, Any], path: Path, folder: Path, overwrite: bool
              ) -> tuple[str, dict[str, Any], Any, dict[str, Any] | None]:
    """What fitting one file into ``folder`` means -> (status "fitted" | "resumed" | "skipped", its run, its task,
    the metrics of a skipped one). ``options``: train_split and resolve ("resolve_run"'s keywords). A folder
    holding another run is refused (ValueError) unless ``overwrite``."""
    run, task = resolve_task_run(config, kind, os.path.abspath(path), options["train_split"], **options["resolve"])
    if holds_run(folder) and not overwrite:
        raw = read_config(folder)
        try:  # the saved run resolved as today (keys added since it was written take their defaults)
            saved = resolve_for(raw, task, options["train_split"], saved=True, max_memory=NO_MEMORY_LIMIT)
        except ValueError:
            saved = None
        saved_task = raw.get("task") if isinstance(raw, dict) else None
        same_signal = same_input_and_facts(_as_saved(saved_task), _as_saved(run["task"]))  # as written
        if saved is None or not same_signal or _as_saved(saved) != _as_saved(run):
            raise ValueError(f"{folder} holds a run of another config or signal; pass --overwrite to replace it")
        check_unchanged(saved_task, run["task"], folder)
        if (folder / METRICS_FILE).is_file():
            return "skipped", saved, task, json.loads((folder / METRICS_FILE).read_text())
        return "resumed", saved, task, None
    return "fitted", run, task, None


def fit_file(kind: str, config: dict[str, Any], options: dict[str, Any], path: Path, folder: Path,
             device: torch.device, overwrite: bool) -> tuple[str, dict[str, Any]]:
    """Fit one file into ``folder`` (:func:`plan_file`; ``options`` also: vis, pictures) -> (status, its metrics)."""
    status, run, task, metrics = plan_file(kind, config, options, path, folder, overwrite)
    if metrics is not None:
        return status, metrics
    return status, fit_run(run, task, folder, device, resume=status == "resumed", quiet=True, overwrite=overwrite,
                           vis=options["vis"], pictures=options.get("pictures", True))


def check_config(kind: str, config: dict[str, Any], options: dict[str, Any], files: list[Path]) -> None:
    """Resolve ``config`` on the first file that reads, before anything is fitted, so a bad key or value is one
    error rather than one per file (ValueError); no memory limit here (a file too large is its own failure)."""
    for file in files:
        try:
            task = read_task(kind, str(file), options["train_split"])
        except ValueError:  # a file that cannot be fitted is recorded when its turn comes
            continue
        run = resolve_for(config, task, options["train_split"], **options["resolve"], max_memory=NO_MEMORY_LIMIT)
        reason = group_unavailable_reason([task], [run]) if options.get("together", 1) > 1 else None
        if reason is not None:
            raise ValueError(f"--together: config {run['config_name']!r} cannot be fitted in batches: {reason}")
        return


def gather_rows(rows: list[tuple[int, dict]], ranks: Ranks) -> list[dict]:
    """Every rank's (file index, row) pairs -> all rows in file order (on every rank)."""
    if ranks.world > 1:
        gathered: list[Any] = [None] * ranks.world
        torch.distributed.all_gather_object(gathered, rows)
        rows = [pair for part in gathered for pair in part]
    return [row for _, row in sorted(rows, key=lambda pair: pair[0])]


@contextmanager
def rank_group(device: torch.device) -> Iterator[tuple[Ranks, torch.device]]:
    """This process's :class:`Ranks` and device (under torchrun on CUDA: GPU LOCAL_RANK), inside the ranks' process
    group (gloo on CPU, NCCL on CUDA) when there are several. Ranks wait for each other only when rows are gathered,
    after fitting their shares, so the group's timeout is long (a share may take days)."""
    ranks = Ranks.from_environment()
    if ranks.world == 1:
        yield ranks, device
        return
    if device.type == "cuda":
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
    torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=GATHER_TIMEOUT)
    try:
        yield ranks, device
    finally:
        torch.distributed.destroy_process_group()


def from_rank_0(ranks: Ranks, compute: Callable[[], Any]) -> Any:
    """``compute()`` on rank 0, its value (or the ValueError it raised) on every rank: what depends on the disk's
    state at the start (run names) or is held once (the folder run's lock) is decided once for all ranks."""
    value, error = None, None
    if ranks.rank == 0:
        try:
            value = compute()
        except ValueError as raised:
            error = str(raised)
    if ranks.world > 1:
        box = [(value, error)]
        torch.distributed.broadcast_object_list(box, src=0)
        value, error = box[0]
    if error is not None:
        raise ValueError(error)
    return value


def _jobs(kind: str, options: dict[str, Any], files: list[Path], folders: list[Path], out: Path, mine: list[int],
          overwrite: bool, together: int) -> list[tuple[list[int], Path | None]]:
    """``mine`` as jobs (file indices, a legacy group file): first the groups an interrupted run of inr_enc up to
    0.4.0 saved in ``out`` (checkpoints.py) whatever ``together`` is now, then the files with no run in their folder
    (or all, with ``overwrite``) and the interrupted ones, in groups of up to ``together`` that
    :func:`group_unavailable_reason` allows, of one checkpoint step; the rest one by one (skipped, resumed, refused
    or failing as :func:`fit_file` finds them). A saved group that cannot continue (a file gone, or fitted since)
    is removed by the rank of its first file; one whose files this run does not all select is kept for a run that
    does."""
    has_run = [not overwrite and holds_run(f) for f in folders]
    index = {os.path.abspath(file): i for i, file in enumerate(files)}
    jobs: list[tuple[list[int], Path | None]] = []
    for path in sorted(out.glob(GROUP_CHECKPOINTS)):
        names = saved_group_files(path)
        members = [index.get(os.path.abspath(name)) for name in names]
        if members and None not in members and all(i in mine and not has_run[i] for i in members):
            jobs.append((members, path))  # type: ignore[arg-type]
        elif names and (not all(map(os.path.isfile, names)) or any(i is not None and has_run[i] for i in members)) \
                and (members[0] in mine or members[0] is None and 0 in mine):
            path.unlink(missing_ok=True)  # a file gone or fitted since: the group cannot continue
    saved = {i for group, _ in jobs for i in group}
    tasks, steps = {}, {}
    for i in mine:
        if together == 1 or i in saved or has_run[i] and (folders[i] / METRICS_FILE).is_file():
            continue
        steps[i] = saved_step(folders[i] / CHECKPOINT) if has_run[i] else 0
        try:
            tasks[i] = read_task(kind, str(files[i]), options["train_split"])
        except ValueError:  # fit_file records why
            continue
    candidates = [i for i in tasks if steps[i] is not None]
    jobs += [(group, None) for group in plan_groups(candidates, lambda i, j: steps[i] == steps[j] and
                                                    group_unavailable_reason([tasks[i], tasks[j]]) is None, together)
             if len(group) > 1]
    grouped = {i for group, _ in jobs for i in group}
    return jobs + [([i], None) for i in mine if i not in grouped]


def _fit_job(kind: str, config: dict[str, Any], options: dict[str, Any], files: list[Path], folders: list[Path],
             job: list[int], legacy: Path | None, device: torch.device, overwrite: bool) -> list[Any]:
    """Per file of ``job``: (status, metrics) or the exception its fit ended with. A group's files are read
    here (one group's signals are held at a time), each on its own: one that fails is that file's error."""
    def alone(i: int) -> Any:
        try:
            return fit_file(kind, config, options, files[i], folders[i], device, overwrite)
        except Exception as error:  # recorded, whatever it is (Ctrl-C is not an Exception); the others go on
            return error

    if len(job) == 1:
        return [alone(job[0])]
    results: list[Any] = [None] * len(job)
    plans, members = [], []
    for k, i in enumerate(job):
        try:
            plan = plan_file(kind, config, options, files[i], folders[i], overwrite)
        except Exception as error:
            results[k] = error
            continue
        if plan[3] is not None:
            results[k] = plan[0], plan[3]
        else:
            plans.append(plan)
            members.append(k)
    if plans:
        statuses, runs, tasks, _ = zip(*plans)
        try:
            fitted = fit_group(list(runs), list(tasks), [folders[job[k]] for k in members],
                               [status == "resumed" for status in statuses], device, overwrite,
                               options.get("pictures", True), legacy)
        except GroupUnloadable:  # a checkpoint that does not join the group: its files each on their own
            for k in members:
                results[k] = alone(job[k])
            return results
        except Exception as error:
            fitted = [error] * len(members)
        for k, status, result in zip(members, statuses, fitted):
            results[k] = (status, result) if isinstance(result, dict) else result
    return results


def fit_folder(kind: str, files: list[Path], config: dict[str, Any], options: dict[str, Any], out: Path,
               device: torch.device, ranks: Ranks, overwrite: bool = False,
               quiet: bool = False) -> list[dict[str, Any]]:
    """Fit ``files`` (:func:`list_signals`) with ``config`` into ``out``/<name>/ (inputs.py ``run_names``), this
    rank's share under torchrun (inside :func:`rank_group`), and write the summary (rank 0) -> the rows, in file
    order."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    def names_in_out() -> list[str]:
        check_replaceable(out, overwrite)
        return run_names(files, out)

    names = from_rank_0(ranks, names_in_out)
    folders = [out / name for name in names]
    mine = list(range(ranks.rank, len(files), ranks.world))
    jobs = _jobs(kind, options, files, folders, out, mine, overwrite, options.get("together", 1))
    rows: list[tuple[int, dict]] = []
    psnrs: list[float] = []
    bar = tqdm(total=len(mine), disable=quiet or ranks.rank != 0, unit="file", dynamic_ncols=True)
    for job, legacy in jobs:
        results = _fit_job(kind, config, options, files, folders, job, legacy, device, overwrite)
        for i, result in zip(job, results):
            if isinstance(result, BaseException):
                reason = str(result) if isinstance(result, (ValueError, OSError, Diverged)) else \
                    f"{type(result).__name__}: {str(result).strip().splitlines()[0] if str(result).strip() else ''}"
                rows.append((i, summary_row(files[i], names[i], task_info(kind).unit, "failed", {}, reason)))
            else:
                rows.append((i, summary_row(files[i], names[i], task_info(kind).unit, *result)))
                psnrs += finite_numbers([result[1].get("psnr")])
        bar.update(len(job))
        if psnrs:
            bar.set_postfix_str(f"mean PSNR {statistics.fmean(psnrs):.2f} dB")
    bar.close()
    all_rows = gather_rows(rows, ranks)
    if ranks.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, all_rows)
    return all_rows
