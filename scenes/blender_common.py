"""Blender code that render_blender.py, render_scene.py and the scene modules (scene_*.py) share: Cycles settings,
the camera, look-at poses, textured materials, the ground, the sky, the sun, adding primitives and beams, and
rendering one view. Runs under Blender's Python (Debian's Blender 3.4 or the bpy 4.5 wheel)."""
from __future__ import annotations

import math
import random
from collections.abc import Iterator

import bpy
from mathutils import Matrix, Vector


# ---------------------------------------------------------------- materials
def new_material(name: str, roughness: float) -> tuple[bpy.types.Material, bpy.types.ShaderNode]:
    """A node material and its Principled BSDF node, with `roughness` set."""
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Roughness"].default_value = roughness
    return mat, bsdf


def plain_material(name: str, color: tuple, roughness: float, metallic: float = 0.0) -> bpy.types.Material:
    """An untextured Principled BSDF: glossy, view-dependent surfaces (a glazed vase, a chrome ball) when smooth."""
    mat, bsdf = new_material(name, roughness)
    bsdf.inputs["Base Color"].default_value = (*color, 1.0)
    bsdf.inputs["Metallic"].default_value = metallic
    return mat


def link(tree: bpy.types.NodeTree, *wires: tuple) -> None:
    """Link each (node, output name, node, input name) of `wires` in `tree`, in order."""
    for src, output, dst, input_ in wires:
        tree.links.new(src.outputs[output], dst.inputs[input_])


def texture_ramp(tree: bpy.types.NodeTree, texture: str, scale: float, color: tuple, color2: tuple,
                 coords: str = "Object", tex_inputs: dict | None = None, stops: tuple[float, float] = (0.0, 1.0)
                 ) -> tuple[bpy.types.ShaderNode, bpy.types.NodeSocket]:
    """Add a procedural texture (a ShaderNodeTex* type, with the input values `tex_inputs` besides Scale) read at
    the `coords` texture coordinates, with its Fac (Voronoi: Distance) mapped to a colour ramp from `color` at
    stops[0] to `color2` at stops[1] (a noise's Fac stays mostly in 0.3 to 0.7: stops inside that range give it
    full contrast); return the TexCoord node and the ramp's Color output."""
    tc, tex, ramp = (tree.nodes.new(t) for t in ("ShaderNodeTexCoord", texture, "ShaderNodeValToRGB"))
    tex.inputs["Scale"].default_value = scale
    for name, value in (tex_inputs or {}).items():
        tex.inputs[name].default_value = value
    ramp.color_ramp.elements[0].color, ramp.color_ramp.elements[1].color = (*color, 1.0), (*color2, 1.0)
    ramp.color_ramp.elements[0].position, ramp.color_ramp.elements[1].position = stops
    link(tree, (tc, coords, tex, "Vector"), (tex, "Fac" if "Fac" in tex.outputs else "Distance", ramp, "Fac"))
    return tc, ramp.outputs["Color"]


def textured_material(name: str, color: tuple, color2: tuple, texture: str, scale: float, roughness: float = 0.6,
                      coords: str = "Object", detail_scale: float | tuple[float, ...] = 0.0,
                      tex_inputs: dict | None = None, stops: tuple[float, float] = (0.0, 1.0)) -> bpy.types.Material:
    """Principled BSDF whose base colour goes from `color` to `color2` with the Fac of a procedural texture (a
    ShaderNodeTex* node; texture_ramp with `tex_inputs` and `stops`), then is multiplied (factor 0.6) by a colour
    noise at each scale of `detail_scale` (one or several; 0 for none). That noise gives SfM (COLMAP) features on
    surfaces whose pattern alone is too smooth, and a coarse one tints the repeats of a periodic pattern (bricks,
    checkers) so that feature matching can tell them apart."""
    mat, bsdf = new_material(name, roughness)
    tree = mat.node_tree
    tc, out = texture_ramp(tree, texture, scale, color, color2, coords, tex_inputs, stops)
    for detail in (detail_scale if isinstance(detail_scale, tuple) else (detail_scale,)):
        if detail <= 0:
            continue
        noise, mix = tree.nodes.new("ShaderNodeTexNoise"), tree.nodes.new("ShaderNodeMix")
        noise.inputs["Scale"].default_value = detail
        noise.inputs["Detail"].default_value = 8.0
        mix.data_type, mix.blend_type = "RGBA", "MULTIPLY"
        mix.inputs["Factor"].default_value = 0.6
        tree.links.new(tc.outputs[coords], noise.inputs["Vector"])
        tree.links.new(out, mix.inputs["A"])
        tree.links.new(noise.outputs["Color"], mix.inputs["B"])
        out = mix.outputs["Result"]
    tree.links.new(out, bsdf.inputs["Base Color"])
    return mat


