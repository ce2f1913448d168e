"""The `room` scene of render_scene.py: the inside of a closed room, the small scale of the scene set (camera
orbit radius ~1.45, a tenth of the tower's).

What it adds to the set: there is no sky and no background at infinity. Everything the cameras see is a surface 0.5
to 4.5 units away, so an unbounded-scene model's contraction of far space and its sky handling have nothing to do,
and the whole scene fits in a box. The room is 6 x 5 x 3 units (floor, four walls and a ceiling, closed): two
brick walls and two wallpapered ones (fine repeated patterns, with noise so that SfM can tell the repeats apart),
a plank floor, a rug, a table with a glazed vase, a chrome ball and fruit, a chair with thin legs, a shelf unit
with books, cups and boxes, and a cabinet. Two ceiling panels (area lights) and a warm point light light it. The
glossy vase and ball add view-dependent colour; the chair's legs and the shelf boards add thin structure.
Cameras stand on an orbit of radius 1.3 to 1.6 around the table at eye height (~1.5) in azimuth order; about two
thirds look at the table, the rest look across the room at the far walls, 2 to 4.5 units away.
"""
from __future__ import annotations

import math
import random

import bpy
from blender_common import add, beam, box, look_at, plain_material, textured_material
from mathutils import Matrix, Vector

LENS_MM = 24.0  # horizontal FOV 73.7 degrees, as a wide interior shot
CLIP = (0.02, 50.0)
VIEWS, SAMPLES = 64, 8  # every path stays inside: a sample costs ~3x an outdoor scene's
SIZE = (6.0, 5.0, 3.0)  # inside: x in [-3, 3], y in [-2.5, 2.5], z in [0, 3]
TABLE_TOP = 0.75
BRICK = {"Mortar Size": 0.015, "Row Height": 0.2}  # brick texture inputs (in texture units: Scale per unit)
DETAIL = (1.5, 12.0)  # noise tints (textured_material): blotches ~0.7 units wide, grain ~0.1 units (3 to 10 px)


def shell() -> None:
    """Floor, ceiling and walls: boxes 0.1 thick just outside the inside volume. Each wall is built in its local
    xy plane and turned upright, so the 2D brick and wave textures run along the wall."""
    (sx, sy, sz), t = SIZE, 0.1
    floor = textured_material("floor", (0.50, 0.32, 0.16), (0.12, 0.07, 0.03), "ShaderNodeTexBrick", 1.0, 0.45,
                              detail_scale=DETAIL,
                              tex_inputs={"Brick Width": 1.1, "Row Height": 0.16, "Mortar Size": 0.006})
    ceiling = textured_material("ceiling", (0.92, 0.91, 0.88), (0.65, 0.64, 0.62), "ShaderNodeTexNoise", 2.0,
                                detail_scale=DETAIL)
    brick_red = textured_material("brick_red", (0.55, 0.20, 0.12), (0.85, 0.82, 0.76), "ShaderNodeTexBrick", 2.5,
                                  0.8, detail_scale=DETAIL, tex_inputs=BRICK)
    brick_white = textured_material("brick_white", (0.88, 0.86, 0.82), (0.40, 0.38, 0.36), "ShaderNodeTexBrick",
                                    3.2, 0.8, detail_scale=DETAIL, tex_inputs=BRICK)
    damask = textured_material("paper_magic", (0.15, 0.40, 0.42), (0.92, 0.88, 0.74), "ShaderNodeTexMagic", 5.0,
                               detail_scale=DETAIL)
    stripes = textured_material("paper_stripes", (0.45, 0.55, 0.35), (0.95, 0.92, 0.82), "ShaderNodeTexWave", 9.0,
                                detail_scale=DETAIL)
    box(floor, (sx + 2 * t, sy + 2 * t, t), (0, 0, -t / 2))
    box(ceiling, (sx + 2 * t, sy + 2 * t, t), (0, 0, sz + t / 2))
    upright = math.radians(90)
    for mat, y in ((brick_red, sy / 2 + t / 2), (brick_white, -sy / 2 - t / 2)):
        box(mat, (sx + 2 * t, sz, t), (0, y, sz / 2), (upright, 0, 0))
    for mat, x in ((damask, sx / 2 + t / 2), (stripes, -sx / 2 - t / 2)):
        box(mat, (sy, sz, t), (x, 0, sz / 2), (upright, 0, upright))


