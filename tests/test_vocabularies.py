"""One home for each vocabulary: the task registry (inr-fit's sub-commands, folder mode, help, outputs), the loss
registry (inr-fit, tcnn's sections, the plugin), the one list of backends and ``--backend``, the one test for "a run
lives here", the default --out, and the rules inr-fit and ns-train share (ema_decay, rgb_loss)."""

import json
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import yaml

from inr_enc.cli import build_parser
from inr_enc.cli import main as inr_fit
from inr_enc.config.backends import BACKENDS
from inr_enc.encoders import ENCODERS
from inr_enc.field.schema import resolve_run, resolve_training
from inr_enc.field.tcnn_sections import training_from_tcnn
from inr_enc.fitting import tasks as registry
from inr_enc.fitting.inputs import default_out, list_signals
from inr_enc.fitting.outputs import OUTPUT_FILES
from inr_enc.fitting.run_folder import holds_run
from inr_enc.optim.losses import LOSSES, TCNN_LOSSES, check_loss, elementwise_loss

TASK = {"kind": "image", "path": "photo.png", "train_split": False}
GRID = {"encoding": {"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 2, "log2_hashmap_size": 8,
                     "base_resolution": 4, "per_level_scale": 2.0},
        "network": {"otype": "FullyFusedMLP", "n_neurons": 16, "n_hidden_layers": 1, "output_activation": "Sigmoid"},
        "training": {"steps": 4, "lr": 1e-2, "eval_every": 2, "checkpoint_every": 2}}


def test_the_tasks_declare_what_inr_fit_reads():
    found = {kind: (t.folder, t.unit, t.config, t.suffixes[:3]) for kind, t in registry.tasks().items()}
    assert found == {"audio": ("audios", "sample", "siren-audio", (".wav", ".flac", ".ogg")),
                     "image": ("images", "pixel", "hashgrid", (".png", ".jpg", ".jpeg"))}
    assert registry.tasks()["image"].sample.is_file() and registry.tasks()["audio"].sample is None
    for pattern in ("reconstruction.png", "reconstruction_level*.wav", "reconstruction.ogg", "comparison.png"):
        assert pattern in OUTPUT_FILES
    with pytest.raises(ValueError, match="unknown task 'video'; tasks: audio, image"):
        registry.task_info("video")


def test_a_registered_task_is_a_sub_command_with_its_folder_mode_and_help(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_TASKS", dict(registry.tasks()))

    @registry.register_task("volume", "volumes", (".NPY",), "voxel", "hashgrid", ("reconstruction.npy",))
    class VolumeTask:
        pass

    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "task")
    assert choices == ["audio", "image", "volume", "audios", "images", "volumes", "configs"]
    assert "volume (.npy)" in parser.format_help().replace("\n", " ").replace("  ", " ")
    (tmp_path / "a.npy").write_bytes(b"")
    (tmp_path / "b.png").write_bytes(b"")
    assert list_signals("volume", str(tmp_path)) == [tmp_path / "a.npy"]  # the folder mode reads its suffixes
    with pytest.raises(AssertionError, match="registered twice"):
        registry.register_task("volume", "volumes2", (), "voxel", "hashgrid", ())(VolumeTask)


