"""inr-fit never loses a run: the folder lock, --overwrite that waits for the new run's first checkpoint, damaged
run folders, divergence, strict JSON, and Ctrl-C or SIGTERM while the command is still importing."""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import yaml

from inr_enc.cli import main as inr_fit
from inr_enc.fitting.outputs import write_metrics
from inr_enc.metrics import psnr

TINY = {
    "encoding": {"otype": "Frequency", "n_frequencies": 3},
    "network": {"otype": "MLP", "n_neurons": 16, "n_hidden_layers": 1},
    "training": {"steps": 6, "lr": 1e-2, "eval_every": 2, "checkpoint_every": 2},
}


def write_config(tmp_path, name="tiny.yaml", network=None, **training):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**TINY, "network": network or TINY["network"],
                                    "training": {**TINY["training"], **training}}))
    return path


def diverging_config(tmp_path, checkpoint_every):
    """Adam at the largest lr allowed on a deep MLP: the loss overflows at step 2 (seed 0, CPU)."""
    return write_config(tmp_path, "diverging.yaml", {"otype": "MLP", "n_neurons": 64, "n_hidden_layers": 7}, lr=10,
                        steps=50, eval_every=1000, checkpoint_every=checkpoint_every)


@pytest.fixture
def image_path(tmp_path):
    path = tmp_path / "img.png"
    iio.imwrite(path, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    return path


def fit(capsys, *args):
    code = inr_fit([*map(str, args), "--quiet"])
    return code, capsys.readouterr().err.strip()


def one_line(err):
    return len(err.splitlines()) == 1 and "Traceback" not in err


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_locked_folder_is_refused_and_left_alone(tmp_path, capsys, image_path):
    out = tmp_path / "run"
    assert fit(capsys, "image", image_path, "--config", write_config(tmp_path), "--out", out)[0] == 0
    before = snapshot(out)
    holder = os.open(out, os.O_RDONLY)  # as another live run holds it
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        for args in (("--resume", out, "--steps", 8),
                     (image_path, "--config", write_config(tmp_path), "--out", out, "--overwrite")):
            code, err = fit(capsys, "image", *args)
            assert code == 2 and "is in use by another inr-fit run" in err and one_line(err), err
        assert snapshot(out) == before
    finally:
        os.close(holder)
    assert fit(capsys, "image", "--resume", out, "--steps", 8)[0] == 0  # the lock went with its holder


def test_overwrite_keeps_the_earlier_run_until_the_new_one_has_a_checkpoint(tmp_path, capsys, image_path):
    out = tmp_path / "run"
    assert fit(capsys, "image", image_path, "--config", write_config(tmp_path), "--out", out)[0] == 0
    before = snapshot(out)
    # diverges before its first checkpoint (every 1000 steps): exit 3, the earlier run untouched
    code, err = fit(capsys, "image", image_path, "--config", diverging_config(tmp_path, 1000), "--out", out,
                    "--overwrite")
    assert (code == 3 and "training diverged at step" in err and "no checkpoint was written" in err
            and one_line(err)), err
    assert snapshot(out) == before
    # a run that gets to its first checkpoint replaces it, every earlier output included
    (out / "reconstruction_level3.png").write_bytes(b"an earlier PINs run's level")
    code, err = fit(capsys, "image", image_path, "--config", write_config(tmp_path, steps=4), "--out", out,
                    "--overwrite")
    assert code == 0 and json.loads((out / "metrics.json").read_text())["steps"] == 4
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "comparison.png", "config.yaml", "curve.png",
                                                     "metrics.json", "model.safetensors", "reconstruction.png"]
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 4


def test_a_new_run_that_fails_before_its_first_checkpoint_leaves_no_folder(tmp_path, capsys, image_path):
    code, err = fit(capsys, "image", image_path, "--config", diverging_config(tmp_path, 1000), "--out",
                    tmp_path / "new")
    assert code == 3 and not (tmp_path / "new").exists()


def test_divergence_stops_with_exit_3_and_keeps_the_last_good_checkpoint(tmp_path, capsys, image_path):
    out = tmp_path / "run"
    code, err = fit(capsys, "image", image_path, "--config", diverging_config(tmp_path, 1), "--out", out)
    assert code == 3 and one_line(err) and "the checkpoint of step" in err, err
    kept_step = int(err.split("the checkpoint of step ")[1].split()[0])
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    assert payload["step"] == kept_step
    assert all(torch.isfinite(v).all() for v in payload["model"].values())
    assert not (out / "metrics.json").exists()


def test_psnr_of_a_nan_error_is_nan_and_metrics_are_strict_json(tmp_path):
    assert np.isnan(psnr(float("nan"), 1.0)) and np.isnan(psnr(float("inf"), 1.0)) and psnr(0.0, 1.0) == float("inf")
    write_metrics(tmp_path, {"psnr": float("inf"), "ssim": None, "loss": 0.0})

    def refuse(constant):
        raise AssertionError(f"metrics.json holds {constant}")

    metrics = json.loads((tmp_path / "metrics.json").read_text(), parse_constant=refuse)
    assert metrics == {"psnr": None, "ssim": None, "loss": 0.0, "non_finite": {"psnr": "inf"}}


