"""Instant-NGP snapshots (inr_enc/nerfstudio/snapshot.py, snapshot_import.py, snapshot_cli.py): the format as
Instant-NGP's testbed writes and reads it (instant-ngp abe236e src/testbed.cu, nerf_device.cuh, nerf_loader.h;
tcnn 6ee3546 trainer.h, common_device.h), exact round trips, and snapshots Instant-NGP itself wrote."""

import functools
import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("nerfstudio")

from nerf_runs import NGP_NERF_BASE  # noqa: E402
from nerfstudio.cameras.rays import Frustums, RayBundle, RaySamples  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402
from nerfstudio.field_components.field_heads import FieldHeadNames  # noqa: E402
from reference import level_layout  # noqa: E402

from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.snapshot import export_snapshot, morton3d, read_snapshot, write_snapshot  # noqa: E402
from inr_enc.nerfstudio.snapshot_cli import saved_to_world  # noqa: E402
from inr_enc.nerfstudio.snapshot_import import load_snapshot, snapshot_settings  # noqa: E402

# instant-ngp's configs/nerf/base.json with 2^12 entries per level (a small snapshot)
CONFIG = {**NGP_NERF_BASE, "encoding": {**NGP_NERF_BASE["encoding"], "log2_hashmap_size": 12}}
MIN_CONE_STEPSIZE = math.sqrt(3) / 1024  # nerf_device.cuh SQRT3() / NERF_STEPS()


@functools.lru_cache(maxsize=None)  # built once per box (three 128^3 grid updates): the tests only read it
def trained_looking(box, seed=0):
    """A model of CONFIG on ``box`` (nested tuples) with random weights (scaled to give structure), its Ema and
    occupancy grid updated a few times."""
    model = InrNerfModelConfig(instant_ngp_config=json.dumps(CONFIG)).setup(
        scene_box=SceneBox(aabb=torch.tensor(box, dtype=torch.float32)), num_train_data=1)
    g = torch.Generator().manual_seed(seed)
    for step in range(3):
        with torch.no_grad():
            for p in model.field.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.65)
        model.weight_average.update()
        model.occupancy.update(step, model.field.density_fn)
    return model


def rays(n=96, seed=1):
    g = torch.Generator().manual_seed(seed)
    directions = torch.nn.functional.normalize(torch.randn(n, 3, generator=g) * 0.1 + torch.tensor([0.0, 1.0, 0.0]),
                                               dim=-1)
    return RayBundle(origins=torch.tensor([0.2, -4.0, 0.1]).repeat(n, 1), directions=directions,
                     pixel_area=torch.full((n, 1), 1e-4), camera_indices=torch.zeros(n, 1, dtype=torch.long))


def render(model):
    model.eval()
    with torch.no_grad():
        return model.get_outputs(rays())


def morton_reference(x, y, z):
    """Bit i of x, y, z at bits 3i, 3i + 1, 3i + 2 (the Morton order tcnn's morton3D computes), one bit at a time."""
    return sum(((x >> i) & 1) << (3 * i) | ((y >> i) & 1) << (3 * i + 1) | ((z >> i) & 1) << (3 * i + 2)
               for i in range(10))


def test_morton_codes_interleave_bits():
    ijk = torch.randint(0, 1024, (500, 3), generator=torch.Generator().manual_seed(0))
    assert morton3d(ijk).tolist() == [morton_reference(*map(int, p)) for p in ijk]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["scene.ingp", "scene.msgpack"])