def materials(prefix: str, specs: list[tuple], detail_scale: float | tuple[float, ...]) -> list[bpy.types.Material]:
    """textured_material() for each (color, color2, texture, scale) in `specs`, named prefix0, prefix1, ..."""
    return [textured_material(f"{prefix}{i}", c1, c2, tex, s, detail_scale=detail_scale)
            for i, (c1, c2, tex, s) in enumerate(specs)]


def ground_material(tile: float = 1.0) -> bpy.types.Material:
    """Grass-and-sand ground: checker tiles `tile` units wide times a contrasty fine noise (4 per tile), tinted by
    a large-scale noise (one per 12.5 tiles), so that neighbouring tiles differ (pure checkers repeat, which
    confuses feature matching). Its texture coordinates are the plane's Object coordinates, in scene units."""
    mat, bsdf = new_material("ground", 0.9)
    t = mat.node_tree
    tc = t.nodes.new("ShaderNodeTexCoord")
    checker = t.nodes.new("ShaderNodeTexChecker")
    checker.inputs["Scale"].default_value = 1.0 / tile
    checker.inputs["Color1"].default_value = (0.25, 0.45, 0.12, 1.0)
    checker.inputs["Color2"].default_value = (0.75, 0.62, 0.40, 1.0)
    fine = t.nodes.new("ShaderNodeTexNoise")
    fine.inputs["Scale"].default_value = 4.0 / tile
    fine.inputs["Detail"].default_value = 6.0
    fine_ramp = t.nodes.new("ShaderNodeValToRGB")  # stretch the noise (Fac is mostly 0.3..0.7) to dark..white
    fine_ramp.color_ramp.elements[0].position, fine_ramp.color_ramp.elements[1].position = 0.35, 0.65
    fine_ramp.color_ramp.elements[0].color = (0.25, 0.25, 0.25, 1.0)
    coarse = t.nodes.new("ShaderNodeTexNoise")
    coarse.inputs["Scale"].default_value = 0.08 / tile
    m1, m2 = t.nodes.new("ShaderNodeMix"), t.nodes.new("ShaderNodeMix")
    for m in (m1, m2):
        m.data_type, m.blend_type = "RGBA", "MULTIPLY"
    m1.inputs["Factor"].default_value, m2.inputs["Factor"].default_value = 1.0, 0.5
    for node in (checker, fine, coarse):
        t.links.new(tc.outputs["Object"], node.inputs["Vector"])
    link(t, (fine, "Fac", fine_ramp, "Fac"), (checker, "Color", m1, "A"), (fine_ramp, "Color", m1, "B"),
         (m1, "Result", m2, "A"), (coarse, "Color", m2, "B"), (m2, "Result", bsdf, "Base Color"))
    return mat


def world_sky(clouds: tuple[float, float] = (0.45, 0.65)) -> None:
    """World background: a vertical gradient (pale at the horizon, blue at the zenith) with noise clouds where the
    noise passes from clouds[0] (clear) to clouds[1] (white); lower values give a more overcast sky. In a world
    shader the Generated texture coordinate is the ray direction, so the sky varies across the image."""
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
    cloud, cloud_ramp, mix = (t.nodes.new(n) for n in ("ShaderNodeTexNoise", "ShaderNodeValToRGB", "ShaderNodeMix"))
    cloud.inputs["Scale"].default_value = 3.0
    cloud.inputs["Detail"].default_value = 6.0
    cloud_ramp.color_ramp.elements[0].position, cloud_ramp.color_ramp.elements[1].position = clouds
    mix.data_type = "RGBA"
    mix.inputs["B"].default_value = (0.95, 0.95, 0.97, 1.0)
    link(t, (tc, "Generated", sep, "Vector"), (sep, "Z", grad, "Fac"), (tc, "Generated", cloud, "Vector"),
         (cloud, "Fac", cloud_ramp, "Fac"), (cloud_ramp, "Color", mix, "Factor"), (grad, "Color", mix, "A"),
         (mix, "Result", bg, "Color"))
    bpy.context.scene.world = world


# ---------------------------------------------------------------- scene
def add(op, mat: bpy.types.Material, smooth: bool = False, **kwargs) -> bpy.types.Object:
    """Run a primitive operator (e.g. bpy.ops.mesh.primitive_cube_add) with `kwargs` and give the new object
    `mat`, shaded smooth if `smooth`."""
    op(**kwargs)
    obj = bpy.context.active_object
    obj.data.materials.append(mat)
    if smooth:
        bpy.ops.object.shade_smooth()
    return obj


