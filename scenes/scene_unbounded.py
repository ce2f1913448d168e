"""The `unbounded` scene of render_scene.py: an opaque 360-degree capture of the kind mip-NeRF 360 (Barron et al.,
CVPR 2022) is about, the middle scale of the scene set (camera orbit radius 3.6).

A textured ground plane 4 km across (it reaches the horizon), a sky (a world-background gradient with procedural
clouds, so sky pixels are not one colour), objects near the centre (inside radius ~1.3), at mid distance (radius 6
to 10) and far away (radius 25 to 120), each with a procedural texture, lit by a sun. Cameras circle the central
still life at about 3.6 units and look inwards, with seeded jitter in radius, height, azimuth and look-at point
(the mip-NeRF 360 captures likewise circle a central object), so the content is at every distance and the
background cannot be composited away.
"""
from __future__ import annotations

import math
import random

import bpy
from blender_common import add, add_sun, ground_material, look_at, materials, ring, textured_material, world_sky
from mathutils import Matrix, Vector

LENS_MM = 24.0  # with the 36 mm sensor: horizontal FOV 2 atan(18 / 24) = 73.7 degrees
CLIP = (0.05, 10000.0)
VIEWS, SAMPLES = 64, 32
CENTRE = Vector((0.0, 0.0, 0.45))  # the orbit's look-at point (the middle of the near objects)
RADIUS, HEIGHT = 3.6, 1.6  # camera orbit radius (xy) and height above the ground


def build(rng: random.Random) -> None:
    """The ground, the near, mid-distance and far objects, the sun and the sky."""
    m = bpy.ops.mesh
    add(m.primitive_plane_add, ground_material(), size=4000.0, location=(0, 0, 0))

    # Near: a small still life around the centre (inside radius ~1.3).
    noise = textured_material("crate", (0.75, 0.12, 0.05), (1.0, 0.7, 0.2), "ShaderNodeTexNoise", 6.0,
                              detail_scale=20.0)
    wave = textured_material("ball", (0.1, 0.3, 0.85), (0.9, 0.9, 0.8), "ShaderNodeTexWave", 4.0, 0.35,
                             detail_scale=25.0)
    check = textured_material("drum", (0.95, 0.95, 0.9), (0.1, 0.1, 0.12), "ShaderNodeTexChecker", 5.0,
                              detail_scale=30.0)
    voro = textured_material("cone", (0.1, 0.55, 0.25), (0.85, 0.9, 0.3), "ShaderNodeTexVoronoi", 8.0)
    magic = textured_material("block", (0.55, 0.2, 0.6), (0.95, 0.8, 0.95), "ShaderNodeTexMagic", 3.0,
                              detail_scale=20.0)
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

    add_sun(3.0, 50.0, 35.0)
    world_sky()


def cameras(n: int, rng: random.Random) -> list[Matrix]:
    """n cameras evenly around the centre (in azimuth order), each with seeded jitter of +-0.3 in radius and height,
    +-2 degrees in azimuth and +-0.2 in the look-at point."""
    mats = []
    for i in range(n):
        az = 2 * math.pi * i / n + math.radians(rng.uniform(-2.0, 2.0))
        r = RADIUS + rng.uniform(-0.3, 0.3)
        pos = Vector((r * math.cos(az), r * math.sin(az), HEIGHT + rng.uniform(-0.3, 0.3)))
        target = CENTRE + Vector([rng.uniform(-0.2, 0.2) for _ in range(3)])
        mats.append(look_at(pos, target))
    return mats
