"""inr-fit images --together N (fitting/batched.py, loop.py): same-sized files fitted as one computation, each model
the run it would be alone; groups checkpoint into their runs' folders and resume, alone or together; a model that
diverges is reported while the others finish."""

import csv
import json
import signal

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import yaml
from runs import write_tiny_config

from inr_enc.cli import main as inr_fit
from inr_enc.field import batch as field_batch
from inr_enc.fitting import batched
from inr_enc.fitting.batched import plan_groups
from inr_enc.fitting.loop import Fitter


@pytest.fixture
def crops(tmp_path):
    """Five 8x8 RGB images, two 6x10 gray ones and an unreadable one."""
    folder = tmp_path / "crops"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for k in range(5):
        iio.imwrite(folder / f"rgb{k}.png", rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    for k in range(2):
        iio.imwrite(folder / f"gray{k}.png", rng.integers(0, 256, (6, 10), dtype=np.uint8))
    (folder / "broken.png").write_bytes(b"not an image")
    return folder


def rows(out):
    with open(out / "summary.csv", newline="") as file:
        return {row["run"]: row for row in csv.DictReader(file)}


@pytest.mark.parametrize("batch_size,chunk_floats", [(None, None), (20, None), (20, 1)])
def test_each_model_matches_its_run_alone(tmp_path, crops, batch_size, chunk_floats, monkeypatch):
    """Every pixel or 20 random ones per step; the networks trained all at once, or one model at a time (a
    chunk of 1 float: each chunk holds one model)."""
    if chunk_floats is not None:
        monkeypatch.setattr(field_batch, "CHUNK_FLOATS", chunk_floats)
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4,
                               **({"batch_size": batch_size} if batch_size else {}))
    alone, together = tmp_path / "alone", tmp_path / "together"
    common = ["images", str(crops), "--config", str(config), "--quiet", "--pictures", "none"]
    assert inr_fit(common + ["--out", str(alone)]) == 2  # broken.png
    assert inr_fit(common + ["--out", str(together), "--together", "3"]) == 2
    one, many = rows(alone), rows(together)
    assert many["broken"]["status"] == "failed" and "cannot read" in many["broken"]["error"]
    for name in [f"rgb{k}" for k in range(5)] + ["gray0", "gray1"]:
        assert many[name]["status"] == "fitted"
        assert float(many[name]["psnr"]) == pytest.approx(float(one[name]["psnr"]), abs=1e-3)
        metrics = json.loads((together / name / "metrics.json").read_text())
        assert metrics["fitted_together"] == (3 if name.startswith("rgb") and name not in ("rgb3", "rgb4") else 2)
        assert metrics["steps"] == 12 and (together / name / "model.safetensors").is_file()
        assert not (together / name / "comparison.png").exists()  # --pictures none
    psnrs = {float(r["psnr"]) for name, r in many.items() if name != "broken"}
    assert len(psnrs) == 7  # different images, different fits


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_a_batched_run_resumes_with_more_steps_like_a_run_alone(tmp_path, crops, schedule):
    """Each model's checkpoint holds its slice of the group's optimiser state and the schedule's position: 12 steps
    together, then 8 more alone, equal 12 then 8 steps alone."""
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4, schedule=schedule)
    out = tmp_path / "out"
    args = ["images", str(crops / "rgb*.png"), "--config", str(config), "--quiet", "--pictures", "none", "--out"]
    assert inr_fit(args + [str(out), "--together", "5"]) == 0
    assert inr_fit(["image", "--resume", str(out / "rgb1"), "--steps", "20", "--quiet"]) == 0
    straight = ["image", str(crops / "rgb1.png"), "--config", str(config), "--quiet",
                "--out", str(tmp_path / "straight")]
    assert inr_fit(straight) == 0
    assert inr_fit(["image", "--resume", str(tmp_path / "straight"), "--steps", "20", "--quiet"]) == 0
    resumed = json.loads((out / "rgb1" / "metrics.json").read_text())
    straight = json.loads((tmp_path / "straight" / "metrics.json").read_text())
    assert resumed["steps"] == 20 and resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-3)


def interrupted_at_call(monkeypatch, n):
    """Fitter._step raising SIGINT in its n-th call (deferred by the loop: the step ends, checkpoints are saved)."""
    step, calls = Fitter._step, []

    def counted(self):
        calls.append(1)
        if len(calls) == n:
            signal.raise_signal(signal.SIGINT)
        return step(self)

    monkeypatch.setattr(Fitter, "_step", counted)


def test_an_interrupted_group_continues_and_finished_files_are_skipped(tmp_path, crops, monkeypatch):
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4)
    out = tmp_path / "out"
    args = ["images", str(crops / "rgb*.png"), "--config", str(config), "--quiet", "--out", str(out), "--together", "5"]
    interrupted_at_call(monkeypatch, 6)
    assert inr_fit(args) == 130
    assert not list(out.glob(".group-*"))  # each model's checkpoint in its own folder, as its run alone
    assert [torch.load(out / f"rgb{k}" / "checkpoint.pt", weights_only=True)["step"] for k in range(5)] == [6] * 5
    monkeypatch.undo()
    assert inr_fit(args) == 0
    assert {r["status"] for r in rows(out).values()} == {"resumed"}
    for k in range(5):
        metrics = json.loads((out / f"rgb{k}" / "metrics.json").read_text())
        assert metrics["steps"] == 12 and metrics["fitted_together"] == 5
    assert inr_fit(args) == 0
    assert {r["status"] for r in rows(out).values()} == {"skipped"}


