"""The image libraries' readers behind fitting/signals.py (its docstring says what each reads): each file's pixels as
stored, and what they will be without decoding them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import png
import tifffile
from PIL import Image as PILImage
from PIL import ImageOps


class SignalError(ValueError):
    """A signal file that inr-fit cannot fit (the message names the file and the problem)."""


def first_line(error: BaseException) -> str:
    """"Type: the first line of its message"."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def png_direct(file: BinaryIO) -> tuple[int, int, int, int, Iterator[Any]]:
    """pypng's direct form (palette expanded, tRNS made an alpha channel, sBIT applied): width, height, bit depth,
    planes and the rows, read as they are iterated (the header alone until then)."""
    width, height, rows, info = png.Reader(file=file).asDirect()
    return width, height, info["bitdepth"], info["planes"], rows


def read_png(path: Path) -> tuple[np.ndarray, int]:
    """Pixels in pypng's direct form and their peak."""
    with open(path, "rb") as file:
        width, height, depth, planes, rows = png_direct(file)
        data = np.empty((height, width * planes), np.uint16 if depth > 8 else np.uint8)
        for y, row in enumerate(rows):
            data[y] = row
    return data.reshape(height, width, planes), 2**depth - 1


def _tifffile_series(tif: tifffile.TiffFile) -> tifffile.TiffPageSeries | None:
    """The first grey or RGB(A) series where tifffile decodes its compression and predictor; None for what Pillow
    should read (other photometrics, codecs tifffile decodes only with imagecodecs)."""
    page = tif.pages.first if tif.series else None
    if page is None or page.photometric not in (tifffile.PHOTOMETRIC.MINISBLACK, tifffile.PHOTOMETRIC.RGB):
        return None
    try:
        if page.compression != 1:
            tifffile.TIFF.DECOMPRESSORS[page.compression]
        if page.predictor != 1:
            tifffile.TIFF.PREDICTORS[page.predictor]
    except KeyError:
        return None
    return tif.series[0]


def _squeezed(path: Path, shape: tuple[int, ...], axes: str) -> tuple[list[int], list[int]]:
    """A series' axes kept (Y, X, S and any longer than 1) and their order as [H, W(, S)]; SignalError for a stack."""
    keep = [i for i, axis in enumerate(axes) if axis in "YXS" or shape[i] != 1]
    kept = "".join(axes[i] for i in keep)
    if sorted(kept) not in (["X", "Y"], ["S", "X", "Y"]):
        raise SignalError(f"{path}: expected a single image, got a TIFF series of shape "
                          f"{tuple(shape[i] for i in keep)} "
                          f"(axes {kept})")
    return keep, [kept.index(axis) for axis in "YXS" if axis in kept]


def tiff_layout(path: Path) -> tuple[tuple[int, ...], np.dtype] | None:
    """The [H, W(, S)] shape and sample type ``_read_tiff`` gives; None for what Pillow should read."""
    with tifffile.TiffFile(path) as tif:
        series = _tifffile_series(tif)
        if series is None:
            return None
        if math.prod(series.shape) == 0:
            return (0, 0), series.dtype  # reported as empty
        keep, order = _squeezed(path, series.shape, series.axes)
        return tuple(series.shape[keep[i]] for i in order), series.dtype


def read_tiff(path: Path) -> np.ndarray | None:
    """Grey or RGB(A) pixels [H, W(, S)] of the first image, as stored; None for what Pillow should read."""
    with tifffile.TiffFile(path) as tif:
        series = _tifffile_series(tif)
        if series is None:
            return None
        data, axes = series.asarray(), series.axes
    if data.size == 0:
        return data  # reported as empty
    keep, order = _squeezed(path, data.shape, axes)
    return np.transpose(data.reshape([data.shape[i] for i in keep]), order)


EXIF_ORIENTATION = 0x0112
EXIF_SWAPS = (5, 6, 7, 8)  # orientations shown turned by a quarter: width and height swap
PIL_KEPT = {"L", "LA", "RGB", "RGBA", "I", "I;16", "I;16L", "I;16B", "I;16N", "F"}  # "I" (int32) is refused later
PIL_CONVERSIONS = {"1": "L", "La": "LA", "PA": "RGBA", "RGBa": "RGBA"}  # the rest (CMYK, YCbCr, LAB, HSV...) -> RGB
PIL_DTYPES = {"I": np.dtype(np.int32), "F": np.dtype(np.float32)}  # the rest: uint8, I;16* uint16


@contextmanager
def pillow_image(path: Path) -> Iterator[tuple[PILImage.Image, str, tuple[int, int]]]:
    """Pillow's lazy image of ``path``, the mode it is read in and its (height, width) once turned upright by its
    EXIF orientation. Pillow's decompression-bomb limit (about 179 Mpixel) is lifted while opening: ``read_image``
    checks the decode against the memory limit instead, before any pixel is decoded."""
    bomb_limit, PILImage.MAX_IMAGE_PIXELS = PILImage.MAX_IMAGE_PIXELS, None
    try:
        image = PILImage.open(path)
    finally:
        PILImage.MAX_IMAGE_PIXELS = bomb_limit
    with image:
        if getattr(image, "is_animated", False) and image.format != "MPO":  # MPO: a camera JPEG's primary image first
            raise SignalError(f"{path}: an animation of {image.n_frames} frames; inr-fit fits a single image")
        mode = image.mode
        if mode == "P":
            target = "RGBA" if "transparency" in image.info else "RGB"
        else:
            target = mode if mode in PIL_KEPT else PIL_CONVERSIONS.get(mode, "RGB")
        turned = image.getexif().get(EXIF_ORIENTATION, 1) in EXIF_SWAPS
        yield image, target, (image.width, image.height) if turned else (image.height, image.width)


def read_pillow(path: Path) -> np.ndarray:
    with pillow_image(path) as (image, target, _):
        if image.getexif().get(EXIF_ORIENTATION, 1) != 1:  # a phone photo: fitted as it is shown, upright
            image = ImageOps.exif_transpose(image)
        data = np.asarray(image if target == image.mode else image.convert(target))
    return data.astype(data.dtype.newbyteorder("=")) if data.dtype.byteorder == ">" else data
