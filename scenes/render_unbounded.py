"""Render an unbounded, opaque 360-degree scene into the nerfstudio-data format (what `ns-process-data` writes).

Run with Blender's Python module (no Blender install needed), from the repository root:

    python3 -m venv /tmp/bpy-venv && /tmp/bpy-venv/bin/pip install bpy==4.5.15 pillow
    /tmp/bpy-venv/bin/python scenes/render_unbounded.py --out data/scenes/unbounded

Options: --out DIR, --views 64, --width 320, --height 240, --samples 32, --seed 0, --threads 0 (0 = all cores),
--quality 90 (JPEG quality), --keep-png DIR (also keep the lossless renders there, e.g. for experiments).

The scene is built from primitives only (no downloaded assets): a textured ground plane 4 km across (it reaches the
horizon), a sky (a world-background gradient with procedural clouds, so sky pixels are not one colour), objects
near the centre (inside radius ~1.3), at mid distance (radius 6 to 10) and far away (radius 25 to 120), each with a
procedural texture. This is the setting mip-NeRF 360 (Barron et al., CVPR 2022) is about: cameras all around a
central object, content at every distance, "unbounded" scenes in which the background is not a constant colour
that can be composited away. Cameras orbit the centre at about 3.6 units and look inwards, with seeded jitter in
radius, height, azimuth and look-at point (the mip-NeRF 360 dataset's captures likewise circle a central object).

Output (the files nerfstudio 1.1.5's `nerfstudio_dataparser.py` reads):
    DIR/transforms.json  {"camera_model": "OPENCV", "fl_x", "fl_y", "cx", "cy", "w", "h", "k1"=..."p2"=0,
                          "frames": [{"file_path": "images/frame_00001.jpg", "transform_matrix": 4x4}, ...]}
    DIR/images/frame_XXXXX.jpg    the renders, --width x --height (320x240)
    DIR/images_2/frame_XXXXX.jpg  the same, downscaled 2x (160x120) by 2x2 box averaging
As with `ns-process-data`, `images_2/` holds the 2x-downscaled copies that the dataparser reads with
`--downscale-factor 2` (it maps `images/NAME` to `images_2/NAME` and halves the intrinsics); without that flag it
picks the factor itself (images are < 1600 px, so factor 1: the 320x240 files). `transform_matrix` is the camera's
matrix_world: camera-to-world in the OpenGL convention (the camera looks down its -z axis, +y up), which is what
nerfstudio expects and also Blender's camera convention. World +z is up. Frame order is the orbit order, so
nerfstudio's `--eval-mode interval --eval-interval 8` holds out every 8th view (frames 1, 9, 17, ...).
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Iterator

import bpy
import numpy as np
from blender_common import add, add_camera, link, look_at, new_material, render_view, setup_cycles, texture_ramp
from mathutils import Matrix, Vector
from PIL import Image
from scene_files import scratch_folder, staged_folder, write_transforms

CENTRE = Vector((0.0, 0.0, 0.45))  # the orbit's look-at point (the middle of the near objects)
RADIUS, HEIGHT = 3.6, 1.6  # camera orbit radius (xy) and height above the ground
LENS_MM, SENSOR_MM = 24.0, 36.0  # horizontal FOV 2 atan(18 / 24) = 73.7 degrees


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scenes/render_unbounded.py")
    p.add_argument("--out", default="data/scenes/unbounded", help="output dataset directory")
    p.add_argument("--views", type=int, default=64, help="number of views on the orbit")
    p.add_argument("--width", type=int, default=320, help="render width in pixels (even)")
    p.add_argument("--height", type=int, default=240, help="render height in pixels (even)")
    p.add_argument("--samples", type=int, default=32, help="Cycles samples per pixel (OpenImageDenoise on top)")
    p.add_argument("--seed", type=int, default=0, help="seed for the camera jitter, object placement and Cycles")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for Cycles (0 = all)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality of the written images")
    p.add_argument("--keep-png", default=None, help="also keep the lossless PNG renders in this directory")
    args = p.parse_args(argv)
    if args.views < 1 or args.samples < 1 or args.width % 2 or args.height % 2 or min(args.width, args.height) < 2:
        p.error("--views and --samples must be >= 1, --width and --height even")
    return args


# ---------------------------------------------------------------- materials
def material(name: str, color: tuple, color2: tuple, texture: str, scale: float, roughness: float = 0.6,
             coords: str = "Object", detail_scale: float = 0.0) -> bpy.types.Material:
    """Principled BSDF whose base colour goes from `color` to `color2` with the Fac of a procedural texture
    (a ShaderNodeTex* node); with `detail_scale` > 0 a fine noise darkens it a little more, for SfM features."""
    mat, bsdf = new_material(name, roughness)
    tree = mat.node_tree
    tc, out = texture_ramp(tree, texture, scale, color, color2, coords)
    if detail_scale > 0:
        noise, mix = tree.nodes.new("ShaderNodeTexNoise"), tree.nodes.new("ShaderNodeMix")
        noise.inputs["Scale"].default_value = detail_scale
        noise.inputs["Detail"].default_value = 8.0
        mix.data_type, mix.blend_type = "RGBA", "MULTIPLY"
        mix.inputs["Factor"].default_value = 0.6
        tree.links.new(tc.outputs[coords], noise.inputs["Vector"])
        tree.links.new(out, mix.inputs["A"])
        tree.links.new(noise.outputs["Color"], mix.inputs["B"])
        out = mix.outputs["Result"]
    tree.links.new(out, bsdf.inputs["Base Color"])
    return mat


def ground_material() -> bpy.types.Material:
    """Grass-and-sand ground: 1 m checker tiles times a contrasty fine noise, tinted by a large-scale noise, so
    that neighbouring tiles differ (pure checkers repeat, which confuses feature matching)."""
    mat, bsdf = new_material("ground", 0.9)
    t = mat.node_tree
    tc = t.nodes.new("ShaderNodeTexCoord")
    checker = t.nodes.new("ShaderNodeTexChecker")
    checker.inputs["Scale"].default_value = 1.0  # Object coordinates in metres: 1 m squares
    checker.inputs["Color1"].default_value = (0.25, 0.45, 0.12, 1.0)
    checker.inputs["Color2"].default_value = (0.75, 0.62, 0.40, 1.0)
    fine = t.nodes.new("ShaderNodeTexNoise")
    fine.inputs["Scale"].default_value = 4.0
    fine.inputs["Detail"].default_value = 6.0
    fine_ramp = t.nodes.new("ShaderNodeValToRGB")  # stretch the noise (Fac is mostly 0.3..0.7) to dark..white
    fine_ramp.color_ramp.elements[0].position, fine_ramp.color_ramp.elements[1].position = 0.35, 0.65
    fine_ramp.color_ramp.elements[0].color = (0.25, 0.25, 0.25, 1.0)
    coarse = t.nodes.new("ShaderNodeTexNoise")
    coarse.inputs["Scale"].default_value = 0.08
    m1, m2 = t.nodes.new("ShaderNodeMix"), t.nodes.new("ShaderNodeMix")
    for m in (m1, m2):
        m.data_type, m.blend_type = "RGBA", "MULTIPLY"
    m1.inputs["Factor"].default_value, m2.inputs["Factor"].default_value = 1.0, 0.5
    for node in (checker, fine, coarse):
        t.links.new(tc.outputs["Object"], node.inputs["Vector"])
    link(t, (fine, "Fac", fine_ramp, "Fac"), (checker, "Color", m1, "A"), (fine_ramp, "Color", m1, "B"),
         (m1, "Result", m2, "A"), (coarse, "Color", m2, "B"), (m2, "Result", bsdf, "Base Color"))
    return mat


def world_sky() -> None:
    """World background: a vertical gradient (pale at the horizon, blue at the zenith) with noise clouds. In a
    world shader the Generated texture coordinate is the ray direction, so the sky varies across the image."""
    world = bpy.data.worlds.new("sky")
    world.use_nodes = True
    t = world.node_tree
    bg = t.nodes["Background"]
    bg.inputs["Strength"].default_value = 1.0
    tc, sep = t.nodes.new("ShaderNodeTexCoord"), t.nodes.new("ShaderNodeSeparateXYZ")
    grad = t.nodes.new("ShaderNodeValToRGB")
    grad.color_ramp.elements[0].color = (0.80, 0.85, 0.90, 1.0)
    grad.color_ramp.elements[1].position = 0.6
    grad.color_ramp.elements[1].color = (0.18, 0.35, 0.75, 1.0)
    clouds, cloud_ramp, mix = t.nodes.new("ShaderNodeTexNoise"), t.nodes.new("ShaderNodeValToRGB"), t.nodes.new(
        "ShaderNodeMix")
    clouds.inputs["Scale"].default_value = 3.0
    clouds.inputs["Detail"].default_value = 6.0
    cloud_ramp.color_ramp.elements[0].position, cloud_ramp.color_ramp.elements[1].position = 0.45, 0.65
    mix.data_type = "RGBA"
    mix.inputs["B"].default_value = (0.95, 0.95, 0.97, 1.0)
    link(t, (tc, "Generated", sep, "Vector"), (sep, "Z", grad, "Fac"), (tc, "Generated", clouds, "Vector"),
         (clouds, "Fac", cloud_ramp, "Fac"), (cloud_ramp, "Color", mix, "Factor"), (grad, "Color", mix, "A"),
         (mix, "Result", bg, "Color"))
    bpy.context.scene.world = world


# ---------------------------------------------------------------- scene
def materials(prefix: str, specs: list[tuple], detail_scale: float) -> list[bpy.types.Material]:
    """material() for each (color, color2, texture, scale) in `specs`, named prefix0, prefix1, ..."""
    return [material(f"{prefix}{i}", c1, c2, tex, s, detail_scale=detail_scale)
            for i, (c1, c2, tex, s) in enumerate(specs)]


def ring(rng: random.Random, n: int, spread: tuple[float, float], r_min: float,
         r_max: float) -> Iterator[tuple[int, float, float, float]]:
    """(i, x, y, r) for n seeded spots around the origin, the i-th at azimuth 2 pi (i + U(spread)) / n and radius
    U(r_min, r_max). Drawn one at a time, so the caller's own draws for spot i come between them."""
    for i in range(n):
        az = 2 * math.pi * (i + rng.uniform(*spread)) / n
        r = rng.uniform(r_min, r_max)
        yield i, r * math.cos(az), r * math.sin(az), r