def test_export_then_import_renders_identically(name, tmp_path):
    box = ((-1.5,) * 3, (1.5,) * 3)
    model = trained_looking(box)
    expected = render(model)
    assert 0.05 < float(expected["accumulation"].mean()) < 0.95  # something to see, and empty space
    write_snapshot(export_snapshot(model, step=12), tmp_path / name)
    snapshot = read_snapshot(tmp_path / name)
    settings = snapshot_settings(snapshot)
    assert "unit_frame" not in settings  # an inr_enc snapshot: the scene box is its unit cube
    imported = InrNerfModelConfig(**settings).setup(scene_box=SceneBox(aabb=torch.tensor(box)), num_train_data=1)
    load_snapshot(imported, snapshot)
    got = render(imported)
    assert all(torch.equal(expected[k], got[k]) for k in ("rgb", "accumulation", "depth"))
    with pytest.raises(ValueError, match=r"snapshot: exported from the scene box"):
        other = InrNerfModelConfig(**settings).setup(scene_box=SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3])),
                                                     num_train_data=1)
        load_snapshot(other, snapshot)


def test_the_snapshot_holds_what_instant_ngps_testbed_reads(tmp_path):
    model = trained_looking(((-1.5,) * 3, (1.5,) * 3))
    snapshot = export_snapshot(model, step=12)
    section = snapshot["snapshot"]
    assert ((section["version"], section["mode"], section["density_grid_size"], section["training_step"])
            == (1, "nerf", 128, 12))
    assert section["nerf"]["aabb_scale"] == 1 and set(section["nerf"]["rgb"]) == {
        "rays_per_batch", "measured_batch_size", "measured_batch_size_before_compaction"}
    assert section["aabb"] == {"min": [0.0] * 3, "max": [1.0] * 3} and section["params_type"] == "float"
    # n_params: nerf_network.h's networks (tcnn-padded) + the hash grid's levels (grid.h sizes) + SH (none)
    levels = level_layout(3, "Hash", 8, 12, 16, 2.0 ** (math.log2(2048 / 16) / 7))
    grid = sum(size for _, _, size, _ in levels) * 4
    networks = (64 * 32 + 16 * 64) + (64 * 32 + 64 * 64 + 16 * 64)
    assert section["n_params"] == networks + grid and len(section["params_binary"]) == 4 * section["n_params"]
    params = np.frombuffer(section["params_binary"], dtype="<f4")
    model.eval()  # the weights written are Ema's average (tcnn's inference params): density network first
    first = model.field.density_network.layers[0].weight.detach().numpy().reshape(-1)
    assert np.array_equal(params[:64 * 32], first)
    rgb_last = model.field.color_network.layers[2].weight.detach().numpy().reshape(-1)
    assert np.array_equal(params[networks - 16 * 64:networks], rgb_last)
    # the density grid: float16 optical thickness in Morton order; cell (i, j, k) of the scene box's 128^3
    grid_values = np.frombuffer(section["density_grid_binary"], dtype="<f2")
    assert len(grid_values) == 128**3
    occupancy, r = model.occupancy, 128
    for i, j, k in [(0, 0, 0), (64, 70, 3), (127, 1, 100), (40, 64, 64)]:
        opacity = float(occupancy.opacity[(i * r + j) * r + k])  # density * the model's step (world units)
        density_per_unit = opacity / model.step_size * 3.0  # the box is 3 world units across
        assert float(grid_values[morton_reference(i, j, k)]) == pytest.approx(
            float(np.float16(density_per_unit * MIN_CONE_STEPSIZE)), rel=1e-3, abs=1e-7)
    # the network config around it is Instant-NGP's: it rebuilds the same field
    assert snapshot["encoding"]["otype"] == "HashGrid" and snapshot["network"]["n_neurons"] == 64
    assert snapshot["dir_encoding"] == {"otype": "Composite", "reduction": "Concatenation", "nested": [
        {"otype": "SphericalHarmonics", "degree": 4, "n_dims_to_encode": 3, "dims_to_encode_begin": 0}]}
    assert snapshot["loss"] == {"otype": "Huber"} and snapshot["optimizer"]["otype"] == "Ema"


