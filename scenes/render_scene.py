"""Render one scene of the NeRF scene set into the nerfstudio-data format (what `ns-process-data` writes).

Run with Blender's Python module (no Blender install needed), from the repository root:

    python3 -m venv /tmp/bpy-venv && /tmp/bpy-venv/bin/pip install bpy==4.5.15 pillow
    /tmp/bpy-venv/bin/python scenes/render_scene.py --scene room --threads 2

--scene picks the scene; each is a module scenes/scene_NAME.py with its build function, its camera rig (a list of
camera-to-world poses, in the order the frames are written) and its lens, clipping range and default views and
samples. The scenes are built from primitives and procedural textures only (no downloaded assets):
    unbounded  a 360-degree capture around a still life, content out to the horizon (the default)
    room       the inside of a closed, lit room: no sky, everything within a few units
    forward    a forward-facing (LLFF-like) rig: a planar grid of cameras looking at depths of 1.5 to 40 units
    tower      a 10x larger outdoor capture of a thin lattice tower against a cloudy sky
Options: --scene unbounded, --out DIR (default data/scenes/SCENE), --views N and --samples N (defaults: the
scene's), --width 320, --height 240, --seed 0, --threads 0 (0 = all cores), --quality 90 (JPEG quality),
--keep-png DIR (also keep the lossless renders there, e.g. for experiments), --only K (render only frame K, into
--keep-png, to look at a scene; no dataset is written).

Output (the files nerfstudio 1.1.5's `nerfstudio_dataparser.py` reads):
    DIR/transforms.json  {"camera_model": "OPENCV", "fl_x", "fl_y", "cx", "cy", "w", "h", "k1"=..."p2"=0,
                          "frames": [{"file_path": "images/frame_00001.jpg", "transform_matrix": 4x4}, ...]}
    DIR/images/frame_XXXXX.jpg    the renders, --width x --height (320x240)
    DIR/images_2/frame_XXXXX.jpg  the same, downscaled 2x (160x120) by 2x2 box averaging
As with `ns-process-data`, `images_2/` holds the 2x-downscaled copies that the dataparser reads with
`--downscale-factor 2` (it maps `images/NAME` to `images_2/NAME` and halves the intrinsics); without that flag it
picks the factor itself (images are < 1600 px, so factor 1: the 320x240 files). `transform_matrix` is the camera's
matrix_world: camera-to-world in the OpenGL convention (the camera looks down its -z axis, +y up), which is what
nerfstudio expects and also Blender's camera convention. World +z is up. Each rig orders its frames so that
nerfstudio's `--eval-mode interval --eval-interval 8` (frames 1, 9, 17, ... held out) spreads over the views.
"""
from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
import time

import bpy
import numpy as np
from blender_common import add_camera, render_view, setup_cycles
from PIL import Image
from scene_files import scratch_folder, staged_folder, write_transforms

SCENES = ("unbounded", "room", "forward", "tower")
SENSOR_MM = 36.0  # the sensor width; each scene's LENS_MM sets its horizontal FOV, 2 atan(18 / LENS_MM)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scenes/render_scene.py")
    p.add_argument("--scene", choices=SCENES, default="unbounded", help="which scene (scenes/scene_SCENE.py)")
    p.add_argument("--out", default=None, help="output dataset directory (default data/scenes/SCENE)")
    p.add_argument("--views", type=int, default=None, help="number of views (default: the scene's)")
    p.add_argument("--width", type=int, default=320, help="render width in pixels (even)")
    p.add_argument("--height", type=int, default=240, help="render height in pixels (even)")
    p.add_argument("--samples", type=int, default=None,
                   help="Cycles samples per pixel, OpenImageDenoise on top (default: the scene's)")
    p.add_argument("--seed", type=int, default=0, help="seed for the camera jitter, object placement and Cycles")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for Cycles (0 = all)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality of the written images")
    p.add_argument("--keep-png", default=None, help="also keep the lossless PNG renders in this directory")
    p.add_argument("--only", type=int, default=None, help="render only frame K (1-based) into --keep-png")
    args = p.parse_args(argv)
    module = importlib.import_module(f"scene_{args.scene}")
    args.out = args.out or f"data/scenes/{args.scene}"
    args.views = module.VIEWS if args.views is None else args.views
    args.samples = module.SAMPLES if args.samples is None else args.samples
    if args.views < 1 or args.samples < 1 or args.width % 2 or args.height % 2 or min(args.width, args.height) < 2:
        p.error("--views and --samples must be >= 1, --width and --height even")
    if args.only is not None and not (args.keep_png and 1 <= args.only <= args.views):
        p.error("--only K needs --keep-png and 1 <= K <= --views")
    return args