def build_scene(rng: random.Random) -> None:
    """The ground, the near, mid-distance and far objects, the sun and the sky."""
    m = bpy.ops.mesh
    add(m.primitive_plane_add, ground_material(), size=4000.0, location=(0, 0, 0))

    # Near: a small still life around the centre (inside radius ~1.3).
    noise = material("crate", (0.75, 0.12, 0.05), (1.0, 0.7, 0.2), "ShaderNodeTexNoise", 6.0, detail_scale=20.0)
    wave = material("ball", (0.1, 0.3, 0.85), (0.9, 0.9, 0.8), "ShaderNodeTexWave", 4.0, 0.35, detail_scale=25.0)
    check = material("drum", (0.95, 0.95, 0.9), (0.1, 0.1, 0.12), "ShaderNodeTexChecker", 5.0, detail_scale=30.0)
    voro = material("cone", (0.1, 0.55, 0.25), (0.85, 0.9, 0.3), "ShaderNodeTexVoronoi", 8.0)
    magic = material("block", (0.55, 0.2, 0.6), (0.95, 0.8, 0.95), "ShaderNodeTexMagic", 3.0, detail_scale=20.0)
    add(m.primitive_cube_add, noise, size=0.7, location=(-0.5, -0.3, 0.35), rotation=(0, 0, math.radians(20)))
    add(m.primitive_uv_sphere_add, wave, smooth=True, segments=48, ring_count=24, radius=0.4,
        location=(0.55, -0.45, 0.4))
    add(m.primitive_cylinder_add, check, vertices=48, radius=0.3, depth=1.1, location=(0.3, 0.55, 0.55))
    add(m.primitive_cone_add, voro, vertices=48, radius1=0.35, depth=0.9, location=(-0.55, 0.6, 0.45))
    add(m.primitive_cube_add, magic, size=0.35, location=(0.05, -0.05, 0.175), rotation=(0, 0, math.radians(-35)))

    # Mid distance: pillars, boxes and balls on a ring of radius 6 to 10 (behind the cameras' orbit of ~3.6).
    mids = materials("mid", [
        ((0.6, 0.6, 0.6), (0.25, 0.2, 0.15), "ShaderNodeTexNoise", 2.0),
        ((0.85, 0.75, 0.5), (0.4, 0.1, 0.1), "ShaderNodeTexWave", 1.5),
        ((0.2, 0.25, 0.5), (0.9, 0.85, 0.6), "ShaderNodeTexChecker", 2.0),
        ((0.9, 0.5, 0.1), (0.2, 0.1, 0.05), "ShaderNodeTexVoronoi", 3.0)], detail_scale=8.0)
    for i, x, y, _ in ring(rng, 10, (0.2, 0.8), 6.0, 10.0):
        mat, kind = mids[i % len(mids)], i % 3
        if kind == 0:
            h = rng.uniform(1.5, 3.5)
            add(m.primitive_cylinder_add, mat, vertices=32, radius=rng.uniform(0.25, 0.5), depth=h,
                location=(x, y, h / 2))
        elif kind == 1:
            s = rng.uniform(0.6, 1.4)
            add(m.primitive_cube_add, mat, size=s, location=(x, y, s / 2),
                rotation=(0, 0, rng.uniform(0, math.pi)))
        else:
            s = rng.uniform(0.4, 0.9)
            add(m.primitive_ico_sphere_add, mat, smooth=True, subdivisions=3, radius=s, location=(x, y, s))

    # Far: towers and domes at radius 25 to 120 (large, so they cover many pixels at 320x240).
    fars = materials("far", [
        ((0.7, 0.65, 0.6), (0.3, 0.3, 0.35), "ShaderNodeTexBrick", 0.5),
        ((0.5, 0.55, 0.6), (0.15, 0.2, 0.25), "ShaderNodeTexNoise", 0.3),
        ((0.8, 0.3, 0.2), (0.95, 0.85, 0.7), "ShaderNodeTexWave", 0.2)], detail_scale=1.5)
    for i, x, y, r in ring(rng, 12, (0.1, 0.9), 25.0, 120.0):
        mat = fars[i % len(fars)]
        if i % 2 == 0:
            w, h = r * rng.uniform(0.06, 0.12), r * rng.uniform(0.1, 0.3)
            tower = add(m.primitive_cube_add, mat, size=1.0, location=(x, y, h / 2),
                        rotation=(0, 0, rng.uniform(0, math.pi)))
            tower.scale = (w, w * rng.uniform(0.6, 1.4), h)
        else:
            add(m.primitive_uv_sphere_add, mat, smooth=True, segments=48, ring_count=24,
                radius=r * rng.uniform(0.08, 0.15), location=(x, y, 0.0))  # half buried: a dome

    sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    sun.data.energy, sun.data.angle = 3.0, math.radians(3.0)
    sun.rotation_euler = (math.radians(50), 0.0, math.radians(35))
    bpy.context.scene.collection.objects.link(sun)
    world_sky()