@pytest.mark.slow
def test_a_snapshot_instant_ngp_wrote_is_read_through_its_dataset_transform():
    unit = trained_looking(((0.0,) * 3, (1.0,) * 3), seed=3)  # its world is the unit cube: density per unit length
    snapshot = export_snapshot(unit)
    del snapshot["snapshot"]["inr_enc"]  # as Instant-NGP writes it, with its dataset's transform
    scale, offset = 0.4, [0.5, 0.45, 0.55]
    snapshot["snapshot"]["nerf"]["dataset"] = {"scale": scale, "offset": offset, "from_mitsuba": False}
    settings = snapshot_settings(snapshot)
    model = InrNerfModelConfig(**settings).setup(scene_box=SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3])),
                                                 num_train_data=1)
    load_snapshot(model, snapshot)
    unit.eval()
    model.eval()
    g = torch.Generator().manual_seed(5)
    world = (torch.rand(300, 3, generator=g) * 2 - 1) * 1.2
    nerf = world.double() * scale + torch.tensor(offset, dtype=torch.float64)  # nerf_loader.h nerf_position_to_ngp
    ngp = nerf[:, [1, 2, 0]]  # axes cycled: (x, y, z) <- (y, z, x)
    inside = ((ngp >= 0) & (ngp <= 1)).all(-1)
    assert 50 < int(inside.sum()) < 300
    with torch.no_grad():
        got = model.field.density_fn(world)[:, 0]
        reference = unit.field.density_fn(ngp.float())[:, 0] * scale  # per unit length -> per world length
    # float32 positions through the frame differ from the float64 reference by ~5e-8, which the finest grid level
    # (2048 cells) and exp carry into ~3e-4 of the density
    assert torch.allclose(got[inside], reference[inside], rtol=2e-3) and bool((got[~inside] == 0).all())
    # colour: the direction is cycled as the position is (nerf_loader.h nerf_direction_to_ngp), not scaled
    directions = torch.nn.functional.normalize(torch.randn(300, 3, generator=g), dim=-1)
    colours = []
    for field, points, dirs in ((model.field, world, directions), (unit.field, ngp.float(), directions[:, [1, 2, 0]])):
        samples = RaySamples(frustums=Frustums(origins=points, directions=dirs, starts=torch.zeros(300, 1),
                                               ends=torch.zeros(300, 1), pixel_area=torch.full((300, 1), 1e-4)))
        with torch.no_grad():
            colours.append(field.get_outputs(samples, field.get_density(samples)[1])[FieldHeadNames.RGB])
    assert torch.allclose(colours[0][inside], colours[1][inside], atol=2e-3)
    # its occupancy: each of our cells takes the Instant-NGP cell it falls in (thickness -> density * our step)
    grid_values = np.frombuffer(snapshot["snapshot"]["density_grid_binary"], dtype="<f2")
    centre = model.occupancy.aabb[0] + (torch.tensor([10, 64, 90]) + 0.5) / 128 * (
        model.occupancy.aabb[1] - model.occupancy.aabb[0])
    cell = ((centre.double() * scale + torch.tensor(offset, dtype=torch.float64))[[1, 2, 0]] * 128).floor().long()
    expected = float(grid_values[morton_reference(*cell.tolist())]) / MIN_CONE_STEPSIZE * scale * model.step_size
    assert float(model.occupancy.opacity_at(centre[None])[0]) == pytest.approx(expected, rel=1e-5)


