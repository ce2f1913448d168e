"""The `tower` scene of render_scene.py: a large outdoor capture around a lattice tower, the large scale of the scene
set (camera orbit radius ~35, ten times the unbounded scene's and about 25 times the room's).

What it adds to the set: scale and thin structure against the sky. The subject is a 40-unit lattice mast, 6 units
wide at the base and 2.5 at the top, made of beams 0.2 to 0.4 units thick (one to three pixels at 320x240 from the
cameras), with platforms and antenna panels, and guy wires 0.08 thick (under a pixel). A fence of thin posts
surrounds it and a compound of small buildings and tanks at its foot; trees, two buildings, shipping containers and
a ring of buildings on the horizon stand round about, on a textured ground that reaches the horizon. The cameras
stand on an orbit of radius 30 to 40, 2 to 8 units above the ground, and look up at points 10 to 20 units up the
tower (all three varying smoothly round the orbit), so a cloudy sky (at infinity) fills most of each frame and the
beams and wires are seen against it: what a model does with sky, with sub-pixel geometry and with a scene box ten
times larger shows here. Textures are bold, non-periodic blotches a few units across, to match the distances.
"""
from __future__ import annotations

import math
import random

import bpy
from blender_common import (
    add,
    add_sun,
    beam,
    box,
    ground_material,
    look_at,
    materials,
    ring,
    textured_material,
    world_sky,
)
from mathutils import Matrix, Vector

LENS_MM = 24.0  # horizontal FOV 73.7 degrees, as the unbounded scene
CLIP = (0.1, 100000.0)
VIEWS, SAMPLES = 64, 16
HEIGHT, BASE, TOP, SECTIONS = 40.0, 6.0, 2.5, 10  # the tower: height, width at the base and the top, sections


def half_width(z: float) -> float:
    """Half the tower's width at height z: the width shrinks linearly from BASE to TOP."""
    return (BASE + (TOP - BASE) * z / HEIGHT) / 2


def corner(z: float, sx: int, sy: int) -> Vector:
    """The tower's corner (sx, sy = +-1) at height z."""
    return Vector((sx * half_width(z), sy * half_width(z), z))


def tower() -> None:
    """Legs, horizontal struts and X bracing on every face of every section, painted in red and white sections;
    an antenna mast on top; three guy wires at three heights, anchored in concrete blocks."""
    red, white = materials("paint", [((0.7, 0.08, 0.05), (0.45, 0.05, 0.03), "ShaderNodeTexNoise", 3.0),
                                     ((0.9, 0.9, 0.88), (0.6, 0.6, 0.6), "ShaderNodeTexNoise", 3.0)],
                           detail_scale=10.0)
    corners = [(1, 1), (-1, 1), (-1, -1), (1, -1)]  # in order around the tower: consecutive ones share a face
    for k in range(SECTIONS):
        z0, z1 = HEIGHT * k / SECTIONS, HEIGHT * (k + 1) / SECTIONS
        mat = red if k % 2 == 0 else white
        for j, (sx, sy) in enumerate(corners):
            nx, ny = corners[(j + 1) % 4]
            beam(corner(z0, sx, sy), corner(z1, sx, sy), 0.2, mat)  # leg
            beam(corner(z1, sx, sy), corner(z1, nx, ny), 0.12, mat)  # strut at the section's top
            beam(corner(z0, sx, sy), corner(z1, nx, ny), 0.1, mat)  # X bracing
            beam(corner(z0, nx, ny), corner(z1, sx, sy), 0.1, mat)
    beam(Vector((0, 0, HEIGHT)), Vector((0, 0, HEIGHT + 6.0)), 0.15, white)
    concrete = textured_material("concrete", (0.6, 0.6, 0.58), (0.4, 0.4, 0.38), "ShaderNodeTexNoise", 2.0,
                                 detail_scale=8.0)
    steel = textured_material("steel", (0.25, 0.25, 0.27), (0.35, 0.35, 0.37), "ShaderNodeTexNoise", 5.0)
    for a in (90.0, 210.0, 330.0):
        c, s = math.cos(math.radians(a)), math.sin(math.radians(a))
        anchor = Vector((22.0 * c, 22.0 * s, 0.4))
        box(concrete, (1.5, 1.5, 0.8), anchor, (0, 0, math.radians(a)))
        for z in (13.0, 26.0, 39.0):
            beam(Vector((half_width(z) * c, half_width(z) * s, z)), anchor, 0.04, steel, 6)