def setup_render(args: argparse.Namespace) -> bpy.types.Object:
    """Cycles settings (opaque film: the sky is part of the images, RGB) and the camera, which it returns."""
    import _cycles  # the pip wheel of bpy 4.5 is built with OpenImageDenoise; Debian's Blender is not
    scene = bpy.context.scene
    setup_cycles(args.samples, args.seed, args.threads, args.width, args.height, transparent=False,
                 denoise=bool(getattr(_cycles, "with_openimagedenoise", False)))
    if not scene.cycles.use_denoising:
        print("render_unbounded: no OpenImageDenoise in this build; rendering without denoising")
    scene.cycles.use_adaptive_sampling = False
    scene.cycles.max_bounces = 4
    cam = add_camera(LENS_MM, SENSOR_MM)
    cam.data.clip_start, cam.data.clip_end = 0.05, 10000.0
    return cam


# ---------------------------------------------------------------- cameras
def orbit(n: int, rng: random.Random) -> list[Matrix]:
    """n cameras evenly around the centre (in azimuth order), each with seeded jitter."""
    mats = []
    for i in range(n):
        az = 2 * math.pi * i / n + math.radians(rng.uniform(-2.0, 2.0))
        r = RADIUS + rng.uniform(-0.3, 0.3)
        pos = Vector((r * math.cos(az), r * math.sin(az), HEIGHT + rng.uniform(-0.3, 0.3)))
        target = CENTRE + Vector([rng.uniform(-0.2, 0.2) for _ in range(3)])
        mats.append(look_at(pos, target))
    return mats


