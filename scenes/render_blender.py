"""Render a small procedural scene into the NeRF-synthetic ("Blender") dataset format.

Regenerate the committed scene (from the repository root; Debian: `apt-get install blender`):

    blender -b --python-exit-code 1 --python scenes/render_blender.py -- --out data/scenes/primitives

Options (all after the `--`): --out DIR, --resolution 100, --train 40, --val 10, --test 20,
--samples 128, --seed 0, --radius 4.0, --threads 0 (0 = all cores).

The scene, built from primitives only (no downloaded assets), sits on a checkered pedestal inside
[-1, 1]^3: a noise-textured cube, a glossy metallic sphere, a striped cone, a torus and a Suzanne head
on a column. A sun and an area light light it; the background is transparent (film_transparent).
Cameras look at the origin from the upper hemisphere at --radius: train views on a Fibonacci lattice,
val views at seeded random positions, test views on an orbit at 30 degrees elevation. Cycles renders on
the CPU; denoising is used when the Blender build has OpenImageDenoise (Debian's build does not).

Output, as nerfstudio's `blender-data` dataparser reads it (file_path without ".png", which it appends):
    DIR/transforms_{train,val,test}.json  {"camera_angle_x": float,
        "frames": [{"file_path": "./train/r_0", "rotation": float, "transform_matrix": 4x4}]}
    DIR/{train,val,test}/r_{i}.png        RGBA, 8-bit, alpha 0 on the background
transform_matrix is the camera's matrix_world (camera-to-world, OpenGL convention: the camera looks
down its -z axis, y up), which is Blender's camera convention too.
"""
from __future__ import annotations

import argparse
import math
import os
import random
import struct
import sys
import time
from collections.abc import Sequence

import bpy
from mathutils import Vector

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `blender --python` leaves the script's folder out
from blender_common import (add, add_camera, look_at, new_material, render_view, setup_cycles,  # noqa: E402
                            texture_ramp)
from scene_files import staged_folder, write_transforms  # noqa: E402

GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))
MIN_ELEV, MAX_ELEV, TEST_ELEV = math.radians(5.0), math.radians(80.0), math.radians(30.0)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="blender -b --python scenes/render_blender.py --")
    p.add_argument("--out", default="data/scenes/primitives", help="output dataset directory")
    p.add_argument("--resolution", type=int, default=100, help="image width and height in pixels")
    p.add_argument("--train", type=int, default=40, help="number of training views")
    p.add_argument("--val", type=int, default=10, help="number of validation views")
    p.add_argument("--test", type=int, default=20, help="number of test views")
    p.add_argument("--samples", type=int, default=128, help="Cycles samples per pixel (no denoiser in Debian's build)")
    p.add_argument("--seed", type=int, default=0, help="seed for camera positions and Cycles")
    p.add_argument("--radius", type=float, default=4.0, help="camera distance from the origin")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for Cycles (0 = all)")
    args = p.parse_args(argv)
    for name in ("resolution", "samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if min(args.train, args.val, args.test) < 0 or args.radius <= 0:
        p.error("view counts must be >= 0 and --radius > 0")
    return args


# ---------------------------------------------------------------- materials
def material(name: str, color: tuple, roughness: float = 0.5, metallic: float = 0.0, texture: str | None = None,
             color2: tuple = (0.0, 0.0, 0.0), scale: float = 1.0) -> bpy.types.Material:
    """Principled BSDF; with `texture` (a ShaderNodeTex* with a Fac output, in object coordinates) the base
    colour goes from `color` to `color2` with the texture's Fac."""
    mat, bsdf = new_material(name, roughness)
    bsdf.inputs["Base Color"].default_value = (*color, 1.0)
    bsdf.inputs["Metallic"].default_value = metallic
    if texture is not None:
        _, ramp_color = texture_ramp(mat.node_tree, texture, scale, color, color2)
        mat.node_tree.links.new(ramp_color, bsdf.inputs["Base Color"])
    return mat


# ---------------------------------------------------------------- scene
def build_scene() -> None:
    """Meshes span about [-0.9, 0.9] x [-0.9, 0.9] x [-0.4, 0.7] (printed by main)."""
    m = bpy.ops.mesh
    checker = material("pedestal", (0.9, 0.9, 0.85), 0.6, texture="ShaderNodeTexChecker", color2=(0.15, 0.2, 0.35),
                       scale=6.0)
    noise = material("cube", (0.8, 0.05, 0.02), texture="ShaderNodeTexNoise", color2=(1.0, 0.6, 0.1), scale=12.0)
    stripes = material("cone", (0.05, 0.5, 0.1), texture="ShaderNodeTexWave", color2=(0.9, 0.95, 0.8), scale=6.0)
    add(m.primitive_cylinder_add, checker, vertices=64, radius=0.9, depth=0.1, location=(0, 0, -0.35))
    add(m.primitive_cube_add, noise, size=0.5, location=(-0.4, -0.35, -0.05), rotation=(0, 0, math.radians(25)))
    add(m.primitive_uv_sphere_add, material("sphere", (0.1, 0.3, 0.9), 0.2, 0.7), smooth=True,
        segments=48, ring_count=24, radius=0.3, location=(0.45, -0.35, 0.0))
    add(m.primitive_cone_add, stripes, vertices=48, radius1=0.25, depth=0.7, location=(-0.4, 0.4, 0.05))
    add(m.primitive_torus_add, material("torus", (1.0, 0.8, 0.05), 0.35), smooth=True,
        major_radius=0.22, minor_radius=0.08, location=(0.45, 0.4, -0.22))
    add(m.primitive_cylinder_add, material("column", (0.5, 0.5, 0.5)),
        vertices=32, radius=0.1, depth=0.5, location=(0, 0, -0.05))
    head = add(m.primitive_monkey_add, material("head", (0.75, 0.35, 0.8), 0.4), smooth=True,
               size=0.6, location=(0, 0, 0.42), rotation=(math.radians(-10), 0, 0))
    head.modifiers.new("subsurf", "SUBSURF").levels = 1

    sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(40), math.radians(10), math.radians(30))
    area = bpy.data.objects.new("area", bpy.data.lights.new("area", "AREA"))
    area.data.energy, area.data.size = 300.0, 2.0
    area.location = (-2.5, -2.0, 2.5)
    area.rotation_euler = Vector((2.5, 2.0, -2.5)).to_track_quat("Z", "Y").to_euler()  # faces the origin
    for light in (sun, area):
        bpy.context.scene.collection.objects.link(light)
    world = bpy.data.worlds.new("world")  # dim grey ambient; not visible (transparent film)
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.3, 0.3, 0.3, 1.0)
    bpy.context.scene.world = world


