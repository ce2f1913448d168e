"""Convert an LLFF capture (images/ plus poses_bounds.npy) into the nerfstudio-data format.

LLFF (Mildenhall et al., "Local Light Field Fusion", SIGGRAPH 2019) stores a capture as a folder of images and one
array, poses_bounds.npy, of shape (N, 17): per image, a 3x5 matrix flattened row by row, then the near and far
depth bounds. The matrix's first three columns are the camera's axes in world coordinates in the order
(down, right, backwards), the fourth is the camera centre, and the fifth is (height, width, focal length) in pixels
of the images the poses were estimated on. Rows follow the image file names in sorted order (LLFF's imgs2poses
sorts COLMAP's image names; NeRF's load_llff sorts the folder listing). The principal point is the image centre.

nerfstudio has no LLFF dataparser, so this writes what ``ns-process-data`` would: transforms.json with OpenGL
camera-to-world matrices, whose axes are (right, up, backwards) = (LLFF col 1, -LLFF col 0, LLFF col 2), and
resized JPEG copies in images/ (--long-side pixels on the longer side) and images_2/ (half of that, for
``--downscale-factor 2``). The intrinsics are scaled to each written size; width and height are scaled
separately when the aspect ratio cannot be kept to the pixel.

    python scenes/llff_to_nerfstudio.py CAPTURE --out data/scenes/NAME [--long-side 384] [--quality 90]

Needs numpy and Pillow only (any venv: /tmp/bpy-venv or .venv-test). Real captures used by the scene set are
listed in scenes/README.md with the repository and commit they come from.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

import numpy as np
from PIL import Image
from scene_files import staged_folder, write_transforms

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def fail(message: str) -> NoReturn:
    print(f"llff_to_nerfstudio: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scenes/llff_to_nerfstudio.py")
    p.add_argument("capture", help="LLFF folder with images/ and poses_bounds.npy")
    p.add_argument("--out", required=True, help="output dataset directory (nerfstudio-data)")
    p.add_argument("--long-side", type=int, default=384,
                   help="longer side of the images/ copies in pixels (images_2/: half)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality of the written images")
    args = p.parse_args(argv)
    if args.long_side < 4 or args.long_side % 2:
        p.error(f"--long-side must be an even number >= 4, got {args.long_side}")
    return args


def open_image(folder: str, name: str) -> Image.Image:
    """The image decoded as RGB; a file Pillow cannot read stops the script with one line."""
    try:
        with Image.open(os.path.join(folder, name)) as image:
            return image.convert("RGB")
    except OSError as error:  # Pillow's UnidentifiedImageError and truncated files are OSErrors
        fail(f"{os.path.join(folder, name)}: not a readable image ({error})")


def llff_poses(poses_bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OpenGL camera-to-world matrices [N, 4, 4] and (height, width, focal) [N, 3] from an LLFF array [N, 17]."""
    if poses_bounds.ndim != 2 or poses_bounds.shape[1] != 17:
        raise ValueError(f"poses_bounds must have shape (N, 17), got {poses_bounds.shape}")
    mats = poses_bounds[:, :15].reshape(-1, 3, 5)
    down, right, back, centre = (mats[:, :, i] for i in range(4))
    c2w = np.tile(np.eye(4), (len(mats), 1, 1))
    c2w[:, :3, 0], c2w[:, :3, 1], c2w[:, :3, 2], c2w[:, :3, 3] = right, -down, back, centre
    return c2w, mats[:, :, 4]


def intrinsics(hwf: np.ndarray, width: int, height: int) -> dict:
    """nerfstudio-data intrinsics for images resized to width x height from LLFF's (h, w, focal)."""
    h, w, focal = (float(v) for v in hwf)
    sx, sy = width / w, height / h
    return {"camera_model": "OPENCV", "w": width, "h": height, "fl_x": focal * sx, "fl_y": focal * sy,
            "cx": width / 2, "cy": height / 2, "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0}


def main() -> None:
    args = parse_args(sys.argv[1:])
    image_dir = os.path.join(args.capture, "images")
    pb_path = os.path.join(args.capture, "poses_bounds.npy")
    if not os.path.isdir(image_dir) or not os.path.isfile(pb_path):
        fail(f"{args.capture} needs images/ and poses_bounds.npy")
    names = sorted(n for n in os.listdir(image_dir) if n.lower().endswith(IMAGE_SUFFIXES))
    try:
        c2w, hwf = llff_poses(np.load(pb_path))
    except ValueError as error:
        fail(f"{pb_path}: {error}")
    if len(names) != len(c2w):
        fail(f"{len(names)} images in {image_dir} but {len(c2w)} poses in {pb_path}; LLFF writes one pose per "
             "registered image, so remove the images COLMAP did not register")
    if not (np.isfinite(c2w).all() and np.isfinite(hwf).all() and (hwf > 0).all()):
        fail(f"{pb_path}: poses and (height, width, focal) must be finite, and the latter positive")
    if not np.allclose(hwf, hwf[0]):
        fail("the images have different intrinsics; one shared camera is expected")
    first = open_image(image_dir, names[0])
    if (first.height, first.width) != (round(hwf[0, 0]), round(hwf[0, 1])):
        print(f"llff_to_nerfstudio: note: images are {first.width}x{first.height}, poses_bounds says "
              f"{hwf[0, 1]:.0f}x{hwf[0, 0]:.0f}; intrinsics scaled to the files", flush=True)
        hwf = hwf * [first.height / hwf[0, 0], first.width / hwf[0, 1], first.width / hwf[0, 1]]
    scale = args.long_side / max(first.size)
    width, height = (round(side * scale / 2) * 2 for side in first.size)  # even, so images_2 is exactly half
    frames = []
    with staged_folder(os.path.abspath(args.out)) as staging:
        for sub in ("images", "images_2"):
            os.makedirs(os.path.join(staging, sub))
        for i, name in enumerate(names):
            image = open_image(image_dir, name)
            if image.size != first.size:
                fail(f"{name} is {image.size[0]}x{image.size[1]}, the first image {first.width}x{first.height}")
            stem = f"frame_{i + 1:05d}.jpg"
            full = image.resize((width, height), Image.Resampling.LANCZOS)
            full.save(os.path.join(staging, "images", stem), quality=args.quality)
            full.reduce(2).save(os.path.join(staging, "images_2", stem), quality=args.quality)
            frames.append({"file_path": f"images/{stem}", "original_name": name,
                           "transform_matrix": [[round(float(v), 8) for v in row] for row in c2w[i]]})
        write_transforms(os.path.join(staging, "transforms.json"),
                         {**intrinsics(hwf[0], width, height), "frames": frames})
    print(f"llff_to_nerfstudio: wrote {args.out}: {len(frames)} views at {width}x{height} "
          f"(images_2: {width // 2}x{height // 2})", flush=True)


if __name__ == "__main__":
    main()
