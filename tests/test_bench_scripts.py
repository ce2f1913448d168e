"""The NeRF benchmark helpers: scripts/render_cost.py (the field's share of a render), the scene-set table of
scripts/bench_nerf_set.py and the side-by-side training of two checkouts (scripts/train_ab.py)."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
import bench_nerf_set  # noqa: E402
import render_ab  # noqa: E402
import train_ab  # noqa: E402

pytest.importorskip("nerfstudio")
from nerfstudio.cameras.cameras import Cameras  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402
from render_cost import render_cost  # noqa: E402

from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402


def test_render_cost_counts_the_samples_the_model_composites():
    torch.manual_seed(0)
    model = InrNerfModelConfig(encoding={"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 12,
                                         "base_resolution": 4}, grid_resolution=16,
                               render_alpha_threshold=0.0,  # keep the untrained field's faint samples
                               ).setup(scene_box=SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3])),
                                       num_train_data=4)
    c2w = torch.tensor([[[1.0, 0, 0, 0], [0, 0, -1, -4], [0, 1, 0, 0]]])  # 4 units back, looking at the origin
    cameras = Cameras(camera_to_worlds=c2w, fx=20.0, fy=20.0, cx=8.0, cy=6.0, width=16, height=12)
    pipeline = SimpleNamespace(model=model, eval=model.eval,
                               datamanager=SimpleNamespace(eval_dataset=SimpleNamespace(cameras=cameras)))
    cost = render_cost(pipeline, n_views=3)
    with torch.no_grad():
        composited = model.get_outputs_for_camera(cameras[0:1])["num_samples_per_ray"]
    assert cost["views"] == 1  # only one camera
    assert cost["kept_samples_per_ray"] == pytest.approx(float(composited.mean()), abs=0.01)
    assert cost["density_points_per_ray"] >= cost["kept_samples_per_ray"] > 0  # each kept sample was marched
    assert 0 < cost["field_share"] <= 1
    assert "_density" not in vars(model.field) and "get_outputs" not in vars(model.field)  # timers removed


def test_render_cost_times_the_proposal_fields_at_the_render_counts():
    torch.manual_seed(0)
    model = InrNerfModelConfig(encoding={"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 12,
                                         "base_resolution": 4}, sampler="proposal", scene_contraction="linf",
                               proposal_samples=(16, 8), proposal_samples_per_ray=6,
                               proposal_render_samples=(5, 4), proposal_render_samples_per_ray=3,
                               ).setup(scene_box=SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3])),
                                       num_train_data=4)
    c2w = torch.tensor([[[1.0, 0, 0, 0], [0, 0, -1, -4], [0, 1, 0, 0]]])
    cameras = Cameras(camera_to_worlds=c2w, fx=20.0, fy=20.0, cx=8.0, cy=6.0, width=16, height=12)
    pipeline = SimpleNamespace(model=model, eval=model.eval,
                               datamanager=SimpleNamespace(eval_dataset=SimpleNamespace(cameras=cameras)))
    cost = render_cost(pipeline, n_views=1)
    assert cost["proposal_points_per_ray"] == 5 + 4 and cost["kept_samples_per_ray"] == 3
    assert cost["density_points_per_ray"] == 3  # the field's density at each composited sample, once
    assert 0 < cost["field_share"] < cost["fields_share"] <= 1 and cost["proposal_s"] > 0
    assert all("density_fn" not in vars(level) for level in model.proposal.fields)  # timers removed


def test_render_cost_is_none_for_a_model_without_our_field():
    assert render_cost(SimpleNamespace(model=SimpleNamespace())) is None


def test_the_set_table_gives_each_methods_mean_and_worst_scene(tmp_path):
    psnrs = {"inr-hashgrid": {"unbounded": 24.0, "room": 30.0, "beer (real)": 21.0}, "nerfacto": {"room": 20.0}}
    for label, scenes in psnrs.items():
        for scene, psnr in scenes.items():
            (tmp_path / label).mkdir(exist_ok=True)
            (tmp_path / label / f"{bench_nerf_set.slug(scene)}.json").write_text(json.dumps(
                {"psnr": psnr, "ssim": 0.8, "iterations": 10, "render_rays_per_s": 5.0, "render_cost": None}))
    proposal = {"field_share": 0.52, "fields_share": 0.87, "proposal_s": 1.2}  # render_cost with proposal fields
    (tmp_path / "inr-hashgrid" / "unbounded.json").write_text(json.dumps(
        {"psnr": 24.0, "ssim": 0.8, "iterations": 10, "render_rays_per_s": 5.0, "render_cost": proposal}))
    lines = bench_nerf_set.table(tmp_path).splitlines()
    assert next(line for line in lines if line.startswith("| unbounded |")).endswith("/ 0.52 (0.87) | — |")
    assert "inr-hashgrid" in lines[0] and lines[0].index("inr-hashgrid") < lines[0].index("nerfacto")
    room = next(line for line in lines if line.startswith("| room |"))
    assert "30.00 /" in room and "20.00 /" in room
    mean = next(line for line in lines if line.startswith("| mean"))
    assert f"**{statistics.fmean([24.0, 30.0, 21.0]):.2f}** over 3" in mean and "**20.00** over 1" in mean
    worst = next(line for line in lines if line.startswith("| worst"))
    assert "**21.00** over 3" in worst


def test_a_set_run_keeps_each_scenes_results_and_skips_kept_scenes(tmp_path, monkeypatch):
    commands = []

    def fake_bench(command, **kwargs):  # bench_nerf.py's output: OUT/METHOD/results.json
        commands.append(command)
        out = Path(command[command.index("--out") + 1])
        (out / "nerfacto").mkdir(parents=True, exist_ok=True)
        (out / "nerfacto" / "results.json").write_text(json.dumps({"psnr": 20.0 + len(commands), "ssim": 0.5,
                                                                   "iterations": 3, "render_rays_per_s": 1.0}))
        return SimpleNamespace(returncode=0, stderr="")

    monkeypatch.setattr(bench_nerf_set.subprocess, "run", fake_bench)
    argv = ["run", "nerfacto", "--scenes", "room", "unbounded", "--rays-per-batch", "1024",
            "--out", str(tmp_path / "out"), "--results", str(tmp_path / "kept")]
    bench_nerf_set.main(argv)
    assert len(commands) == 2 and all(c[c.index("--rays-per-batch") + 1] == "1024" for c in commands)
    kept = json.loads((tmp_path / "kept" / "nerfacto" / "room.json").read_text())
    assert kept["psnr"] in (21.0, 22.0) and "--rays-per-batch 1024" in kept["set_command"]
    bench_nerf_set.main(argv)  # both scenes kept: nothing rerun
    assert len(commands) == 2
    bench_nerf_set.main([*argv, "--force"])
    assert len(commands) == 4


def test_side_by_side_training_alternates_the_checkouts_and_compares_medians(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_bench(command, env, **kwargs):  # bench_nerf.py's output: OUT/METHOD/results.json
        checkout = Path(env["PYTHONPATH"]).name
        calls.append((checkout, command[command.index("--") + 1:] if "--" in command else []))
        out = Path(command[command.index("--out") + 1]) / "inr-hashgrid"
        out.mkdir(parents=True)
        iterations = {"old": [100, 120], "new": [150, 250]}[checkout][sum(c[0] == checkout for c in calls) - 1]
        (out / "results.json").write_text(json.dumps({"iterations": iterations, "train_rays_per_s": 1.0,
                                                      "psnr": 20.0, "render_rays_per_s": 2.0}))
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(render_ab.subprocess, "run", fake_bench)
    train_ab.main(["inr-hashgrid", "--data", "data/scenes/room", "--budget", "5", "--out", str(tmp_path),
                   "--run", "before", str(tmp_path / "old"), "--run", "after", str(tmp_path / "new"),
                   "--pipeline.model.sampler occupancy"])
    assert [c[0] for c in calls] == ["old", "new", "old", "new"]  # taking turns, not one run after the other
    assert calls[1][1] == ["--pipeline.model.sampler", "occupancy"] and calls[0][1] == []
    printed = capsys.readouterr().out
    assert "before: median iterations 110.0, 1.00x" in printed  # medians of 100, 120 and of 150, 250
    assert "after: median iterations 200.0, 1.82x" in printed
    assert (tmp_path / "after" / "round-2" / "inr-hashgrid" / "results.json").exists()
    with pytest.raises(SystemExit):
        train_ab.main(["inr-hashgrid", "--data", "x", "--rounds", "0", "--run", "a", "."])