DAMAGES = {
    "truncated checkpoint": ("checkpoint.pt", lambda b: b[: len(b) // 2]),
    "empty checkpoint": ("checkpoint.pt", lambda b: b""),
    "garbage checkpoint": ("checkpoint.pt", lambda b: os.urandom(4096)),
    "checkpoint of a list": ("checkpoint.pt", None),
    "config a list": ("config.yaml", lambda b: b"- 1\n- 2\n"),
    "empty config": ("config.yaml", lambda b: b""),
    "invalid YAML": ("config.yaml", lambda b: b"encoding: {otype: [\n"),
    "steps: abc": ("config.yaml", lambda b: b.replace(b"steps: 6", b"steps: abc")),
    "another shape": ("config.yaml", lambda b: b.replace(b"n_neurons: 16", b"n_neurons: 32")),
    "a python tag": ("config.yaml", lambda b: b"!!python/object/apply:os.system ['touch pwned']\n"),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("finished")
    image = tmp_path / "img.png"
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    assert inr_fit(["image", str(image), "--config", str(write_config(tmp_path)), "--out", str(tmp_path / "run"),
                    "--quiet"]) == 0
    return tmp_path / "run"


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_resuming_a_damaged_run_is_one_line_and_touches_nothing(tmp_path, capsys, finished_run, damage):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    name, change = DAMAGES[damage]
    if change is None:
        torch.save([1, 2, 3], out / name)
    else:
        (out / name).write_bytes(change((out / name).read_bytes()))
    before = snapshot(out)
    code, err = fit(capsys, "image", "--resume", out)
    assert code == 2 and one_line(err), err
    assert snapshot(out) == before and not Path("pwned").exists()


def test_leftovers_of_killed_runs_are_removed_by_the_next_run(tmp_path, capsys, finished_run):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    (out / ".checkpoint.pt.k1ll3d.tmp").write_bytes(b"half a checkpoint")
    (out / ".replacing-12345").mkdir()
    (out / ".replacing-12345" / "config.yaml").write_text("half a run")
    assert fit(capsys, "image", "--resume", out, "--steps", 8)[0] == 0
    assert not list(out.glob(".*"))


def _spawn(tmp_path, *args):
    command = [sys.executable, "-m", "inr_enc.cli", *map(str, args), "--quiet"]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def _wait_for(condition, process, what, timeout=600):
    deadline = time.time() + timeout  # a cold start on a busy machine can take a while
    while not condition() and time.time() < deadline and process.poll() is None:
        time.sleep(0.02)
    if not condition():
        process.kill()
        pytest.fail(f"{what} did not happen (exit {process.poll()}): {process.communicate()[1][-2000:]}")


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see the child importing torch")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_importing_exits_130_with_one_line(tmp_path, image_path, sig):
    process = _spawn(tmp_path, "image", image_path, "--out", tmp_path / "run")
    maps = Path(f"/proc/{process.pid}/maps")
    _wait_for(lambda: maps.exists() and "libtorch" in maps.read_text(), process, "loading torch")
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and one_line(err.strip()) and "interrupted" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_second_run_is_refused_while_the_first_lives_and_a_killed_one_blocks_nothing(tmp_path, image_path):
    big = tmp_path / "big.png"
    iio.imwrite(big, np.random.default_rng(0).integers(0, 256, (200, 200, 3), dtype=np.uint8))
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.safe_dump({**TINY, "network": {"n_neurons": 256, "n_hidden_layers": 4},
                                    "training": {"steps": 100000, "checkpoint_every": 1, "eval_every": 1000}}))
    out = tmp_path / "run"
    first = _spawn(tmp_path, "image", big, "--config", slow, "--out", out)
    _wait_for(lambda: (out / "checkpoint.pt").exists(), first, "the first checkpoint")
    second = _spawn(tmp_path, "image", image_path, "--config", write_config(tmp_path), "--out", out, "--overwrite")
    _, err = second.communicate(timeout=300)
    assert second.returncode == 2 and "is in use by another inr-fit run" in err and one_line(err.strip()), err
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    step = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
    resumed = _spawn(tmp_path, "image", "--resume", out, "--steps", step + 1)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == step + 1


def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, capsys, image_path):
    (tmp_path / "afile").write_text("not a folder")
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        code, err = fit(capsys, "image", image_path, "--config", write_config(tmp_path), "--out", out)
        assert code == 2 and one_line(err) and str(out) in err, err
    assert (tmp_path / "afile").read_text() == "not a folder"


@pytest.mark.parametrize("stop_at", [2, 4])
def test_a_commit_stopped_halfway_is_finished_or_not_begun(tmp_path, capsys, image_path, monkeypatch, stop_at):
    """A new staged run renames four times: its checkpoint and config into staging (atomic writes), then both into
    the folder. Stopped at the 2nd (staging holds a checkpoint without its config) the earlier run stays; stopped at
    the 4th (between the commit's renames) the commit is finished."""
    out = tmp_path / "run"
    assert fit(capsys, "image", image_path, "--config", write_config(tmp_path), "--out", out)[0] == 0
    before = snapshot(out)
    calls, real_replace = [], os.replace

    def replace_stopped_once(source, target):
        calls.append(target)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace_stopped_once)
    code, err = fit(capsys, "image", image_path, "--config", write_config(tmp_path, steps=4), "--out", out,
                    "--overwrite")
    monkeypatch.undo()
    assert code == 130 and one_line(err), err
    if stop_at == 2:
        assert snapshot(out) == before
    else:
        saved = yaml.safe_load((out / "config.yaml").read_text())
        payload = torch.load(out / "checkpoint.pt", weights_only=True)
        saved.pop("provenance")  # config.yaml also says what ran
        assert saved == payload["config"] and saved["training"]["steps"] == 4  # the new run's pair, both moved in
    assert not list(out.glob(".replacing-*"))


