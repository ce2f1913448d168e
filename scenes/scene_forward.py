"""The `forward` scene of render_scene.py: a forward-facing capture as in LLFF (Mildenhall et al., "Local Light
Field Fusion", SIGGRAPH 2019), where a hand-held camera sweeps a small patch of a plane, all views facing the scene.

What it adds to the set: the cameras cover a patch 0.8 x 0.5 units across, not a circle, and see the scene from one
side only, over depths from 1.5 to 40 units (a ratio of ~25). This is the setting of NeRF's normalised device
coordinates and of LLFF-style benchmarks: small baselines, depth from parallax alone, nothing behind the cameras.
Near (1.5 to 3.5 units): a plant of thin stems (cylinders) and leaves (planes) in a pot on a crate, and stacked
textured boxes. Mid (5 to 12): trees, a shed, rocks and a low brick wall. Far (30 to 40): a range of hills,
overlapping so they close the view, and a cloudy sky above them. Everything has a procedural texture with fine
noise, for SfM.
"""
from __future__ import annotations

import math
import random

import bpy
from blender_common import (
    add,
    add_sun,
    apply_scale,
    beam,
    box,
    ground_material,
    look_at,
    materials,
    textured_material,
    world_sky,
)
from mathutils import Matrix, Vector

LENS_MM = 28.0  # horizontal FOV 2 atan(18 / 28) = 65.5 degrees, about a phone's main camera
CLIP = (0.05, 10000.0)
VIEWS, SAMPLES = 49, 16
COLS, SPAN, EYE = 7, (0.8, 0.5), 1.5  # grid columns, the grid's width (x) and height (z), its centre's height
PITCH = math.radians(-6.0)  # every view looks slightly down, so the horizon sits in the upper part of the frame


def plant(rng: random.Random, base: Vector) -> None:
    """A pot on a crate at `base` (on the ground), with thin stems fanning out of it and leaves along them."""
    crate = textured_material("crate", (0.55, 0.35, 0.18), (0.25, 0.14, 0.06), "ShaderNodeTexWave", 8.0,
                              detail_scale=40.0)
    pot = textured_material("pot", (0.65, 0.28, 0.14), (0.85, 0.55, 0.35), "ShaderNodeTexNoise", 15.0,
                            detail_scale=50.0)
    stem = textured_material("stem", (0.18, 0.35, 0.08), (0.35, 0.5, 0.15), "ShaderNodeTexNoise", 60.0)
    leaves = [textured_material(f"leaf{i}", c1, c2, "ShaderNodeTexWave", 25.0, 0.45, detail_scale=60.0)
              for i, (c1, c2) in enumerate([((0.05, 0.3, 0.05), (0.3, 0.6, 0.15)),
                                            ((0.15, 0.4, 0.05), (0.5, 0.7, 0.2))])]
    box(crate, (0.5, 0.45, 0.55), base + Vector((0, 0, 0.275)))
    top = base + Vector((0, 0, 0.55 + 0.25))
    add(bpy.ops.mesh.primitive_cylinder_add, pot, vertices=32, radius=0.14, depth=0.25,
        location=top - Vector((0, 0, 0.125)))
    for _ in range(9):
        az, tilt = rng.uniform(0, 2 * math.pi), rng.uniform(0.15, 0.6)
        length = rng.uniform(0.6, 1.0)
        direction = Vector((math.sin(tilt) * math.cos(az), math.sin(tilt) * math.sin(az), math.cos(tilt)))
        root = top + Vector((rng.uniform(-0.06, 0.06), rng.uniform(-0.06, 0.06), -0.02))
        beam(root, root + length * direction, rng.uniform(0.006, 0.011), stem, 6)
        for k in range(5):  # leaves from a third of the way up to the tip, each a plane on a short offset
            at = root + length * (0.35 + 0.65 * k / 4) * direction
            leaf = add(bpy.ops.mesh.primitive_plane_add, rng.choice(leaves), size=1.0,
                       location=at + Vector([rng.uniform(-0.04, 0.04) for _ in range(3)]),
                       rotation=(rng.uniform(-0.9, 0.9), rng.uniform(-0.9, 0.9), rng.uniform(0, math.pi)))
            leaf.scale = (rng.uniform(0.14, 0.22), rng.uniform(0.05, 0.08), 1.0)