def equipment(rng: random.Random) -> None:
    """What a real mast carries: three platforms with antenna panels on every side, and two dish antennas. Their
    bold textures, high up against the sky, give SfM features spread over the frame's height: with only the bare
    lattice (whose crossings are not fixed 3D points) and a band of ground objects, COLMAP's focal lengths came
    out 10 to 20 percent off and its poses drifted."""
    panels = [textured_material(f"panel{i}", c1, c2, "ShaderNodeTexNoise", 1.5, 0.4, detail_scale=(0.3, 3.0),
                                stops=(0.46, 0.54))
              for i, (c1, c2) in enumerate([((0.95, 0.95, 0.92), (0.25, 0.27, 0.3)),
                                            ((0.8, 0.82, 0.85), (0.55, 0.1, 0.05))])]
    for k, z in enumerate((18.0, 28.0, 37.0)):
        w = 2 * half_width(z) + 1.6
        box(panels[k % 2], (w, w, 0.3), (0, 0, z))
        for face in range(4):
            a = math.pi / 2 * face + rng.uniform(-0.15, 0.15)
            out, side = Vector((math.cos(a), math.sin(a), 0)), Vector((-math.sin(a), math.cos(a), 0))
            for offset in (-0.7, 0.7):
                box(panels[(k + face) % 2], (0.3, 0.7, 2.6), (w / 2 - 0.2) * out + offset * side + Vector(
                    (0, 0, z + 1.45)), (0, 0, a))
    for z, a in ((24.0, 0.6), (31.0, 3.5)):
        out = Vector((math.cos(a), math.sin(a), 0))
        add(bpy.ops.mesh.primitive_cylinder_add, panels[0], vertices=32, radius=1.2, depth=0.4,
            location=(half_width(z) + 0.6) * out + Vector((0, 0, z)), rotation=(math.pi / 2, 0, a + math.pi / 2))


def surroundings(rng: random.Random) -> None:
    """The fence, the compound inside it, two buildings between the fence and the cameras, 24 on the horizon,
    and shipping containers."""
    wood = textured_material("post", (0.45, 0.35, 0.25), (0.25, 0.2, 0.15), "ShaderNodeTexNoise", 6.0)
    half, step = 10.0, 2.0  # the fence: a square 20 units wide around the tower, a post every 2 units
    for x0, y0, dx, dy in ((-half, -half, 1, 0), (half, -half, 0, 1), (half, half, -1, 0), (-half, half, 0, -1)):
        for i in range(int(2 * half / step)):
            p = Vector((x0 + dx * step * i, y0 + dy * step * i, 0.0))
            beam(p, p + Vector((0, 0, 2.5)), 0.06, wood, 6)
        for z in (1.0, 2.2):
            beam(Vector((x0, y0, z)), Vector((x0 + dx * 2 * half, y0 + dy * 2 * half, z)), 0.03, wood, 6)
    # Bold, non-periodic blotches a few units across (a few to tens of pixels): periodic patterns (checkers,
    # bricks, stripes) gave SIFT features that the matcher's ratio test throws away as ambiguous.
    walls = [textured_material(f"wall{i}", c1, c2, tex, scale, detail_scale=(0.08, 0.6), stops=stops)
             for i, (c1, c2, tex, scale, stops) in enumerate([
                 ((0.95, 0.9, 0.8), (0.05, 0.06, 0.1), "ShaderNodeTexNoise", 0.5, (0.46, 0.54)),
                 ((0.7, 0.2, 0.05), (0.98, 0.95, 0.85), "ShaderNodeTexVoronoi", 0.6, (0.2, 0.4)),
                 ((0.05, 0.15, 0.5), (0.95, 0.95, 0.9), "ShaderNodeTexNoise", 0.3, (0.46, 0.54))])]
    # The compound at the tower's foot (inside the fence): a hut, a control building, a generator shed and two
    # fuel tanks. Opaque and boldly textured, they are what the lattice is not: fixed points at the centre, seen
    # from every camera with parallax against the far ring (without them COLMAP's orbit came out folded).
    for mat, dims, (x, y) in ((walls[1], (4.0, 3.0, 3.0), (6.0, 5.5)), (walls[0], (5.0, 4.0, 4.0), (-6.0, -5.5)),
                              (walls[2], (3.0, 2.0, 2.2), (-6.5, 5.5))):
        box(mat, dims, (x, y, dims[2] / 2), (0, 0, rng.uniform(-0.2, 0.2)))
    for y in (-7.0, -4.5):
        add(bpy.ops.mesh.primitive_cylinder_add, walls[2], vertices=32, radius=1.0, depth=4.0, location=(6.0, y, 1.0),
            rotation=(0, math.pi / 2, 0))
    for i, (x, y) in enumerate(((-15.0, 7.0), (11.0, -14.0))):
        w, h = rng.uniform(5.0, 8.0), rng.uniform(5.0, 9.0)
        box(walls[i % 3], (w, rng.uniform(5.0, 8.0), h), (x, y, h / 2), (0, 0, rng.uniform(0, math.pi)))
    for i, x, y, r in ring(rng, 24, (0.1, 0.9), 60.0, 160.0):
        w, h = r * rng.uniform(0.1, 0.2), r * rng.uniform(0.1, 0.25)
        box(walls[i % 3], (w, w * rng.uniform(0.6, 1.4), h), (x, y, h / 2), (0, 0, rng.uniform(0, math.pi)))
    # Shipping containers (6 x 2.4 x 2.6, some stacked two high) beyond the cameras' orbit, 20 units or more
    # from them: upright faces that stay textured from every side (the ground is seen at a grazing angle). Nearer
    # things change too much from one view to the next for SIFT and hide the tower's foot from the low cameras.
    for i, x, y, _ in ring(rng, 20, (0.2, 0.8), 60.0, 95.0):
        turn = rng.uniform(0, math.pi)
        for level in range(1 + (rng.random() < 0.4)):
            box(walls[(i + level) % 3], (6.0, 2.4, 2.6), (x, y, 1.3 + 2.6 * level), (0, 0, turn + 0.3 * level))