def test_a_resume_stopped_before_its_first_checkpoint_changes_nothing(tmp_path, capsys, finished_run, monkeypatch):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = snapshot(out)

    def interrupted_step(self):
        raise KeyboardInterrupt

    monkeypatch.setattr("inr_enc.fitting.loop.Fitter._step", interrupted_step)
    code, err = fit(capsys, "image", "--resume", out, "--steps", 20)
    assert code == 130 and one_line(err), err
    assert snapshot(out) == before  # config.yaml keeps its steps until a checkpoint of the longer run exists


def test_a_signal_a_library_swallowed_is_raised_again_before_the_run_folder():
    import os

    from inr_enc.fitting.stops import interrupts_noted, raise_if_interrupted

    before = signal.getsignal(signal.SIGTERM)
    with interrupts_noted():
        raise_if_interrupted()  # nothing received yet
        try:  # a library catching the KeyboardInterrupt raised inside it
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    with interrupts_noted():
        raise_if_interrupted()  # a new block starts clean


@pytest.mark.slow
def test_sigterm_during_an_evaluation_stops_it_and_resume_redoes_it(tmp_path):
    """The last step's evaluation of 2^20 samples in chunks of 64 takes seconds (16384 chunks: well past the 0.3 s
    this test waits, even on a quiet machine); SIGTERM during it exits 130 within about a second (it used to wait
    for the evaluation), and --resume evaluates that step before finishing."""
    import soundfile

    wav = tmp_path / "long.wav"
    soundfile.write(wav, np.sin(np.arange(2**20) * 0.01), 8000, subtype="PCM_16")
    config = tmp_path / "slow-eval.yaml"
    config.write_text(yaml.safe_dump({**TINY, "network": {"otype": "MLP", "n_neurons": 64, "n_hidden_layers": 2},
                                      "training": {"steps": 2, "batch_size": 256, "checkpoint_every": 1,
                                                   "eval_every": 1000, "eval_chunk": 64}}))
    out = tmp_path / "run"
    process = _spawn(tmp_path, "audio", wav, "--config", config, "--out", out)
    _wait_for(lambda: (out / "checkpoint.pt").exists(), process, "the step-1 checkpoint")
    time.sleep(0.3)  # step 2 and into its evaluation
    process.send_signal(signal.SIGTERM)
    sent = time.time()
    first = process.stderr.readline()  # written once the checkpoint is saved (the interpreter's exit comes after)
    waited = time.time() - sent
    err = first + process.communicate(timeout=120)[1]
    assert process.returncode == 130 and one_line(err.strip()) and "interrupted" in err, err
    assert waited < 1.0, f"{waited:.1f} s from SIGTERM to the checkpoint"
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 2 and saved["history"] == [] and not (out / "metrics.json").exists()
    resumed = _spawn(tmp_path, "audio", "--resume", out)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    history = torch.load(out / "checkpoint.pt", weights_only=True)["history"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert [h["step"] for h in history] == [2] and metrics["best_psnr_step"] == 2
    assert history[0]["psnr"] == pytest.approx(metrics["psnr"], abs=1e-3)


def test_predict_stops_between_chunks_when_asked():
    from inr_enc.fitting.problem import predict
    from inr_enc.fitting.stops import Interrupted

    calls = []
    model = lambda x: calls.append(len(x)) or x  # noqa: E731
    with pytest.raises(Interrupted):
        predict(model, torch.zeros(100, 1), 10, torch.device("cpu"), stop=lambda: len(calls) == 3)
    assert calls == [10, 10, 10]
