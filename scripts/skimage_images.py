"""Copy scikit-image's bundled test images into a folder for `inr-fit images` (no download: the wheel ships them).

    python scripts/skimage_images.py out/skimage8

The default set is the eight smallest photographs and scans among them, each at its own size (gray or RGB):
microaneurysms 102x102, page 191x384, text 172x448, coins 303x384, clock_motion 300x400, chelsea 300x451,
camera 512x512, astronaut 512x512. Synthetic charts (chessboard, color, phantom, logo) are left out.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import skimage

IMAGES = ("microaneurysms", "page", "text", "coins", "clock_motion", "chelsea", "camera", "astronaut")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--images", default=",".join(IMAGES), help="comma-separated names (default: %(default)s)")
    args = parser.parse_args()
    source = Path(skimage.__file__).parent / "data"
    args.folder.mkdir(parents=True, exist_ok=True)
    for name in args.images.split(","):
        shutil.copyfile(source / f"{name}.png", args.folder / f"{name}.png")
    print(f"{len(args.images.split(','))} images in {args.folder}")


if __name__ == "__main__":
    main()