def test_a_capture_is_placed_through_nerfstudios_transform_and_instant_ngps(tmp_path):
    # nerfstudio-data (nerfstudio_dataparser.py): world = s * T p for p as transforms.json holds it, and it reports
    # dataparser_transform = T @ applied_transform, dataparser_scale = s * applied_scale (from original coordinates)
    g = torch.Generator().manual_seed(7)
    def rigid():
        q, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
        return torch.cat([q, torch.randn(3, 1, generator=g, dtype=torch.float64)], 1)
    T, applied, s, applied_scale = rigid(), rigid(), 0.7, 2.5
    row = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    reported = type("Outputs", (), {"dataparser_transform": (torch.cat([T, row]) @ torch.cat([applied, row]))[:3],
                                    "dataparser_scale": s * applied_scale})
    (tmp_path / "transforms.json").write_text(json.dumps({"applied_transform": applied.tolist(),
                                                          "applied_scale": applied_scale}))
    transform, scale = saved_to_world("nerfstudio-data", reported, tmp_path)
    assert torch.allclose(transform, T) and scale == pytest.approx(s)
    snapshot = {"snapshot": {"nerf": {"dataset": {"scale": 0.4, "offset": [0.5, 0.45, 0.55]}}}}
    from inr_enc.nerfstudio.snapshot_import import ngp_unit_frame

    frame = ngp_unit_frame(snapshot, transform, scale)
    world = torch.randn(50, 3, generator=g, dtype=torch.float64)
    saved = torch.linalg.solve(T[:, :3], (world / s - T[:, 3]).T).T  # p = T^-1 (world / s)
    ngp = (saved * 0.4 + torch.tensor([0.5, 0.45, 0.55], dtype=torch.float64))[:, [1, 2, 0]]
    assert torch.allclose(world @ frame[:, :3].T + frame[:, 3], ngp, atol=1e-12)


def test_export_refuses_what_instant_ngp_cannot_hold():
    box = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))
    with pytest.raises(ValueError, match="needs a model of inr_enc's ns-train methods with field_layout 'instant-ngp'"):
        export_snapshot(InrNerfModelConfig(grid_resolution=16).setup(scene_box=box, num_train_data=1))
    tcnn = {"otype": "FullyFusedMLP", "n_neurons": 64, "n_hidden_layers": 1}
    odd = InrNerfModelConfig(field_layout="instant-ngp", network=tcnn, color_network=tcnn, geo_feat_dim=7,
                             rgb_loss="MAPE", grid_resolution=16).setup(scene_box=box, num_train_data=1)
    with pytest.raises(ValueError, match=r"needs grid_resolution 128, 1 \+ geo_feat_dim a multiple of 16, a loss "
                                         r"Instant-NGP has \(not MAPE of the target\)$"):
        export_snapshot(odd)
    relative = InrNerfModelConfig(field_layout="instant-ngp", network=tcnn, color_network=tcnn,
                                  rgb_loss="RelativeL1").setup(scene_box=box, num_train_data=1)
    assert export_snapshot(relative)["loss"] == {"otype": "MAPE"}  # Instant-NGP's NeRF MAPE divides by the prediction


@pytest.mark.parametrize("args, message", [
    (["import", "missing.ingp", "--data", "."], "inr-snapshot: no such snapshot missing.ingp"),
    (["export", "--load-config", "missing.yml", "--output", "x.ingp"], "inr-snapshot: --load-config: no such file"),
    (["import", "junk.ingp", "--data", "."], "inr-snapshot: junk.ingp: not a compressed Instant-NGP snapshot"),
    (["convert"], "inr-snapshot: argument command: invalid choice: 'convert'"),
    (["import", "junk.ingp", "--data", ".", "--dataparser", "colmap"], "inr-snapshot: argument --dataparser: invalid"),
    (["import", "junk.txt", "--data", "."], "inr-snapshot: junk.txt: a snapshot is a .ingp (compressed) or .msgpack"),
])
def test_bad_input_gets_one_line_and_exit_code_2(args, message, tmp_path, capsys, monkeypatch):
    from inr_enc.nerfstudio.snapshot_cli import main  # the entry point runs it (test_instant_ngp_nerf.py)

    (tmp_path / "junk.ingp").write_bytes(b"not a snapshot")
    (tmp_path / "junk.txt").write_bytes(b"not a snapshot")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("inr-snapshot")]
    assert len(lines) == 1 and lines[0].startswith(message), captured.err
    assert captured.out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["junk.ingp", "junk.txt"]  # nothing new
