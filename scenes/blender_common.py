"""Blender code that render_blender.py and render_unbounded.py share: Cycles settings, the camera, look-at poses,
textured materials, adding primitives and rendering one view. Runs under Blender's Python (Debian's Blender 3.4 or
the bpy 4.5 wheel)."""
from __future__ import annotations

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


def link(tree: bpy.types.NodeTree, *wires: tuple) -> None:
    """Link each (node, output name, node, input name) of `wires` in `tree`, in order."""
    for src, output, dst, input_ in wires:
        tree.links.new(src.outputs[output], dst.inputs[input_])


def texture_ramp(tree: bpy.types.NodeTree, texture: str, scale: float, color: tuple, color2: tuple,
                 coords: str = "Object") -> tuple[bpy.types.ShaderNode, bpy.types.NodeSocket]:
    """Add a procedural texture (a ShaderNodeTex* type) read at the `coords` texture coordinates, with its Fac
    (Voronoi: Distance) mapped to a colour ramp from `color` to `color2`; return the TexCoord node and the ramp's
    Color output."""
    tc, tex, ramp = (tree.nodes.new(t) for t in ("ShaderNodeTexCoord", texture, "ShaderNodeValToRGB"))
    tex.inputs["Scale"].default_value = scale
    ramp.color_ramp.elements[0].color, ramp.color_ramp.elements[1].color = (*color, 1.0), (*color2, 1.0)
    link(tree, (tc, coords, tex, "Vector"), (tex, "Fac" if "Fac" in tex.outputs else "Distance", ramp, "Fac"))
    return tc, ramp.outputs["Color"]


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