def setup_render(args: argparse.Namespace, lens_mm: float, clip: tuple[float, float]) -> bpy.types.Object:
    """Cycles settings (opaque film: the sky or the walls are part of the images, RGB) and the camera (`lens_mm`,
    clipping range `clip`), which it returns."""
    import _cycles  # the pip wheel of bpy 4.5 is built with OpenImageDenoise; Debian's Blender is not
    scene = bpy.context.scene
    setup_cycles(args.samples, args.seed, args.threads, args.width, args.height, transparent=False,
                 denoise=bool(getattr(_cycles, "with_openimagedenoise", False)))
    if not scene.cycles.use_denoising:
        print("render_scene: no OpenImageDenoise in this build; rendering without denoising")
    scene.cycles.use_adaptive_sampling = False
    scene.cycles.max_bounces = 4
    cam = add_camera(lens_mm, SENSOR_MM)
    cam.data.clip_start, cam.data.clip_end = clip
    return cam


def write_jpeg(png: str, full: str, half: str, quality: int) -> None:
    """The render as JPEG, and a 2x-downscaled copy (2x2 box average, i.e. area resampling)."""
    img = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)
    h, w, _ = img.shape
    small = img.reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
    Image.fromarray(img.astype(np.uint8)).save(full, quality=quality)
    Image.fromarray(np.clip(np.round(small), 0, 255).astype(np.uint8)).save(half, quality=quality)


def main() -> None:
    args = parse_args(sys.argv[1:])
    scene = importlib.import_module(f"scene_{args.scene}")
    out = os.path.abspath(args.out)
    rng = random.Random(args.seed)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene.build(random.Random(f"{args.seed}-scene"))
    cam = setup_render(args, scene.LENS_MM, scene.CLIP)
    poses = scene.cameras(args.views, rng)
    if args.only is not None:  # one view to look at: PNG only, no dataset
        t1 = time.perf_counter()
        render_view(cam, poses[args.only - 1], os.path.join(os.path.abspath(args.keep_png), f"frame_{args.only:05d}"))
        print(f"render_scene: {args.scene} frame {args.only} {time.perf_counter() - t1:.2f}s", flush=True)
        return
    fl = scene.LENS_MM / SENSOR_MM * args.width  # sensor_fit HORIZONTAL: the sensor width spans the image width
    t0 = time.perf_counter()
    # the PNG renders go to --keep-png or a temporary folder; an interrupted run leaves `out` as it was
    with scratch_folder(args.keep_png, "render_scene_png.") as pngdir, staged_folder(out) as staging:
        for sub in ("images", "images_2"):
            os.makedirs(os.path.join(staging, sub))
        frames = []
        for i, c2w in enumerate(poses):
            name = f"frame_{i + 1:05d}"
            t1 = time.perf_counter()
            render_view(cam, c2w, os.path.join(pngdir, name + ".png"))
            write_jpeg(os.path.join(pngdir, name + ".png"), os.path.join(staging, "images", name + ".jpg"),
                       os.path.join(staging, "images_2", name + ".jpg"), args.quality)
            print(f"render_scene: {name} {time.perf_counter() - t1:.2f}s", flush=True)
            frames.append({"file_path": f"images/{name}.jpg",
                           "transform_matrix": [[round(v, 8) for v in row] for row in c2w]})
        write_transforms(os.path.join(staging, "transforms.json"), {
            "camera_model": "OPENCV", "fl_x": fl, "fl_y": fl, "cx": args.width / 2, "cy": args.height / 2,
            "w": args.width, "h": args.height, "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0, "frames": frames})
    print(f"render_scene: wrote {out} ({args.scene}, {args.views} views, {args.samples} samples) in"
          f" {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
