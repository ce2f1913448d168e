"""Estimate the poses of a rendered scene (render_scene.py) with COLMAP (the pycolmap wheel) and write them in the
nerfstudio-data format: the variant of data/scenes/SCENE whose poses come from SfM, as with `ns-process-data`.

From the repository root, after scenes/render_scene.py:

    /tmp/bpy-venv/bin/pip install pycolmap numpy      # tested with pycolmap 4.2.1 (any venv will do)
    /tmp/bpy-venv/bin/python scenes/colmap_scene.py --images data/scenes/unbounded \
        --out data/scenes/unbounded-colmap

Steps, as `ns-process-data images` runs them (nerfstudio/process_data/colmap_utils.py): SIFT feature extraction
with one shared camera (camera model OPENCV, the default for perspective images), exhaustive matching, incremental
mapping; the largest model is kept. The 320x240 images in IMAGES/images are used (at 160x120, in issue 14, only 10
of 64 views registered). The model is converted as nerfstudio's `colmap_to_json` does it (documented there):
COLMAP stores world-to-camera poses in the OpenCV camera convention (x right, y down, z forward); the inverse is
camera-to-world, and negating its y and z columns turns it into the OpenGL convention nerfstudio uses. Then the
world axes are changed, (x, y, z) -> (x, z, -y) (rows [0, 2, 1] of the pose, the new z negated), which turns
COLMAP's usual "y down" world into a roughly "z up" one, and that 3x4 transform is stored as "applied_transform".
Checked: on the same model, nerfstudio 1.1.5's colmap_to_json gives the same poses (to 1e-15), intrinsics and points.

Output:
    OUT/transforms.json  {"w", "h", "fl_x", "fl_y", "cx", "cy", "k1", "k2", "p1", "p2", "camera_model": "OPENCV",
                          "frames": [{"file_path": "images/frame_00001.jpg", "transform_matrix", "colmap_im_id"}],
                          "applied_transform": 3x4, "ply_file_path": "sparse_pc.ply"}  (registered views only)
    OUT/sparse_pc.ply    the sparse points (ASCII: x y z red green blue), in the same world frame as the poses
    OUT/images, OUT/images_2  relative symbolic links to IMAGES/images and IMAGES/images_2 (no copies), so that
                              `--downscale-factor 2` (which reads OUT/images_2/NAME) works too
--out defaults to IMAGES-colmap. --verbose shows COLMAP's log; --work DIR keeps COLMAP's database and sparse model
(default: a temporary folder, deleted at the end).
If IMAGES/transforms.json has the rendered (true) poses, the COLMAP camera centres are aligned to them with a
similarity transform (Umeyama) and the residual position error is printed, next to the spread of the rendered
centres (their RMS distance from their mean: about the orbit radius for an orbit) for scale, and the angle by which
each camera's rotation differs from the rendered one after the same alignment.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import pycolmap
from scene_files import scratch_folder, staged_folder, write_transforms


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scenes/colmap_scene.py")
    p.add_argument("--images", default="data/scenes/unbounded", help="dataset with images/ (and images_2/)")
    p.add_argument("--out", default=None, help="output dataset directory (default: IMAGES-colmap)")
    p.add_argument("--work", default=None, help="keep COLMAP's database and model here")
    p.add_argument("--camera-model", default="OPENCV", help="COLMAP camera model (one camera for all views)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the mapper")
    p.add_argument("--verbose", action="store_true", help="show COLMAP's INFO log (by default warnings and up)")
    args = p.parse_args(argv)
    args.out = args.out or args.images.rstrip("/") + "-colmap"
    return args


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Similarity (s, R, t) minimising |s R src + t - dst|^2 (Umeyama 1991); src, dst are N x 3."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    u, d, vt = np.linalg.svd(b.T @ a / len(src))
    e = np.eye(3)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        e[2, 2] = -1
    r = u @ e @ vt
    s = np.trace(np.diag(d) @ e) / a.var(0).sum()
    return s, r, mu_d - s * r @ mu_s


def camera_params(cam: pycolmap.Camera) -> dict:
    """nerfstudio's parse_colmap_camera_params for the models used here (OPENCV, PINHOLE, SIMPLE_*)."""
    p = [float(v) for v in cam.params]
    model = cam.model_name
    out = {"w": int(cam.width), "h": int(cam.height), "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0}
    if model == "OPENCV":
        out.update(fl_x=p[0], fl_y=p[1], cx=p[2], cy=p[3], k1=p[4], k2=p[5], p1=p[6], p2=p[7])
    elif model == "PINHOLE":
        out.update(fl_x=p[0], fl_y=p[1], cx=p[2], cy=p[3])
    elif model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL"):
        out.update(fl_x=p[0], fl_y=p[0], cx=p[1], cy=p[2])
        if model != "SIMPLE_PINHOLE":
            out["k1"] = p[3]
        if model == "RADIAL":
            out["k2"] = p[4]
    else:
        raise ValueError(f"camera model {model} not handled here")
    out["camera_model"] = "OPENCV"
    return out


def main() -> None:
    args = parse_args(sys.argv[1:])
    src, out = os.path.abspath(args.images), os.path.abspath(args.out)
    image_dir = os.path.join(src, "images")
    names = sorted(os.listdir(image_dir))
    if not args.verbose:
        pycolmap.logging.minloglevel = 1  # glog: 0 INFO, 1 WARNING
    t0 = time.perf_counter()
    with scratch_folder(args.work, "colmap_scene.") as work:  # a temporary folder unless --work
        db = os.path.join(work, "database.db")
        if os.path.exists(db):
            os.remove(db)
        reader = pycolmap.ImageReaderOptions()
        reader.camera_model = args.camera_model
        pycolmap.extract_features(db, image_dir, camera_mode=pycolmap.CameraMode.SINGLE, reader_options=reader,
                                  device=pycolmap.Device.cpu)
        t1 = time.perf_counter()
        pycolmap.match_exhaustive(db, device=pycolmap.Device.cpu)
        t2 = time.perf_counter()
        opts = pycolmap.IncrementalPipelineOptions()
        opts.random_seed = args.seed
        sparse = os.path.join(work, "sparse")
        os.makedirs(sparse, exist_ok=True)
        models = pycolmap.incremental_mapping(db, image_dir, sparse, opts)
        t3 = time.perf_counter()
        if not models:
            raise SystemExit("colmap_scene: COLMAP reconstructed nothing")
        rec = max(models.values(), key=lambda r: r.num_reg_images())
        print(f"colmap_scene: times: features {t1 - t0:.1f}s, matching {t2 - t1:.1f}s, mapping {t3 - t2:.1f}s;"
              f" {len(models)} model(s), the largest registers {rec.num_reg_images()} of {len(names)} images,"
              f" {rec.num_points3D()} points", flush=True)
        print(rec.summary())

        # Convert like nerfstudio's colmap_to_json (keep_original_world_coordinate=False).
        applied = np.eye(4)[:3, :][[0, 2, 1], :]
        applied[2, :] *= -1
        frames, poses = [], {}  # poses: name -> camera-to-world 3x4 (OpenGL axes)
        for im_id, im in rec.images.items():
            if not im.has_pose:
                continue
            w2c = np.eye(4)
            w2c[:3, :] = im.cam_from_world().matrix() if callable(im.cam_from_world) else im.cam_from_world.matrix()
            c2w = np.linalg.inv(w2c)
            c2w[0:3, 1:3] *= -1  # OpenCV camera axes -> OpenGL
            c2w = c2w[[0, 2, 1, 3], :]
            c2w[2, :] *= -1
            frames.append({"file_path": f"images/{im.name}", "transform_matrix": c2w.tolist(), "colmap_im_id": im_id})
            poses[im.name] = c2w[:3, :]
        frames.sort(key=lambda f: f["file_path"])
        cams = list(rec.cameras.values())
        assert len(cams) == 1, "expected one shared camera"
        meta = camera_params(cams[0])
        meta.update(frames=frames, applied_transform=applied.tolist(), ply_file_path="sparse_pc.ply")

        with staged_folder(out) as staging:  # an interrupted run leaves `out` as it was
            write_transforms(os.path.join(staging, "transforms.json"), meta)
            with open(os.path.join(staging, "sparse_pc.ply"), "w") as f:
                pts = list(rec.points3D.values())
                f.write(f"ply\nformat ascii 1.0\nelement vertex {len(pts)}\nproperty float x\nproperty float y\n"
                        "property float z\nproperty uint8 red\nproperty uint8 green\nproperty uint8 blue\n"
                        "end_header\n")
                for pt in pts:
                    x, y, z = applied @ np.append(pt.xyz, 1.0)
                    r, g, b = (int(c) for c in pt.color)
                    f.write(f"{x:.5f} {y:.5f} {z:.5f} {r} {g} {b}\n")
            for sub in ("images", "images_2"):
                if os.path.isdir(os.path.join(src, sub)):
                    os.symlink(os.path.relpath(os.path.join(src, sub), out), os.path.join(staging, sub))
        missing = [n for n in names if n not in poses]
        print(f"colmap_scene: wrote {out}: {len(frames)} of {len(names)} views registered;"
              f" not registered: {missing or 'none'}", flush=True)

        truth_path = os.path.join(src, "transforms.json")
        if os.path.exists(truth_path) and len(poses) >= 3:
            with open(truth_path) as f:
                truth = {os.path.basename(fr["file_path"]): np.array(fr["transform_matrix"])[:3, :]
                         for fr in json.load(f)["frames"]}
            common = sorted(set(truth) & set(poses))
            a, b = np.array([poses[n][:, 3] for n in common]), np.array([truth[n][:, 3] for n in common])
            s, r, t = umeyama(a, b)
            err = np.linalg.norm((s * (r @ a.T)).T + t - b, axis=1)
            spread = np.sqrt(((b - b.mean(0)) ** 2).sum(1).mean())
            # the angle of each camera's residual rotation, R_true^T (r R_colmap), after the same alignment
            cos = [(np.trace(truth[n][:, :3].T @ r @ poses[n][:, :3]) - 1) / 2 for n in common]
            angles = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
            print(f"colmap_scene: camera centres vs the rendered poses after a similarity alignment: "
                  f"mean error {err.mean():.4f}, max {err.max():.4f} scene units (the rendered centres' RMS"
                  f" distance from their mean: {spread:.3f}); rotations off by {angles.mean():.2f} degrees on"
                  f" average, {angles.max():.2f} at most", flush=True)
    print(f"colmap_scene: done in {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
