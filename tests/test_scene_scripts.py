"""scenes/llff_to_nerfstudio.py: LLFF's poses_bounds.npy into nerfstudio-data, checked against poses worked out by
hand from LLFF's documented layout (columns: down, right, backwards, centre, (h, w, focal))."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

SCENES = Path(__file__).resolve().parents[1] / "scenes"


@pytest.fixture
def llff(monkeypatch):
    monkeypatch.syspath_prepend(str(SCENES))  # the script imports scene_files from its own folder
    spec = importlib.util.spec_from_file_location("llff_to_nerfstudio", SCENES / "llff_to_nerfstudio.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def llff_row(down, right, back, centre, hwf, near=0.5, far=9.0) -> np.ndarray:
    return np.append(np.stack([down, right, back, centre, hwf], axis=1).reshape(-1), [near, far])


# A camera at (1, 2, 3) looking along world +y with world +z up: down = -z, right = +x, backwards = -y.
LOOKING_ALONG_Y = llff_row((0, 0, -1), (1, 0, 0), (0, -1, 0), (1, 2, 3), (30, 40, 50))
# Worked out by hand: OpenGL axes (right, up, backwards) as columns, the centre last.
LOOKING_ALONG_Y_C2W = np.array([[1, 0, 0, 1], [0, 0, -1, 2], [0, 1, 0, 3], [0, 0, 0, 1]], dtype=float)


def test_pose_matches_the_hand_computed_one(llff):
    c2w, hwf = llff.llff_poses(LOOKING_ALONG_Y[None])
    np.testing.assert_array_equal(c2w[0], LOOKING_ALONG_Y_C2W)
    np.testing.assert_array_equal(hwf[0], [30, 40, 50])
    # a point 5 units in front of the camera lies on its -z axis (OpenGL), i.e. at the principal point
    ahead = np.linalg.inv(c2w[0]) @ np.array([1.0, 7.0, 3.0, 1.0])
    np.testing.assert_allclose(ahead[:3], [0, 0, -5], atol=1e-12)


def test_intrinsics_scale_with_the_written_size(llff):
    meta = llff.intrinsics(np.array([30.0, 40.0, 50.0]), width=20, height=16)
    assert (meta["fl_x"], meta["fl_y"], meta["cx"], meta["cy"]) == (25.0, 50 * 16 / 30, 10.0, 8.0)


def test_rejects_arrays_of_the_wrong_shape(llff):
    with pytest.raises(ValueError, match=r"\(N, 17\)"):
        llff.llff_poses(np.zeros((3, 15)))


def make_capture(folder: Path, rows: list[np.ndarray], names: list[str], size=(40, 30)) -> None:
    (folder / "images").mkdir(parents=True)
    for i, name in enumerate(names):
        Image.new("RGB", size, (10 * i, 100, 200)).save(folder / "images" / name)
    np.save(folder / "poses_bounds.npy", np.stack(rows))


def run_script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCENES / "llff_to_nerfstudio.py"), *map(str, args)],
                          capture_output=True, text=True, check=False)


def test_writes_nerfstudio_data_in_sorted_name_order(tmp_path):
    other = llff_row((0, 0, -1), (0, 1, 0), (1, 0, 0), (-4, 0, 1), (30, 40, 50))  # looking along -x
    # poses follow the sorted names (a.png, b.png), whatever order the files were written in
    make_capture(tmp_path / "cap", [LOOKING_ALONG_Y, other], ["b.png", "a.png"])
    done = run_script(tmp_path / "cap", "--out", tmp_path / "out", "--long-side", 20)
    assert done.returncode == 0, done.stderr
    meta = json.loads((tmp_path / "out" / "transforms.json").read_text())
    assert [f["original_name"] for f in meta["frames"]] == ["a.png", "b.png"]
    np.testing.assert_allclose(meta["frames"][0]["transform_matrix"], LOOKING_ALONG_Y_C2W)
    assert (meta["w"], meta["h"], meta["fl_x"], meta["fl_y"]) == (20, 16, 25.0, 50 * 16 / 30)
    assert Image.open(tmp_path / "out" / meta["frames"][1]["file_path"]).size == (20, 16)
    assert Image.open(tmp_path / "out" / "images_2" / "frame_00002.jpg").size == (10, 8)


def test_a_pose_count_mismatch_is_one_line_and_writes_nothing(tmp_path):
    make_capture(tmp_path / "cap", [LOOKING_ALONG_Y], ["a.png", "b.png"])
    done = run_script(tmp_path / "cap", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "2 images" in done.stderr and "1 poses" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_damaged_image_or_a_zero_focal_length_is_one_line_and_writes_nothing(tmp_path):
    make_capture(tmp_path / "cap", [LOOKING_ALONG_Y, LOOKING_ALONG_Y], ["a.png", "b.png"])
    (tmp_path / "cap" / "images" / "b.png").write_bytes((tmp_path / "cap" / "images" / "a.png").read_bytes()[:60])
    done = run_script(tmp_path / "cap", "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "b.png: not a readable image" in done.stderr
    zero_focal = LOOKING_ALONG_Y.copy()
    zero_focal[14] = 0.0  # the third row's fifth column: the focal length
    make_capture(tmp_path / "cap2", [zero_focal], ["a.png"])
    done = run_script(tmp_path / "cap2", "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "positive" in done.stderr
    assert not (tmp_path / "out").exists()