def build(rng: random.Random) -> None:
    """The ground, the near plant and boxes, the mid-distance trees, shed, rocks and wall, the far hills, the
    sun and the sky."""
    m = bpy.ops.mesh
    add(m.primitive_plane_add, ground_material(0.5), size=4000.0, location=(0, 0, 0))
    plant(rng, Vector((0.2, 1.85, 0.0)))
    boxes = materials("box", [
        ((0.15, 0.3, 0.65), (0.9, 0.85, 0.7), "ShaderNodeTexChecker", 8.0),
        ((0.75, 0.2, 0.1), (0.95, 0.8, 0.4), "ShaderNodeTexMagic", 4.0),
        ((0.3, 0.3, 0.3), (0.85, 0.85, 0.8), "ShaderNodeTexVoronoi", 10.0)], detail_scale=40.0)
    for mat, size, loc in ((boxes[0], 0.55, (-0.75, 2.6, 0.275)), (boxes[1], 0.38, (-0.7, 2.65, 0.74)),
                           (boxes[2], 0.45, (0.95, 3.3, 0.225))):
        box(mat, (size, size, size), loc, (0, 0, rng.uniform(-0.4, 0.4)))

    # Mid distance: trees, a shed, rocks and a low wall, 5 to 12 units away, inside the view (|x| < 0.6 y).
    bark = textured_material("bark", (0.3, 0.2, 0.1), (0.12, 0.08, 0.05), "ShaderNodeTexWave", 6.0,
                             detail_scale=20.0)
    crown, rock, brick = materials("mid", [
        ((0.1, 0.35, 0.08), (0.35, 0.55, 0.15), "ShaderNodeTexVoronoi", 4.0),
        ((0.5, 0.48, 0.45), (0.25, 0.24, 0.22), "ShaderNodeTexNoise", 3.0),
        ((0.6, 0.25, 0.15), (0.8, 0.75, 0.7), "ShaderNodeTexBrick", 3.0)], detail_scale=15.0)
    for x, y in ((-3.2, 7.0), (2.8, 10.5), (-0.6, 11.5)):
        h = rng.uniform(2.0, 3.0)
        beam(Vector((x, y, 0)), Vector((x, y, h)), 0.15, bark, 16)
        add(m.primitive_ico_sphere_add, crown, smooth=True, subdivisions=3, radius=rng.uniform(1.0, 1.4),
            location=(x, y, h + 0.6))
    box(brick, (2.2, 1.6, 1.8), (3.6, 8.0, 0.9), (0, 0, 0.3))
    box(brick, (7.0, 0.3, 0.7), (-1.0, 9.0, 0.35))
    for _ in range(5):
        y = rng.uniform(5.0, 8.0)
        s = rng.uniform(0.25, 0.5)
        apply_scale(add(m.primitive_ico_sphere_add, rock, subdivisions=2, radius=1.0,
                        location=(rng.uniform(-0.5, 0.5) * y, y, 0.3 * s)), (s * rng.uniform(1.0, 1.6), s, s * 0.7))

    # Far: overlapping hills 30 to 40 units away (flattened, half-buried spheres), closing the view.
    hills = materials("hill", [((0.2, 0.4, 0.12), (0.45, 0.42, 0.25), "ShaderNodeTexNoise", 0.3),
                               ((0.3, 0.45, 0.15), (0.2, 0.3, 0.1), "ShaderNodeTexVoronoi", 0.2)], detail_scale=2.0)
    for i, x in enumerate(range(-48, 49, 12)):
        r = rng.uniform(11.0, 15.0)
        hill = add(m.primitive_uv_sphere_add, hills[i % 2], smooth=True, segments=64, ring_count=32, radius=1.0,
                   location=(x + rng.uniform(-2, 2), rng.uniform(30.0, 40.0) + r * 0.3, 0.0))
        apply_scale(hill, (r, r * 0.3, r * rng.uniform(0.3, 0.5)))
    add_sun(3.0, 45.0, 150.0)
    world_sky()


def cameras(n: int, rng: random.Random) -> list[Matrix]:
    """n cameras on a grid of COLS columns (x) and ceil(n / COLS) rows (z) spanning SPAN, in raster order (left to
    right, top row first), each moved by up to 0.03 units and looking along +y, PITCH down, turned by up to 2
    degrees (yaw, pitch) and rolled by up to 1 degree. With 7 columns, nerfstudio's interval-8 test views
    (frames 1, 9, 17, ...) lie on the grid's diagonal: one in every row and column (with 8 columns they would all
    be in the first column)."""
    rows = -(-n // COLS)
    mats = []
    for i in range(n):
        row, col = divmod(i, COLS)
        pos = Vector((SPAN[0] * (col / max(COLS - 1, 1) - 0.5), 0.0,
                      EYE + SPAN[1] * (0.5 - row / max(rows - 1, 1)))) + Vector(
            [rng.uniform(-0.03, 0.03) for _ in range(3)])
        yaw, pitch = math.radians(rng.uniform(-2, 2)), PITCH + math.radians(rng.uniform(-2, 2))
        forward = Vector((math.sin(yaw) * math.cos(pitch), math.cos(yaw) * math.cos(pitch), math.sin(pitch)))
        mats.append(look_at(pos, pos + forward) @ Matrix.Rotation(math.radians(rng.uniform(-1, 1)), 4, "Z"))
    return mats
