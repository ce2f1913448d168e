"""What inr-fit draws and logs: comparison.png, curve.png with every step's loss, and the TensorBoard log."""

import json

import imageio.v3 as iio
import numpy as np
import pytest
import soundfile
import torch
from runs import write_tiny_config

from inr_enc.cli import main as inr_fit
from inr_enc.fitting.pictures import error_map_db


@pytest.fixture
def image_run(tmp_path):
    config, image = write_tiny_config(tmp_path, checkpoint_every=4), tmp_path / "img.png"
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8))
    return ["image", str(image), "--config", str(config), "--quiet"]


def test_error_map_is_per_pixel_psnr():
    target = np.zeros((2, 3, 3))
    recon = np.zeros((2, 3, 3))
    recon[0, 0] = 0.1  # squared error 0.01 -> 20 dB
    recon[1, 2, 0] = 0.3  # one channel: mean squared error 0.03 -> 15.23 dB
    shown = error_map_db(target, recon)
    assert shown[0, 0] == pytest.approx(20.0) and shown[1, 2] == pytest.approx(10 * np.log10(1 / 0.03))
    assert shown[0, 1] == 60.0  # exact pixels at the top of the scale


def test_image_run_draws_the_comparison_and_every_steps_loss(tmp_path, image_run):
    out = tmp_path / "run"
    assert inr_fit([*image_run, "--out", str(out)]) == 0
    comparison = iio.imread(out / "comparison.png")
    assert comparison.ndim == 3 and comparison.shape[1] > comparison.shape[0]  # three panels side by side
    assert iio.imread(out / "curve.png").ndim == 3
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    assert len(payload["losses"]) == 8 and payload["losses"][-1] == payload["history"][-1]["loss"]


def test_audio_run_draws_waveform_and_spectrogram(tmp_path):
    config, clip = write_tiny_config(tmp_path, checkpoint_every=4), tmp_path / "in.wav"
    soundfile.write(clip, np.random.default_rng(2).uniform(-0.5, 0.5, 600).astype(np.float32), 8000, subtype="PCM_16")
    assert inr_fit(["audio", str(clip), "--config", str(config), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert iio.imread(tmp_path / "run" / "comparison.png").ndim == 3


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0})
    log.Reload()
    return log


def test_tensorboard_holds_every_step_each_evaluation_and_the_pictures(tmp_path, image_run):
    out = tmp_path / "run"
    assert inr_fit([*image_run, "--out", str(out), "--vis", "tensorboard"]) == 0
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    log = _events(out / "tensorboard")
    loss = log.Scalars("train/loss")
    assert [e.step for e in loss] == list(range(1, 9))
    assert [e.value for e in loss] == pytest.approx(payload["losses"], rel=1e-6)  # stored as float32
    psnr = log.Scalars("eval/psnr")
    assert ([(e.step, e.value) for e in psnr]
            == [(h["step"], pytest.approx(h["psnr"], rel=1e-6)) for h in payload["history"]])
    assert [e.value for e in log.Scalars("train/lr")] == pytest.approx([1e-2] * 8)
    assert all(e.value > 0 for e in log.Scalars("train/samples_per_s"))
    assert {"pictures/comparison", "pictures/reconstruction"} <= set(log.Tags()["images"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert psnr[-1].value == pytest.approx(metrics["psnr"], abs=1e-3)


def test_a_resumed_run_appends_and_an_overwriting_one_replaces_the_log(tmp_path, image_run):
    out = tmp_path / "run"
    assert inr_fit([*image_run, "--out", str(out), "--vis", "tensorboard", "--steps", "4"]) == 0
    assert inr_fit(["image", "--resume", str(out), "--steps", "8", "--vis", "tensorboard", "--quiet"]) == 0
    assert [e.step for e in _events(out / "tensorboard").Scalars("train/loss")] == list(range(1, 9))
    assert inr_fit([*image_run, "--out", str(out), "--vis", "tensorboard", "--steps", "2", "--overwrite"]) == 0
    assert [e.step for e in _events(out / "tensorboard").Scalars("train/loss")] == [1, 2]


def test_a_run_resumed_after_a_crash_logs_each_step_once(tmp_path, image_run, monkeypatch):
    from inr_enc.fitting.loop import Fitter

    out = tmp_path / "run"
    step = Fitter._step

    def crash_at_step_7(self):  # after the step-4 checkpoint and six logged steps
        if self.states[0].step == 6:
            raise RuntimeError("the machine went away")
        return step(self)

    monkeypatch.setattr(Fitter, "_step", crash_at_step_7)
    with pytest.raises(RuntimeError):
        inr_fit([*image_run, "--out", str(out), "--vis", "tensorboard"])
    monkeypatch.undo()
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 4
    assert inr_fit(["image", "--resume", str(out), "--vis", "tensorboard", "--quiet"]) == 0
    assert [e.step for e in _events(out / "tensorboard").Scalars("train/loss")] == list(range(1, 9))
