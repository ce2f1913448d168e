"""inr-fit images: run folders that never leave --out, one folder run at a time, inputs identified by their bytes,
link loops, and --together groups that survive a missing file or another --together value (issue 26)."""

import csv
import fcntl
import json
import os
import signal
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import yaml
from fuzz import FIRST_SEED
from runs import write_tiny_config

from inr_enc.cli import main as inr_fit
from inr_enc.fitting import dataset
from inr_enc.fitting.inputs import list_signals, run_names, safe_name
from inr_enc.fitting.loop import Fitter


def rows(out):
    with open(out / "summary.csv", newline="") as file:
        return list(csv.DictReader(file))


def write_images(folder, names, shape=(8, 8, 3), seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name in names:
        iio.imwrite(folder / name, rng.integers(0, 256, shape, dtype=np.uint8))


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_config(tmp_path, steps=8, eval_every=4, checkpoint_every=4)


def test_safe_names():
    assert [safe_name(s) for s in ("..", ".", ".hidden", "", "summary.csv", "SUMMARY.MD", "rate_distortion", "con",
                                   "nul.tar", "com3", "a\\b", "plain")] == \
        ["_..", "_.", "_.hidden", "_", "_summary.csv", "_SUMMARY.MD", "rate_distortion", "_con", "_nul.tar", "_com3",
         "a_b", "plain"]
    assert len(safe_name("é" * 200).encode()) <= 240
    assert run_names([Path(p) for p in ("x/a.png", "y/a.png", "a.jpg", "b.png", "_a.png")]) == \
        ["a", "a-2", "a-3", "b", "_a"]


@pytest.mark.slow
def test_run_folders_never_leave_out_and_the_summary_is_written(tmp_path, tiny):
    """The tester's reproduction: '...png' used to be fitted into OUT/.. (the user's folder), '..png' into OUT."""
    inputs, parent = tmp_path / "x" / "in", tmp_path / "x" / "p"
    write_images(inputs, ["...png", "..png", ".hidden.png", "summary.csv.png", "CON.png", "b.png"])
    (parent / "tensorboard").mkdir(parents=True)
    (parent / "config.yaml").write_text("mine\n")
    out = parent / "out"
    assert inr_fit(["images", str(inputs), "--out", str(out), "--config", str(tiny), "--quiet", "--overwrite"]) == 0
    assert (parent / "config.yaml").read_text() == "mine\n"
    assert sorted(p.name for p in parent.iterdir()) == ["config.yaml", "out", "tensorboard"]
    assert not any((parent / "tensorboard").iterdir())
    summary = rows(out)
    assert [r["status"] for r in summary] == ["fitted"] * 6
    names = [r["run"] for r in summary]
    assert sorted(names) == sorted(["_..", "_.", "_.hidden", "_summary.csv", "_CON", "b"])
    for row in summary:  # each run in a folder of its own, directly in out, recording its input
        folder = out / row["run"]
        assert folder.resolve().parent == out.resolve() and (folder / "metrics.json").is_file()
        assert Path(yaml.safe_load((folder / "config.yaml").read_text())["task"]["path"]).name == Path(row["file"]).name


def test_a_second_folder_run_into_the_same_out_is_refused(tmp_path, tiny, capsys):
    write_images(tmp_path / "in", ["a.png", "b.png"])
    out = tmp_path / "out"
    out.mkdir()
    holder = os.open(out, os.O_RDONLY)  # another inr-fit's lock on the folder run (flock: per open file)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        assert inr_fit(["images", str(tmp_path / "in"), "--out", str(out), "--config", str(tiny), "--quiet"]) == 2
    finally:
        os.close(holder)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "in use by another inr-fit run" in err[0]
    assert not any(out.iterdir())  # nothing fitted, no summary


def test_a_replaced_input_is_refused_not_skipped_and_fitted_again_with_overwrite(tmp_path, tiny, capsys):
    folder, out = tmp_path / "in", tmp_path / "out"
    write_images(folder, ["a.png", "b.png"])
    args = ["images", str(folder), "--out", str(out), "--config", str(tiny), "--quiet"]
    assert inr_fit(args) == 0
    before = (out / "a" / "metrics.json").read_text()
    write_images(folder, ["a.png"], seed=1)  # another image of the same size and name
    capsys.readouterr()
    assert inr_fit(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed since its run" in err[0]
    assert [(r["run"], r["status"]) for r in rows(out)] == [("a", "failed"), ("b", "skipped")]
    assert (out / "a" / "metrics.json").read_text() == before
    assert inr_fit([*args, "--overwrite"]) == 0
    assert [r["status"] for r in rows(out)] == ["fitted", "fitted"]
    assert (out / "a" / "metrics.json").read_text() != before


def test_a_replaced_input_is_refused_by_resume(tmp_path, tiny, capsys):
    image, out = tmp_path / "a.png", tmp_path / "run"
    write_images(tmp_path, ["a.png"])
    assert inr_fit(["image", str(image), "--out", str(out), "--config", str(tiny), "--quiet"]) == 0
    checkpoint = (out / "checkpoint.pt").read_bytes()
    write_images(tmp_path, ["a.png"], seed=3)
    capsys.readouterr()
    assert inr_fit(["image", "--resume", str(out), "--steps", "12", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed since its run" in err[0]
    assert (out / "checkpoint.pt").read_bytes() == checkpoint


def test_a_new_file_of_the_same_stem_does_not_take_a_fitted_files_folder(tmp_path, tiny):
    folder, out = tmp_path / "in", tmp_path / "out"
    write_images(folder, ["x.png"])
    args = ["images", str(folder), "--out", str(out), "--config", str(tiny), "--quiet"]
    assert inr_fit(args) == 0
    write_images(folder, ["x.jpg"], seed=2)  # sorts before x.png
    assert inr_fit(args) == 0
    assert [(Path(r["file"]).name, r["run"], r["status"]) for r in rows(out)] == \
        [("x.jpg", "x-2", "fitted"), ("x.png", "x", "skipped")]


def test_a_link_loop_under_a_recursive_pattern_lists_each_file_once(tmp_path):
    root = tmp_path / "D"
    write_images(root / "sub", ["b.png"])
    write_images(root, ["a.png"])
    (root / "self").symlink_to(".")
    os.link(root / "a.png", root / "sub" / "hard.png")  # a second name of one file
    assert [p.relative_to(root).as_posix() for p in list_signals("image", str(root / "**" / "*.png"))] == \
        ["a.png", "sub/b.png"]


def test_a_file_gone_before_its_group_is_fitted_fails_alone(tmp_path, tiny, monkeypatch):
    folder, out = tmp_path / "in", tmp_path / "out"
    write_images(folder, [f"rgb{k}.png" for k in range(3)])
    jobs = dataset._jobs

    def then_deleted(*args, **kwargs):
        planned = jobs(*args, **kwargs)
        (folder / "rgb1.png").unlink()
        return planned

    monkeypatch.setattr(dataset, "_jobs", then_deleted)
    args = ["images", str(folder), "--out", str(out), "--config", str(tiny), "--quiet", "--together", "3"]
    assert inr_fit(args) == 2
    assert [r["status"] for r in rows(out)] == ["fitted", "failed", "fitted"]
    assert "no such file" in rows(out)[1]["error"]
    assert json.loads((out / "rgb0" / "metrics.json").read_text())["fitted_together"] == 2


def test_an_interrupted_group_continues_under_another_together_value(tmp_path, monkeypatch):
    """Stopped at step 6 with --together 3, continued with --together 2: every file resumes from its step 6 (a pair
    and one alone: 6 steps each), none starts again."""
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4)
    folder, out = tmp_path / "in", tmp_path / "out"
    write_images(folder, [f"rgb{k}.png" for k in range(3)])
    args = ["images", str(folder), "--config", str(config), "--quiet", "--out", str(out)]
    step = Fitter._step
    calls = []

    def counted(self):
        calls.append(1)
        if len(calls) == 6 and interrupt:
            signal.raise_signal(signal.SIGINT)
        return step(self)

    interrupt = True
    monkeypatch.setattr(Fitter, "_step", counted)
    assert inr_fit([*args, "--together", "3"]) == 130
    assert [torch.load(out / f"rgb{k}" / "checkpoint.pt", weights_only=True)["step"] for k in range(3)] == [6] * 3
    calls.clear()
    interrupt = False
    assert inr_fit([*args, "--together", "2"]) == 0
    assert len(calls) == 12
    assert [r["status"] for r in rows(out)] == ["resumed"] * 3
    metrics = [json.loads((out / f"rgb{k}" / "metrics.json").read_text()) for k in range(3)]
    assert [m.get("fitted_together") for m in metrics] == [2, 2, None] and {m["steps"] for m in metrics} == {12}


NAME_PARTS = ["", ".", "..", "...", "a", "A", "summary.csv", "summary.md", "rate_distortion", "con", "NUL", "lpt9",
              "\\",
              "é", "x" * 130, " ", "-2", ".group-a-2", ".replacing-1", "config", "tensorboard", "*", "[a]"]


@pytest.mark.parametrize("seed", range(30))
def test_fuzzed_file_names_get_distinct_folders_inside_out_that_stay_theirs(tmp_path, seed):
    """Random stems (dots, reserved names, separators, long and repeated names) with earlier runs in out: every
    name is one new folder directly in out, distinct, and a file keeps its folder when more files arrive."""
    rng = np.random.default_rng(FIRST_SEED + seed)
    out = tmp_path / "out"
    out.mkdir()
    stems = {"".join(rng.choice(NAME_PARTS, rng.integers(1, 4))) for _ in range(12)}
    files = sorted(tmp_path / "in" / f"{stem}{rng.choice(['.png', '.jpg', '.PNG'])}" for stem in stems)
    first = files[: len(files) // 2]
    names = run_names(first, out)
    for file, name in zip(first, names):  # as if fitted: the folder records its input
        (out / name).mkdir()
        (out / name / "config.yaml").write_text(yaml.safe_dump({"task": {"path": str(file)}}))
    (out / "someone-else").mkdir()
    (out / "someone-else" / "notes.txt").write_text("not a run")
    later = run_names(files + [tmp_path / "in" / "someone-else.png"], out)
    assert later[: len(first)] == names  # the fitted files keep their folders
    assert len(set(later)) == len(later) and "someone-else" not in later
    for name in later:
        folder = (out / name).resolve()
        assert folder.parent == out.resolve() and not name.startswith(".") and len(name.encode()) <= 240
        assert name.lower() not in ("summary.csv", "summary.md", "rate_distortion.png")


def test_a_ctrl_c_during_a_groups_evaluation_stops_it_and_the_group_evaluates_that_step_when_continued(
        tmp_path, tiny, monkeypatch):
    folder, out = tmp_path / "in", tmp_path / "out"
    write_images(folder, [f"rgb{k}.png" for k in range(2)])
    args = ["images", str(folder), "--out", str(out), "--config", str(tiny), "--quiet", "--together", "2"]
    evaluate, asked = Fitter.evaluate, []

    def signalled_in_the_first(self, stop=None):
        asked.append(self.states[0].step)
        if len(asked) == 1:
            signal.raise_signal(signal.SIGINT)  # deferred by the loop: evaluate's stop() now says True
        return evaluate(self, stop)

    monkeypatch.setattr(Fitter, "evaluate", signalled_in_the_first)
    assert inr_fit(args) == 130
    assert asked == [4]
    assert inr_fit(args) == 0
    assert asked == [4, 4, 8]  # the cut evaluation first, then the last step's
    for k in range(2):
        history = json.loads((out / f"rgb{k}" / "metrics.json").read_text())
        assert history["steps"] == 8 and history["fitted_together"] == 2
    saved = torch.load(out / "rgb0" / "checkpoint.pt", weights_only=True)
    assert [h["step"] for h in saved["history"]] == [4, 8]