def trees(rng: random.Random) -> None:
    """Trees (a trunk and a ball of a crown) on two rings: 12 between the fence and the cameras, 40 beyond the
    cameras. With the buildings they are most of the SfM features: the sky is at infinity and the ground is seen
    at a grazing angle."""
    bark = textured_material("bark", (0.3, 0.2, 0.1), (0.12, 0.08, 0.05), "ShaderNodeTexWave", 1.0,
                             detail_scale=(0.3, 2.0))
    crowns = [textured_material(f"crown{i}", c1, c2, tex, 0.6, detail_scale=(0.2, 1.2), stops=stops)
              for i, (c1, c2, tex, stops) in enumerate([  # bold blotches, as the walls'
                  ((0.01, 0.06, 0.01), (0.6, 0.85, 0.25), "ShaderNodeTexNoise", (0.46, 0.54)),
                  ((0.8, 0.75, 0.15), (0.01, 0.08, 0.01), "ShaderNodeTexVoronoi", (0.2, 0.4))])]
    for n, (r_min, r_max), size in ((12, (12.0, 18.0), 0.8), (40, (60.0, 120.0), 1.5)):
        for i, x, y, _ in ring(rng, n, (0.2, 0.8), r_min, r_max):
            h, crown = size * rng.uniform(2.5, 4.5), size * rng.uniform(1.5, 2.8)
            beam(Vector((x, y, 0)), Vector((x, y, h)), size * 0.3, bark)
            add(bpy.ops.mesh.primitive_ico_sphere_add, crowns[i % 2], smooth=True, subdivisions=3, radius=crown,
                location=(x, y, h + 0.7 * crown))


def build(rng: random.Random) -> None:
    """The ground (10-unit tiles, 40 km across), the tower and its equipment, its surroundings, trees, the sun
    and a cloudy sky."""
    add(bpy.ops.mesh.primitive_plane_add, ground_material(10.0), size=40000.0, location=(0, 0, 0))
    tower()
    equipment(rng)
    surroundings(rng)
    trees(rng)
    add_sun(3.0, 40.0, 120.0)
    world_sky(clouds=(0.35, 0.6))


def cameras(n: int, rng: random.Random) -> list[Matrix]:
    """n cameras around the tower in azimuth order (+-2 degrees of jitter). Radius (30 to 40), height (2 to 8)
    and the height of the look-at point on the tower's axis (10 to 20) vary smoothly around the orbit (sines of
    seeded phase, two and three periods a turn) plus a small seeded jitter, as someone walking round would: with
    independent draws, neighbouring views differ by up to 10 units in distance and COLMAP matched almost nothing
    between them (2 of 64 views registered). Height and look-at point rise and fall together, so the view is tilted
    up by 12 to 21 degrees: where the lowest camera looked at the highest point (28 degrees), the ground was a thin
    strip at the bottom and COLMAP lost those views."""
    phase = [rng.uniform(0, 2 * math.pi) for _ in range(2)]
    mats = []
    for i in range(n):
        az = 2 * math.pi * i / n + math.radians(rng.uniform(-2.0, 2.0))
        r = 35.0 + 4.5 * math.sin(2 * az + phase[0]) + rng.uniform(-0.5, 0.5)
        wave = math.sin(3 * az + phase[1])
        pos = Vector((r * math.cos(az), r * math.sin(az), 5.0 + 2.7 * wave + rng.uniform(-0.3, 0.3)))
        target = Vector((rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 15.0 + 4.5 * wave + rng.uniform(-0.5, 0.5)))
        mats.append(look_at(pos, target))
    return mats