def scene_bounds() -> tuple[Vector, Vector]:
    """World-space axis-aligned bounds of all evaluated meshes (modifiers applied)."""
    deps = bpy.context.evaluated_depsgraph_get()
    pts = [o.matrix_world @ v.co for o in bpy.context.scene.objects if o.type == "MESH"
           for v in o.evaluated_get(deps).to_mesh().vertices]
    return (Vector([min(p[k] for p in pts) for k in range(3)]),
            Vector([max(p[k] for p in pts) for k in range(3)]))


def setup_render(args: argparse.Namespace) -> bpy.types.Object:
    """Cycles settings (transparent film, RGBA) and the camera, which it returns."""
    scene = bpy.context.scene
    denoisers = [e.identifier for e in scene.cycles.bl_rna.properties["denoiser"].enum_items]
    setup_cycles(args.samples, args.seed, args.threads, args.resolution, args.resolution, transparent=True,
                 denoise="OPENIMAGEDENOISE" in denoisers)
    if not scene.cycles.use_denoising:
        print("render_blender: this Blender has no OpenImageDenoise; rendering without denoising")
    scene.cycles.max_bounces = 6
    return add_camera(50.0, 36.0)  # the NeRF-synthetic FOV (0.6911 rad)


# ---------------------------------------------------------------- cameras
def direction(elev: float, azim: float) -> Vector:
    return Vector((math.cos(elev) * math.cos(azim), math.cos(elev) * math.sin(azim), math.sin(elev)))


def camera_dirs(split: str, n: int, seed: int) -> list[Vector]:
    """Unit directions from the origin to the cameras; deterministic for a given seed."""
    rng = random.Random(f"{seed}-{split}")
    zlo, zhi = math.sin(MIN_ELEV), math.sin(MAX_ELEV)
    if split == "train":  # Fibonacci lattice on the spherical cap (equal-area spacing)
        offset = rng.uniform(0.0, 2.0 * math.pi)
        return [direction(math.asin(zlo + (zhi - zlo) * (i + 0.5) / n), offset + i * GOLDEN_ANGLE)
                for i in range(n)]
    if split == "val":  # uniform random on the cap
        return [direction(math.asin(rng.uniform(zlo, zhi)), rng.uniform(0.0, 2.0 * math.pi)) for _ in range(n)]
    return [direction(TEST_ELEV, 2.0 * math.pi * (i + 0.5) / n) for i in range(n)]  # test: an orbit


def strip_png_text(path: str) -> None:
    """Drop the PNG text chunks (date, render times) Blender writes, so one-thread reruns give identical files."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [data[:8]], 8
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        if data[pos + 4:pos + 8] not in (b"tEXt", b"zTXt", b"iTXt"):
            out.append(data[pos:pos + 12 + n])
        pos += 12 + n
    with open(path, "wb") as f:
        f.write(b"".join(out))


def render_split(split: str, n: int, cam: bpy.types.Object, args: argparse.Namespace, out: str) -> None:
    """Render the views of `split` into out/split/r_{i}.png and write out/transforms_{split}.json."""
    os.makedirs(os.path.join(out, split), exist_ok=True)
    frames = []
    for i, d in enumerate(camera_dirs(split, n, args.seed)):
        path = os.path.join(out, split, f"r_{i}")  # Blender appends .png
        t0 = time.perf_counter()
        render_view(cam, look_at(d * args.radius, Vector((0.0, 0.0, 0.0))), path)
        strip_png_text(path + ".png")
        print(f"render_blender: {split}/r_{i}.png {time.perf_counter() - t0:.2f}s", flush=True)
        frames.append({"file_path": f"./{split}/r_{i}", "rotation": 2.0 * math.pi / max(n, 1),
                       "transform_matrix": [list(row) for row in cam.matrix_world]})
    write_transforms(os.path.join(out, f"transforms_{split}.json"),
                     {"camera_angle_x": cam.data.angle_x, "frames": frames})


def main() -> None:
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    args = parse_args(argv)
    out = os.path.abspath(args.out)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    build_scene()
    lo, hi = scene_bounds()
    print(f"render_blender: mesh bounds {[round(v, 3) for v in lo]} .. {[round(v, 3) for v in hi]}")
    assert max(map(abs, (*lo, *hi))) <= 1.0, "scene must fit in [-1, 1]^3"
    cam = setup_render(args)
    t0 = time.perf_counter()
    with staged_folder(out) as staging:  # an interrupted run leaves `out` as it was
        for split, n in (("train", args.train), ("val", args.val), ("test", args.test)):
            render_split(split, n, cam, args, staging)
    print(f"render_blender: wrote {out} in {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