def box(mat: bpy.types.Material, dims: tuple, location: tuple, rotation: tuple = (0.0, 0.0, 0.0)) -> bpy.types.Object:
    """A box of size `dims` (x, y, z before `rotation`, an Euler in radians) centred at `location`, its scale
    applied, so that its Object texture coordinates are in scene units (a texture's scale is per unit)."""
    return apply_scale(add(bpy.ops.mesh.primitive_cube_add, mat, size=1.0, location=location, rotation=rotation),
                       dims)


def apply_scale(obj: bpy.types.Object, scale: tuple) -> bpy.types.Object:
    """Scale the just-added (selected) `obj` by `scale` and apply it to the mesh, so that its Object texture
    coordinates stay in scene units (an object scale would stretch its texture with it)."""
    obj.scale = scale
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    return obj


def beam(p: Vector, q: Vector, radius: float, mat: bpy.types.Material, vertices: int = 8) -> bpy.types.Object:
    """A cylinder of `radius` from point `p` to point `q` (legs, stems, struts, wires)."""
    axis = q - p
    return add(bpy.ops.mesh.primitive_cylinder_add, mat, vertices=vertices, radius=radius, depth=axis.length,
               location=(p + q) / 2, rotation=axis.to_track_quat("Z", "Y").to_euler())


def ring(rng: random.Random, n: int, spread: tuple[float, float], r_min: float,
         r_max: float) -> Iterator[tuple[int, float, float, float]]:
    """(i, x, y, r) for n seeded spots around the origin, the i-th at azimuth 2 pi (i + U(spread)) / n and radius
    U(r_min, r_max). Drawn one at a time, so the caller's own draws for spot i come between them."""
    for i in range(n):
        az = 2 * math.pi * (i + rng.uniform(*spread)) / n
        r = rng.uniform(r_min, r_max)
        yield i, r * math.cos(az), r * math.sin(az), r


def add_sun(energy: float, tilt_deg: float, azimuth_deg: float) -> None:
    """A sun lamp (3 degrees wide) shining down, tilted `tilt_deg` from the vertical, turned `azimuth_deg` about z."""
    sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    sun.data.energy, sun.data.angle = energy, math.radians(3.0)
    sun.rotation_euler = (math.radians(tilt_deg), 0.0, math.radians(azimuth_deg))
    bpy.context.scene.collection.objects.link(sun)


def setup_cycles(samples: int, seed: int, threads: int, width: int, height: int, transparent: bool,
                 denoise: bool) -> None:
    """Cycles on the CPU with `threads` threads (0 = all), OpenImageDenoise if `denoise`, width x height 8-bit
    PNGs (RGBA with a transparent film, else RGB) and the Standard view transform."""
    scene = bpy.context.scene
    r = scene.render
    r.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.seed = seed
    scene.cycles.use_denoising = denoise
    if denoise:
        scene.cycles.denoiser = "OPENIMAGEDENOISE"
    r.threads_mode = "FIXED" if threads > 0 else "AUTO"
    if threads > 0:
        r.threads = threads
    r.use_persistent_data = True  # keep the BVH between views
    r.resolution_x, r.resolution_y, r.resolution_percentage = width, height, 100
    r.film_transparent = transparent
    r.image_settings.file_format = "PNG"
    r.image_settings.color_mode = "RGBA" if transparent else "RGB"
    r.image_settings.color_depth = "8"
    scene.view_settings.view_transform = "Standard"


# ---------------------------------------------------------------- cameras
def add_camera(lens_mm: float, sensor_mm: float) -> bpy.types.Object:
    """A new camera, made the scene's camera. Its sensor width spans the image width (sensor_fit HORIZONTAL), so
    its angle_x is the horizontal FOV at any aspect."""
    scene = bpy.context.scene
    cam = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
    cam.data.lens, cam.data.sensor_width, cam.data.sensor_fit = lens_mm, sensor_mm, "HORIZONTAL"
    scene.collection.objects.link(cam)
    scene.camera = cam
    return cam


def look_at(position: Vector, target: Vector) -> Matrix:
    """Camera-to-world matrix: camera at `position`, -z towards `target`, +y up (world +z up)."""
    z = (position - target).normalized()
    x = Vector((0.0, 0.0, 1.0)).cross(z).normalized()
    y = z.cross(x)
    m = Matrix.Identity(4)
    for col, v in enumerate((x, y, z, position)):
        for row in range(3):
            m[row][col] = v[row]
    return m


def render_view(cam: bpy.types.Object, c2w: Matrix, path: str) -> None:
    """Render the scene with `cam` at the camera-to-world pose `c2w` into `path` (Blender appends ".png" when
    `path` has no extension)."""
    cam.matrix_world = c2w
    bpy.context.view_layer.update()
    bpy.context.scene.render.filepath = path
    bpy.ops.render.render(write_still=True)
