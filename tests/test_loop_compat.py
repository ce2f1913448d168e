"""Runs interrupted under main at commit 8e693f1 continue (tests/data/loop-main-8e693f1/README.md): a single run's
checkpoint, and a --together group's ``.group-*.pt`` file; each continuation ends where an uninterrupted run of the
same 12 steps ends, to float32 rounding."""

import shutil
from pathlib import Path

import pytest
import torch

from inr_enc.cli import main as inr_fit

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("tests") / "data" / "loop-main-8e693f1"  # the saved task paths are relative to the repository
CONFIG = ["--config", str(DATA / "hashgrid.yaml"), "--quiet"]


@pytest.fixture
def at_root(monkeypatch):
    """The repository as working folder, torch on one thread (as the fixtures were written)."""
    monkeypatch.chdir(ROOT)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def uninterrupted(tmp_path, name):
    """The checkpoint of images/<name>.png fitted for 12 steps in one go."""
    out = tmp_path / f"straight-{name}"
    assert inr_fit(["image", str(DATA / "images" / f"{name}.png"), *CONFIG, "--out", str(out)]) == 0
    return torch.load(out / "checkpoint.pt", weights_only=True)


def assert_same_fit(continued, straight):
    assert continued["step"] == straight["step"] == 12
    assert [h["step"] for h in continued["history"]] == [4, 8, 12]
    assert continued["history"][-1]["psnr"] == pytest.approx(straight["history"][-1]["psnr"], abs=1e-4)
    for key, value in straight["model"].items():
        torch.testing.assert_close(continued["model"][key], value, rtol=0, atol=1e-5, msg=key)


def test_an_interrupted_single_run_continues_the_same_curve(tmp_path, at_root):
    run = tmp_path / "single"
    shutil.copytree(DATA / "single", run)
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    assert inr_fit(["image", "--resume", str(run), "--quiet"]) == 0
    continued = torch.load(run / "checkpoint.pt", weights_only=True)
    assert continued["history"][0] == saved["history"][0]  # step 4's evaluation is the old run's, not a new one
    assert_same_fit(continued, uninterrupted(tmp_path, "a"))


def test_an_interrupted_group_file_continues_and_each_model_matches_its_run_alone(tmp_path, at_root):
    out = tmp_path / "out"
    out.mkdir()
    group = torch.load(DATA / "group" / ".group-a-2.pt", weights_only=True)
    def here(path: str) -> str:  # written under another checkout
        return str(ROOT / path[path.index("tests/data/"):])

    group["names"] = [here(name) for name in group["names"]]
    group["tasks"] = [{**task, "path": here(task["path"])} for task in group["tasks"]]
    group["config"]["task"] = group["tasks"][0]  # the first run's, whole
    torch.save(group, out / ".group-a-2.pt")
    assert inr_fit(["images", str(DATA / "images"), *CONFIG, "--out", str(out), "--together", "2"]) == 0
    assert not list(out.glob(".group-*"))
    for m, name in enumerate(["a", "b"]):
        continued = torch.load(out / name / "checkpoint.pt", weights_only=True)
        assert continued["history"][0] == group["states"][m]["history"][0]  # continued, not started again
        assert_same_fit(continued, uninterrupted(tmp_path, name))


def test_a_saved_run_with_ema_decay_0_resumes_as_one_without_an_average(tmp_path, at_root):
    """0.4.0 accepted ema_decay 0 (tcnn's Ema averaging nothing); today's configs say null for that and refuse 0,
    but a run saved with 0 still resumes, and continues exactly as the same run without an average."""
    import yaml

    run = tmp_path / "single"
    shutil.copytree(DATA / "single", run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["training"]["ema_decay"] is None
    config["training"]["ema_decay"] = 0.0
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert inr_fit(["image", "--resume", str(run), "--quiet"]) == 0
    assert_same_fit(torch.load(run / "checkpoint.pt", weights_only=True), uninterrupted(tmp_path, "a"))
    assert inr_fit(["image", str(DATA / "images" / "a.png"), *CONFIG, "--set", "training.ema_decay=0",
                    "--out", str(tmp_path / "new")]) == 2  # a new run: refused, null says it