def write_jpeg(png: str, full: str, half: str, quality: int) -> None:
    """The render as JPEG, and a 2x-downscaled copy (2x2 box average, i.e. area resampling)."""
    img = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)
    h, w, _ = img.shape
    small = img.reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
    Image.fromarray(img.astype(np.uint8)).save(full, quality=quality)
    Image.fromarray(np.clip(np.round(small), 0, 255).astype(np.uint8)).save(half, quality=quality)


def main() -> None:
    args = parse_args(sys.argv[1:])
    out = os.path.abspath(args.out)
    rng = random.Random(args.seed)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    build_scene(random.Random(f"{args.seed}-scene"))
    cam = setup_render(args)
    poses = orbit(args.views, rng)
    fl = LENS_MM / SENSOR_MM * args.width  # sensor_fit HORIZONTAL: the sensor width spans the image width
    t0 = time.perf_counter()
    # the PNG renders go to --keep-png or a temporary folder; an interrupted run leaves `out` as it was
    with scratch_folder(args.keep_png, "render_unbounded_png.") as pngdir, staged_folder(out) as staging:
        for sub in ("images", "images_2"):
            os.makedirs(os.path.join(staging, sub))
        frames = []
        for i, c2w in enumerate(poses):
            name = f"frame_{i + 1:05d}"
            t1 = time.perf_counter()
            render_view(cam, c2w, os.path.join(pngdir, name + ".png"))
            write_jpeg(os.path.join(pngdir, name + ".png"), os.path.join(staging, "images", name + ".jpg"),
                       os.path.join(staging, "images_2", name + ".jpg"), args.quality)
            print(f"render_unbounded: {name} {time.perf_counter() - t1:.2f}s", flush=True)
            frames.append({"file_path": f"images/{name}.jpg",
                           "transform_matrix": [[round(v, 8) for v in row] for row in c2w]})
        write_transforms(os.path.join(staging, "transforms.json"), {
            "camera_model": "OPENCV", "fl_x": fl, "fl_y": fl, "cx": args.width / 2, "cy": args.height / 2,
            "w": args.width, "h": args.height, "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0, "frames": frames})
    print(f"render_unbounded: wrote {out} ({args.views} views) in {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