def test_the_command_line_is_built_without_torch():
    script = ("import sys; from inr_enc.cli import build_parser; build_parser().format_help(); "
              "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'loaded early'")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_run_lives_where_config_and_checkpoint_are_and_the_default_out(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("{}")
    assert not holds_run(tmp_path)
    assert inr_fit(["image", "--resume", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"inr-fit: {tmp_path}: no run to resume (needs config.yaml and checkpoint.pt)\n"
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    assert holds_run(tmp_path) and not holds_run(tmp_path / "nothing")
    assert default_out("photos/cat.png", ["configs/hashgrid.yaml"], folder=False) == Path("out/cat-hashgrid")
    expected = Path(f"out/{tmp_path.name}-hashgrid+siren")
    assert default_out(str(tmp_path / "*.png"), ["hashgrid", "siren"], folder=True) == expected


def test_one_loss_registry_with_tcnns_names():
    assert list(LOSSES) == ["MSE", "L1", "RelativeL1", "RelativeL2", "MAPE", "SMAPE", "Huber"]
    assert TCNN_LOSSES == {"L2": "MSE", "L1": "L1", "RelativeL1": "RelativeL1", "RelativeL2": "RelativeL2",
                           "MAPE": "MAPE", "SMAPE": "SMAPE", "Huber": "Huber", "SmoothL1": "Huber"}  # tcnn, Instant-NGP
    names = ("l2", "smoothl1", "relativel1")
    assert [check_loss("s", "loss", name) for name in names] == ["MSE", "Huber", "RelativeL1"]
    assert resolve_training({"loss": "SmoothL1"})["loss"] == training_from_tcnn({"otype": "SmoothL1"}, None)["loss"]
    with pytest.raises(ValueError, match=r"^training: 'loss' must be one of MSE, L1, RelativeL1, RelativeL2, MAPE, "
                                         r"SMAPE, Huber, L2, SmoothL1; got 'LogL1'$"):
        resolve_training({"loss": "LogL1"})
    p, t = torch.tensor([0.5, -0.2]), torch.tensor([0.3, 0.3])
    assert torch.allclose(elementwise_loss("MAPE", p, t), torch.tensor([0.2, 0.5]) / 0.31)


def test_ema_decay_and_rgb_loss_follow_one_rule_in_inr_fit_and_ns_train():
    pytest.importorskip("nerfstudio")
    from inr_enc.nerfstudio.model import InrNerfModelConfig

    message = r"'ema_decay' must be in \(0, 1\) \(null: no moving average\), got 0"
    with pytest.raises(ValueError, match=f"^training: {message}"):
        resolve_training({"ema_decay": 0})
    with pytest.raises(ValueError, match=f"^InrNerfModelConfig: {message}"):
        InrNerfModelConfig(ema_decay=0.0)
    assert resolve_training({"ema_decay": 0.5})["ema_decay"] == InrNerfModelConfig(ema_decay=0.5).ema_decay == 0.5
    assert InrNerfModelConfig(rgb_loss="L2").rgb_loss == resolve_training({"loss": "L2"})["loss"] == "MSE"
    with pytest.raises(ValueError, match="^InrNerfModelConfig: 'rgb_loss' must be one of MSE"):
        InrNerfModelConfig(rgb_loss="LogL1")
    import typing
    assert typing.get_args(typing.get_type_hints(InrNerfModelConfig)["backend"]) == BACKENDS


def test_one_list_of_backends_and_the_schema_checks_the_runs():
    assert BACKENDS == ("auto", "torch", "cpp", "triton", "tcnn")
    assert ENCODERS["HashGrid"].supported_backends == {"torch", "cpp", "triton", "tcnn"}
    assert resolve_run(GRID, TASK, 2, 3, [8, 8])["backend"] == "auto"
    assert resolve_run({**GRID, "backend": "cpp"}, TASK, 2, 3, [8, 8])["backend"] == "cpp"
    assert resolve_run({**GRID, "backend": "cpp"}, TASK, 2, 3, [8, 8], backend="torch")["backend"] == "torch"
    with pytest.raises(ValueError, match=r"^Frequency: backend 'cpp' has no implementation of this encoding; it has "
                                         r"tcnn, torch \(or 'auto'\)$"):
        resolve_run({"encoding": {"otype": "Composite", "nested": [{"otype": "Frequency", "n_dims_to_encode": 1},
                                                                   {"otype": "HashGrid"}]}}, TASK, 2, 3, [8, 8],
                    backend="cpp")
    tcnn_composite = {"encoding": {"otype": "Composite", "nested": [{"otype": "Frequency", "n_dims_to_encode": 1},
                                                                     {"otype": "HashGrid"}]}, "backend": "tcnn"}
    assert resolve_run(tcnn_composite, TASK, 2, 3, [8, 8])["backend"] == "tcnn"  # tcnn runs the whole composition
    with pytest.raises(ValueError, match=r"^config: 'backend' must be one of auto, torch, cpp, triton, tcnn; got"):
        resolve_run({**GRID, "backend": "cuda"}, TASK, 2, 3, [8, 8])


@pytest.fixture
def grid_run(tmp_path):
    config = tmp_path / "grid.yaml"
    config.write_text(yaml.safe_dump(GRID))
    image = tmp_path / "img.png"
    iio.imwrite(image, np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
    return ["image", str(image), "--config", str(config), "--device", "cpu", "--quiet"]


def test_backend_torch_and_cpp_fit_the_same_and_a_resumed_run_keeps_its_backend(grid_run, tmp_path):
    runs = {}
    for backend in ("torch", "cpp"):
        out = tmp_path / backend
        assert inr_fit([*grid_run, "--backend", backend, "--out", str(out)]) == 0
        saved = yaml.safe_load((out / "config.yaml").read_text())
        metrics = json.loads((out / "metrics.json").read_text())
        assert saved["backend"] == backend and metrics["provenance"]["encoders"] == {"encoder": backend}
        runs[backend] = (torch.load(out / "checkpoint.pt", weights_only=True)["model"], metrics["psnr"])
    torch_run, cpp_run = runs["torch"], runs["cpp"]
    for name, value in torch_run[0].items():
        assert torch.allclose(value, cpp_run[0][name], rtol=1e-4, atol=1e-5), name
    assert cpp_run[1] == pytest.approx(torch_run[1], abs=1e-3)
    assert inr_fit(["image", "--resume", str(tmp_path / "torch"), "--steps", "6", "--quiet"]) == 0
    metrics = json.loads((tmp_path / "torch" / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["provenance"]["encoders"] == {"encoder": "torch"}
    assert yaml.safe_load((tmp_path / "torch" / "config.yaml").read_text())["backend"] == "torch"


def test_backend_tcnn_without_tiny_cuda_nn_is_one_line_and_exit_2(grid_run, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine may run tcnn")
    assert inr_fit([*grid_run, "--backend", "tcnn", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inr-fit: HashGrid: backend 'tcnn' unavailable: "), err
    assert inr_fit(["image", "--resume", str(tmp_path / "t"), "--backend", "torch"]) == 2
    assert "drop --backend" in capsys.readouterr().err