def furniture(rng: random.Random) -> None:
    """The rug, table, chair, shelf unit and cabinet, and the objects on them."""
    m = bpy.ops.mesh
    wood = textured_material("wood", (0.55, 0.33, 0.15), (0.30, 0.16, 0.07), "ShaderNodeTexWave", 6.0, 0.5,
                             detail_scale=DETAIL)
    dark_wood = textured_material("dark_wood", (0.25, 0.14, 0.08), (0.45, 0.28, 0.15), "ShaderNodeTexNoise", 8.0,
                                  0.5, detail_scale=DETAIL)
    rug = textured_material("rug", (0.60, 0.10, 0.12), (0.90, 0.78, 0.45), "ShaderNodeTexChecker", 6.0, 0.9,
                            detail_scale=DETAIL)
    box(rug, (2.6, 1.8, 0.01), (0, 0, 0.005))

    # Table at the centre, on four legs; a glazed vase, a chrome ball and fruit on it.
    box(wood, (1.3, 0.8, 0.05), (0, 0, TABLE_TOP - 0.025))
    for x in (-0.58, 0.58):
        for y in (-0.33, 0.33):
            beam(Vector((x, y, 0)), Vector((x, y, TABLE_TOP - 0.05)), 0.03, wood, 16)
    vase = add(m.primitive_uv_sphere_add, plain_material("glaze", (0.05, 0.15, 0.55), 0.05), smooth=True,
               segments=48, ring_count=24, radius=1.0, location=(-0.25, 0.1, TABLE_TOP + 0.2))
    vase.scale = (0.12, 0.12, 0.2)
    add(m.primitive_uv_sphere_add, plain_material("chrome", (0.9, 0.9, 0.92), 0.08, metallic=1.0), smooth=True,
        segments=48, ring_count=24, radius=0.1, location=(0.3, -0.12, TABLE_TOP + 0.1))
    fruit = textured_material("fruit", (0.85, 0.45, 0.05), (0.95, 0.75, 0.2), "ShaderNodeTexNoise", 30.0, 0.4)
    for _ in range(4):
        r = rng.uniform(0.035, 0.05)
        add(m.primitive_uv_sphere_add, fruit, smooth=True, segments=24, ring_count=12, radius=r,
            location=(rng.uniform(0.1, 0.45), rng.uniform(0.05, 0.3), TABLE_TOP + r))

    # Chair beside the table: seat, four thin legs, two back posts with a top rail and slats.
    cx, cy, seat = 0.1, -0.75, 0.45
    box(dark_wood, (0.42, 0.42, 0.035), (cx, cy, seat))
    for dx in (-0.18, 0.18):
        for dy in (-0.18, 0.18):
            top = seat + (0.5 if dy < 0 else 0.0)  # the back legs go on up as the back posts
            beam(Vector((cx + dx, cy + dy, 0)), Vector((cx + dx, cy + dy, top)), 0.015, dark_wood, 12)
    for z in (seat + 0.25, seat + 0.35, seat + 0.48):
        box(dark_wood, (0.36, 0.02, 0.04), (cx, cy - 0.18, z))

    # Shelf unit against the west wall: two sides, five boards, things on the boards.
    x0, depth, half_w = -SIZE[0] / 2 + 0.18, 0.3, 1.0
    for y in (-half_w, half_w):
        box(wood, (depth, 0.03, 2.0), (x0, y, 1.0))
    things = [textured_material(f"thing{i}", c1, c2, tex, s, 0.5, detail_scale=(4.0, 20.0)) for i, (c1, c2, tex, s) in
              enumerate([((0.7, 0.1, 0.1), (0.95, 0.8, 0.6), "ShaderNodeTexWave", 15.0),
                         ((0.1, 0.3, 0.6), (0.8, 0.85, 0.9), "ShaderNodeTexChecker", 20.0),
                         ((0.2, 0.5, 0.2), (0.9, 0.9, 0.5), "ShaderNodeTexNoise", 12.0),
                         ((0.5, 0.4, 0.1), (0.15, 0.1, 0.05), "ShaderNodeTexVoronoi", 15.0),
                         ((0.6, 0.2, 0.6), (0.95, 0.85, 0.95), "ShaderNodeTexMagic", 8.0)])]
    for z in (0.05, 0.5, 0.95, 1.4, 1.85):
        box(wood, (depth, 2 * half_w - 0.03, 0.025), (x0, 0, z))
        y = -half_w + 0.06
        while y < half_w - 0.12:
            mat, kind = rng.choice(things), rng.random()
            if z > 1.8:  # nothing on the top board but a few boxes
                kind = 0.9
            if kind < 0.55:  # a book standing up
                w, h = rng.uniform(0.03, 0.07), rng.uniform(0.18, 0.3)
                box(mat, (0.2, w, h), (x0, y + w / 2, z + 0.0125 + h / 2), (rng.uniform(-0.1, 0.1), 0, 0))
                y += w + 0.005
            elif kind < 0.8:  # a cup
                r = rng.uniform(0.035, 0.05)
                add(m.primitive_cylinder_add, mat, vertices=24, radius=r, depth=0.1,
                    location=(x0, y + r, z + 0.0625))
                y += 2 * r + 0.04
            else:  # a box
                s = rng.uniform(0.08, 0.14)
                box(mat, (s, s, s), (x0, y + s / 2, z + 0.0125 + s / 2), (0, 0, rng.uniform(0, 1)))
                y += s + 0.04
            y += rng.uniform(0.0, 0.08)

    # A low cabinet against the east wall, with a jar and a ball on it.
    box(dark_wood, (0.45, 1.6, 0.8), (SIZE[0] / 2 - 0.25, -0.6, 0.4))
    add(m.primitive_cylinder_add, things[3], vertices=32, radius=0.09, depth=0.3,
        location=(SIZE[0] / 2 - 0.25, -1.1, 0.95))
    add(m.primitive_ico_sphere_add, things[1], smooth=True, subdivisions=3, radius=0.12,
        location=(SIZE[0] / 2 - 0.25, -0.3, 0.92))