def test_interrupted_single_runs_continue_as_a_group_like_runs_alone(tmp_path, crops, monkeypatch):
    """Two ``inr-fit image`` runs stopped at step 6, continued by one --together run: each ends as its run alone."""
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4, batch_size=20)
    out, alone = tmp_path / "out", tmp_path / "alone"
    for k in range(2):
        interrupted_at_call(monkeypatch, 6)
        single = ["image", str(crops / f"rgb{k}.png"), "--config", str(config), "--quiet", "--out"]
        assert inr_fit(single + [str(out / f"rgb{k}")]) == 130
        monkeypatch.undo()
        assert inr_fit(single + [str(alone / f"rgb{k}")]) == 0
    assert inr_fit(["images", str(crops / "rgb[01].png"), "--config", str(config), "--quiet", "--out", str(out),
                    "--together", "2"]) == 0
    assert [r["status"] for r in rows(out).values()] == ["resumed", "resumed"]
    for k in range(2):
        grouped = json.loads((out / f"rgb{k}" / "metrics.json").read_text())
        straight = json.loads((alone / f"rgb{k}" / "metrics.json").read_text())
        assert grouped["fitted_together"] == 2 and grouped["steps"] == 12
        assert grouped["psnr"] == pytest.approx(straight["psnr"], abs=1e-4)


def test_ctrl_c_while_outputs_are_written_leaves_each_file_to_resume(tmp_path, crops, monkeypatch):
    config = write_tiny_config(tmp_path, steps=8, eval_every=4, checkpoint_every=4)
    out = tmp_path / "out"
    args = ["images", str(crops / "rgb*.png"), "--config", str(config), "--quiet", "--pictures", "none", "--out",
            str(out), "--together", "5"]
    finish = batched.finish
    calls = []

    def interrupted_at_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return finish(*args, **kwargs)

    monkeypatch.setattr(batched, "finish", interrupted_at_the_second)
    assert inr_fit(args) == 130
    assert all((out / f"rgb{k}" / "checkpoint.pt").is_file() for k in range(5)) and not list(out.glob(".group-*"))
    monkeypatch.undo()
    assert inr_fit(args) == 0
    assert [rows(out)[f"rgb{k}"]["status"] for k in range(5)] == ["skipped"] + ["resumed"] * 4
    assert all(rows(out)[f"rgb{k}"]["steps"] == "8" for k in range(5))


def test_a_diverging_model_is_reported_and_the_others_finish(tmp_path, crops, monkeypatch):
    config = write_tiny_config(tmp_path, steps=8, eval_every=4, checkpoint_every=4)
    out = tmp_path / "out"
    values = Fitter.__init__

    def poisoned_second_image(self, *args):
        values(self, *args)
        self.train_values[1, 0, 0] = float("nan")

    monkeypatch.setattr(Fitter, "__init__", poisoned_second_image)
    assert inr_fit(["images", str(crops / "rgb*.png"), "--config", str(config), "--quiet", "--out", str(out),
                    "--together", "5"]) == 2
    table = rows(out)
    assert table["rgb1"]["status"] == "failed" and "diverged at step 1" in table["rgb1"]["error"]
    assert [table[f"rgb{k}"]["status"] for k in (0, 2, 3, 4)] == ["fitted"] * 4


def test_configs_that_cannot_be_batched_fail_before_fitting(tmp_path, crops, capsys):
    config = tmp_path / "pins.yaml"
    config.write_text(yaml.safe_dump({"encoding": {"otype": "LearnableFourier"}, "training": {"steps": 2}}))
    assert inr_fit(["images", str(crops), "--config", str(config), "--together", "4",
                    "--out", str(tmp_path / "o")]) == 2
    assert "cannot be fitted in batches" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert inr_fit(["image", str(crops / "rgb0.png"), "--together", "4"]) == 2
    assert inr_fit(["images", str(crops), "--together", "0"]) == 2


def test_groups_are_cut_by_what_can_go_together_and_size():
    keys = ["a", "b", "a", "a", "b", "a"]
    assert plan_groups([0, 1, 2, 3, 4, 5], lambda i, j: keys[i] == keys[j], 3) == [[0, 2, 3], [1, 4], [5]]


def test_tensorboard_logs_runs_one_at_a_time(tmp_path, crops, capsys):
    assert inr_fit(["images", str(crops), "--together", "2", "--vis", "tensorboard", "--out", str(tmp_path / "o")]) == 2
    assert "does not go with --together" in capsys.readouterr().err


def test_a_checkpoint_that_does_not_join_its_group_fails_alone(tmp_path, crops, monkeypatch):
    """Two runs stopped at step 6, one of whose checkpoints holds another model: the --together rerun fits each
    file on its own, so the good one continues to its end and only the other one fails."""
    config = write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4, batch_size=20)
    out = tmp_path / "out"
    for k in range(2):
        interrupted_at_call(monkeypatch, 6)
        single = ["image", str(crops / f"rgb{k}.png"), "--config", str(config), "--quiet", "--out"]
        assert inr_fit(single + [str(out / f"rgb{k}")]) == 130
        monkeypatch.undo()
    checkpoint = out / "rgb1" / "checkpoint.pt"
    payload = torch.load(checkpoint, weights_only=True)
    payload["model"] = {key: value[..., :1] for key, value in payload["model"].items()}  # another model's shapes
    torch.save(payload, checkpoint)
    assert inr_fit(["images", str(crops / "rgb[01].png"), "--config", str(config), "--quiet", "--out", str(out),
                    "--together", "2"]) == 2
    found = rows(out)
    assert [r["status"] for r in found.values()] == ["resumed", "failed"]
    assert json.loads((out / "rgb0" / "metrics.json").read_text())["steps"] == 12
