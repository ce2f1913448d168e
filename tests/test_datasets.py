"""inr-fit images / audios: a folder fitted file by file, the summary, resuming, failures, torchrun."""

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import soundfile
import yaml
from runs import TINY, write_tiny_config

from inr_enc.cli import main as inr_fit
from inr_enc.fitting import dataset
from inr_enc.fitting.inputs import default_name, list_signals, run_names
from inr_enc.fitting.loop import Fitter


@pytest.fixture
def tiny_config(tmp_path):
    return write_tiny_config(tmp_path, steps=12, eval_every=4, checkpoint_every=4)


@pytest.fixture
def photos(tmp_path):
    """Three small images of different sizes, an unreadable .png, and a text file that is not fitted."""
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, (h, w) in {"a": (12, 10), "b": (8, 16), "c": (10, 10)}.items():
        iio.imwrite(folder / f"{name}.png", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot an image")
    (folder / "notes.txt").write_text("not an image")
    return folder


def read_summary(out):
    with open(out / "summary.csv", newline="") as file:
        return list(csv.DictReader(file))


def test_listing_a_folder_or_a_pattern(photos):
    assert [p.name for p in list_signals("image", str(photos))] == ["a.png", "b.png", "broken.png", "c.png"]
    assert [p.name for p in list_signals("image", str(photos / "[ab]*.png"))] == ["a.png", "b.png", "broken.png"]
    assert run_names([Path(p) for p in ("x/a.png", "y/a.png", "a.jpg", "b.png")]) == ["a", "a-2", "a-3", "b"]
    with pytest.raises(ValueError, match="no audio files"):
        list_signals("audio", str(photos))
    with pytest.raises(ValueError, match="matches no file"):
        list_signals("image", str(photos / "*.jpg"))
    with pytest.raises(ValueError, match="neither a folder nor a glob"):
        list_signals("image", str(photos / "missing"))


@pytest.mark.slow
def test_a_folder_is_fitted_with_a_summary_and_a_bad_file_is_recorded(tmp_path, photos, tiny_config, capsys):
    out = tmp_path / "out"
    code = inr_fit(["images", str(photos), "--config", str(tiny_config), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "1 of 4 fits failed" in err[0] and "broken.png" in err[0]
    rows = read_summary(out)
    assert [(r["run"], r["status"]) for r in rows] == [("a", "fitted"), ("b", "fitted"), ("broken", "failed"),
                                                       ("c", "fitted")]
    assert "cannot read as an image" in rows[2]["error"]
    for row in rows:  # each file's own run folder, as inr-fit image writes it
        if row["status"] == "fitted":
            metrics = json.loads((out / row["run"] / "metrics.json").read_text())
            assert float(row["psnr"]) == pytest.approx(metrics["psnr"], rel=1e-12)
            assert int(row["steps"]) == 12 and (out / row["run"] / "reconstruction.png").is_file()
            h, w = iio.imread(photos / f"{row['run']}.png").shape[:2]  # bits per pixel: the model file's
            size = (out / row["run"] / "model.safetensors").stat().st_size
            assert float(row["bits_per_pixel"]) == pytest.approx(8 * size / (h * w))
    psnrs = [json.loads((out / name / "metrics.json").read_text())["psnr"] for name in "abc"]
    summary = (out / "summary.md").read_text()
    assert f"- psnr: {statistics.fmean(psnrs):.4g} ± {statistics.stdev(psnrs):.2g}" in summary
    assert "4 files: 3 fitted, 1 failed" in summary


@pytest.mark.slow
def test_a_second_run_skips_finished_files_and_resumes_unfinished_ones(tmp_path, photos, tiny_config):
    out = tmp_path / "out"
    (photos / "broken.png").unlink()
    args = ["images", str(photos), "--config", str(tiny_config), "--out", str(out), "--quiet"]
    assert inr_fit(args) == 0
    before = {name: (out / name / "checkpoint.pt").stat().st_mtime_ns for name in "abc"}
    (out / "b" / "metrics.json").unlink()  # as if stopped after its last checkpoint
    assert inr_fit(args) == 0
    rows = read_summary(out)
    assert [r["status"] for r in rows] == ["skipped", "resumed", "skipped"]
    assert (out / "b" / "metrics.json").is_file()
    assert all((out / name / "checkpoint.pt").stat().st_mtime_ns == before[name] for name in "ac")


@pytest.mark.slow
def test_a_folder_holding_another_config_is_not_replaced_without_overwrite(tmp_path, photos, tiny_config, capsys):
    (photos / "broken.png").unlink()
    out = tmp_path / "out"
    base = ["images", str(photos), "--config", str(tiny_config), "--out", str(out), "--quiet"]
    assert inr_fit(base) == 0
    first = (out / "a" / "metrics.json").read_text()
    assert inr_fit([*base, "--seed", "7"]) == 2
    assert "holds a run of another config" in capsys.readouterr().err
    assert (out / "a" / "metrics.json").read_text() == first
    assert inr_fit([*base, "--seed", "7", "--overwrite"]) == 0
    assert [r["status"] for r in read_summary(out)] == ["fitted"] * 3


@pytest.mark.slow
def test_audios(tmp_path, tiny_config):
    folder = tmp_path / "clips"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for name in ("one", "two"):
        soundfile.write(folder / f"{name}.wav", rng.uniform(-0.5, 0.5, 200).astype(np.float32), 8000, subtype="PCM_16")
    out = tmp_path / "out"
    assert inr_fit(["audios", str(folder), "--config", str(tiny_config), "--out", str(out), "--quiet"]) == 0
    rows = read_summary(out)
    assert [r["status"] for r in rows] == ["fitted", "fitted"] and "bits_per_sample" in rows[0]


@pytest.mark.parametrize("argv, message", [
    (["images"], "needs a folder or a glob pattern"),
    (["images", "nowhere"], "neither a folder nor a glob pattern"),
    (["images", "{photos}", "--resume", "x"], "run the same inr-fit images command again"),
])
def test_bad_folder_arguments_exit_2_with_one_line(tmp_path, photos, capsys, argv, message):
    assert inr_fit([a.format(photos=photos) for a in argv] + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


TORCHRUN = Path(sys.executable).parent / "torchrun"  # installed with torch, next to this interpreter


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN.is_file(), reason="torchrun is not next to this Python")
def test_torchrun_ranks_share_the_files_and_give_one_process_summary(tmp_path, photos, tiny_config):
    (photos / "broken.png").unlink()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # torchrun's default per rank; the same for the single process
    common = ["images", str(photos), "--config", str(tiny_config), "--quiet"]
    single = subprocess.run([sys.executable, "-m", "inr_enc.cli", *common, "--out", str(tmp_path / "one")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr
    ranks = subprocess.run([str(TORCHRUN), "--standalone", "--nproc_per_node", "2", "-m", "inr_enc.cli", *common[:-1],
                            "--out", str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=600)
    assert ranks.returncode == 0, ranks.stderr[-2000:]
    assert ranks.stdout.count("3 of 3 files fitted") == 1  # rank 0 reports, for both ranks
    one, two = read_summary(tmp_path / "one"), read_summary(tmp_path / "two")
    assert [r["run"] for r in two] == ["a", "b", "c"]
    for a, b in zip(one, two):
        assert a["status"] == b["status"] == "fitted"
        assert float(a["psnr"]) == pytest.approx(float(b["psnr"]), rel=1e-6)
        assert a["steps"] == b["steps"]


@pytest.mark.slow
def test_several_configs_are_compared_with_a_rate_distortion_plot(tmp_path, photos, tiny_config):
    (photos / "broken.png").unlink()
    wider = tmp_path / "wider.yaml"
    wider.write_text(yaml.safe_dump({**yaml.safe_load(tiny_config.read_text()),
                                     "network": {**TINY["network"], "n_neurons": 32}}))
    out = tmp_path / "out"
    assert inr_fit(["images", str(photos), "--config", f"{tiny_config},{wider}", "--out", str(out), "--quiet"]) == 0
    compared = read_summary(out)
    assert [r["config"] for r in compared] == ["tiny", "wider"]
    for row in compared:  # each config's own folder and summary; the comparison holds their means
        per_file = read_summary(out / row["config"])
        assert len(per_file) == 3 and int(row["with_results"]) == 3
        assert float(row["psnr"]) == pytest.approx(statistics.fmean(float(r["psnr"]) for r in per_file))
        assert float(row["bits_per_pixel"]) == pytest.approx(
            statistics.fmean(float(r["bits_per_pixel"]) for r in per_file))
    assert float(compared[1]["bits_per_pixel"]) > float(compared[0]["bits_per_pixel"])  # the wider network's file
    assert iio.imread(out / "rate_distortion.png").ndim == 3


def test_default_names_and_outputs_left_out_of_the_inputs(tmp_path, photos, monkeypatch):
    assert default_name(str(photos)) == "photos" and default_name(str(photos / "**" / "*.png")) == "photos"
    monkeypatch.chdir(photos)
    assert default_name("*.png") == "photos" and default_name(".") == "photos"
    (photos / "out" / "a").mkdir(parents=True)
    iio.imwrite(photos / "out" / "a" / "reconstruction.png", np.zeros((4, 4, 3), dtype=np.uint8))
    found = list_signals("image", str(photos / "**" / "*.png"), photos / "out")
    assert [p.name for p in found] == ["a.png", "b.png", "broken.png", "c.png"]


@pytest.mark.slow
def test_an_interrupted_folder_run_resumes_its_file_mid_way(tmp_path, photos, tiny_config, monkeypatch):
    (photos / "broken.png").unlink()
    out = tmp_path / "out"
    args = ["images", str(photos), "--config", str(tiny_config), "--out", str(out), "--quiet"]
    step = Fitter._step

    def interrupted_in_b(self):  # Ctrl-C while file b trains its 6th step
        if self.folders[0].out.name == "b" and self.states[0].step == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return step(self)

    monkeypatch.setattr(Fitter, "_step", interrupted_in_b)
    assert inr_fit(args) == 130
    assert (out / "a" / "metrics.json").is_file() and not (out / "b" / "metrics.json").exists()
    assert not (out / "c").exists()
    monkeypatch.undo()
    assert inr_fit(args) == 0
    assert [r["status"] for r in read_summary(out)] == ["skipped", "resumed", "fitted"]
    assert json.loads((out / "b" / "metrics.json").read_text())["steps"] == 12


def test_any_failure_of_a_file_is_recorded_and_a_bad_config_fails_first(tmp_path, photos, tiny_config, capsys,
                                                                        monkeypatch):
    (photos / "broken.png").unlink()
    out = tmp_path / "out"
    fit_run = dataset.fit_run

    def crashing_on_b(run, task, folder, *rest, **options):
        if folder.name == "b":
            raise RuntimeError("out of memory on the device")
        return fit_run(run, task, folder, *rest, **options)

    monkeypatch.setattr(dataset, "fit_run", crashing_on_b)
    assert inr_fit(["images", str(photos), "--config", str(tiny_config), "--out", str(out), "--quiet"]) == 2
    assert [r["status"] for r in read_summary(out)] == ["fitted", "failed", "fitted"]
    assert read_summary(out)[1]["error"] == "RuntimeError: out of memory on the device"
    capsys.readouterr()
    for extra, message in ((["--set", "network.n_nerons=8"], "did you mean 'n_neurons'"),
                           (["--config", f"{tiny_config},{tiny_config}"], "two configs named alike")):
        argv = ["images", str(photos), "--config", str(tiny_config), "--out", str(tmp_path / "o2"), "--quiet", *extra]
        assert inr_fit(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]
        assert not (tmp_path / "o2").exists()  # refused before anything was fitted