def lights() -> None:
    """Two ceiling panels (area lights, visible as bright rectangles) and a warm point light under the ceiling,
a metre or more from every wall (closer, it burns out a patch of wall)."""
    for x in (-1.4, 1.4):
        panel = bpy.data.objects.new("panel", bpy.data.lights.new("panel", "AREA"))
        panel.data.shape, panel.data.size, panel.data.size_y, panel.data.energy = "RECTANGLE", 1.2, 0.6, 140.0
        panel.location = (x, 0.0, SIZE[2] - 0.01)
        bpy.context.scene.collection.objects.link(panel)
    lamp = bpy.data.objects.new("lamp", bpy.data.lights.new("lamp", "POINT"))
    lamp.data.energy, lamp.data.color, lamp.data.shadow_soft_size = 30.0, (1.0, 0.8, 0.55), 0.1
    lamp.location = (-1.6, 1.3, 2.4)
    bpy.context.scene.collection.objects.link(lamp)


def build(rng: random.Random) -> None:
    """The room's shell, furniture and lights (no world background: nothing in a closed room sees it)."""
    shell()
    furniture(rng)
    lights()


def cameras(n: int, rng: random.Random) -> list[Matrix]:
    """n cameras around the table in azimuth order (+-2 degrees of jitter), at radius 1.3 to 1.6 and height
    1.35 to 1.65. About two thirds look at a point on or just above the table; the others look across the room,
    at a point 1.5 to 2.5 units past the centre and 1.0 to 1.6 high, so the far walls fill most of the view."""
    mats = []
    for i in range(n):
        az = 2 * math.pi * i / n + math.radians(rng.uniform(-2.0, 2.0))
        r = rng.uniform(1.3, 1.6)
        out, side = Vector((math.cos(az), math.sin(az), 0.0)), Vector((-math.sin(az), math.cos(az), 0.0))
        pos = r * out + Vector((0.0, 0.0, 1.5 + rng.uniform(-0.15, 0.15)))
        if rng.random() < 0.35:
            target = -rng.uniform(1.5, 2.5) * out + rng.uniform(-0.8, 0.8) * side + Vector(
                (0.0, 0.0, rng.uniform(1.0, 1.6)))
        else:
            target = Vector([rng.uniform(-0.3, 0.3) for _ in range(2)] + [rng.uniform(TABLE_TOP, 1.0)])
        mats.append(look_at(pos, target))
    return mats
