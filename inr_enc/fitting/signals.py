"""Reading and writing the signals inr-fit fits, each format through a library that reads all of it:

- PNG: pypng, every bit depth (1 to 16), interlaced or not; palette -> RGB (RGBA with a tRNS chunk), grey+alpha
  stays 2 channels, grey or RGB with a tRNS colour gains an alpha channel. Written back by pypng, 8 or 16 bit.
- TIFF: tifffile for grey and RGB(A) of any sample type (16-bit, float); other photometrics (palette, CMYK, ...)
  and compressions tifffile cannot decode without imagecodecs go to Pillow.
- anything else Pillow reads, converted to L, LA, RGB or RGBA (a CMYK JPEG -> RGB, palette -> RGB or RGBA).
- audio: soundfile (libsndfile): WAV of every depth, FLAC, OGG (Vorbis, Opus), and what else libsndfile reads.

Images become float32 in [0, 1] (integers / their maximum, floats clipped) and audio float32 in [-1, 1] (PCM / 2^(bits
- 1), floats clipped); non-finite values are refused. Bad files raise SignalError (a ValueError) with one line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import png
import soundfile
import tifffile
from PIL import Image as PILImage
from PIL import ImageOps

from ..io import atomic_path


class SignalError(ValueError):
    """A signal file that inr-fit cannot fit (the message names the file and the problem)."""


@dataclass
class Image:
    pixels: np.ndarray  # [H, W, C] float32 in [0, 1]; C: 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
    dtype: np.dtype  # the PNG sample type the reconstruction is written in (uint8 or uint16)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def read_image(path: str | Path) -> Image:
    path = Path(path)
    if not path.is_file():
        raise SignalError(f"{path}: no such file")
    with open(path, "rb") as file:
        head = file.read(8)
    try:
        if head == b"\x89PNG\r\n\x1a\n":
            data, peak = _read_png(path)
        else:
            data = _read_tiff(path) if head[:4] in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+") else None
            data, peak = (_read_pillow(path) if data is None else data), None
    except SignalError:
        raise
    except Exception as error:  # the libraries raise many types for unreadable files
        raise SignalError(f"{path}: cannot read as an image ({_first_line(error)})") from None
    return _image(path, data, peak)


def _image(path: Path, data: np.ndarray, peak: int | None) -> Image:
    if data.ndim == 2:
        data = data[:, :, None]
    if data.ndim != 3 or not 1 <= data.shape[2] <= 4:
        raise SignalError(f"{path}: expected a single H x W image with 1 to 4 channels, got shape {data.shape}")
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise SignalError(f"{path}: the image is empty ({data.shape[1]}x{data.shape[0]})")
    if np.issubdtype(data.dtype, np.floating):
        bad = int(data.size - np.count_nonzero(np.isfinite(data)))
        if bad:
            raise SignalError(f"{path}: {bad} pixel value(s) are NaN or infinite; inr-fit fits finite values")
        return Image(np.clip(data, 0.0, 1.0).astype(np.float32), np.dtype(np.uint16))
    if data.dtype == np.bool_:
        peak = 1
    elif peak is None:
        if data.dtype not in (np.uint8, np.uint16):
            raise SignalError(f"{path}: unsupported pixel type {data.dtype} (expected 8- or 16-bit unsigned or float)")
        peak = np.iinfo(data.dtype).max
    return Image(data.astype(np.float32) / np.float32(peak), np.dtype(np.uint16 if peak > 255 else np.uint8))


def _read_png(path: Path) -> tuple[np.ndarray, int]:
    """pypng's direct form: palette expanded, tRNS made an alpha channel, sBIT applied; -> pixels and their peak."""
    width, height, rows, info = png.Reader(filename=str(path)).asDirect()
    depth, planes = info["bitdepth"], info["planes"]
    data = np.empty((height, width * planes), np.uint16 if depth > 8 else np.uint8)
    for y, row in enumerate(rows):
        data[y] = row
    return data.reshape(height, width, planes), 2**depth - 1


def _read_tiff(path: Path) -> np.ndarray | None:
    """Grey or RGB(A) pixels [H, W(, S)] of the first image, as stored; None for what Pillow should read."""
    with tifffile.TiffFile(path) as tif:
        if not tif.series or tif.pages.first.photometric not in (tifffile.PHOTOMETRIC.MINISBLACK, tifffile.PHOTOMETRIC.RGB):
            return None
        series = tif.series[0]
        try:
            data = series.asarray()
        except Exception:  # a compression tifffile decodes only with imagecodecs: Pillow's libtiff may
            return None
        axes = series.axes
    if data.size == 0:
        return data  # reported as empty
    keep = [i for i, axis in enumerate(axes) if axis in "YXS" or data.shape[i] != 1]
    data, axes = data.reshape([data.shape[i] for i in keep]), "".join(axes[i] for i in keep)
    if sorted(axes) not in (["X", "Y"], ["S", "X", "Y"]):
        raise SignalError(f"{path}: expected a single image, got a TIFF series of shape {data.shape} (axes {axes})")
    return np.transpose(data, [axes.index(axis) for axis in "YXS" if axis in axes])


EXIF_ORIENTATION = 0x0112
PIL_KEPT = {"L", "LA", "RGB", "RGBA", "I", "I;16", "I;16L", "I;16B", "I;16N", "F"}  # "I" (int32) is refused later
PIL_CONVERSIONS = {"1": "L", "La": "LA", "PA": "RGBA", "RGBa": "RGBA"}  # the rest (CMYK, YCbCr, LAB, HSV...) -> RGB


def _read_pillow(path: Path) -> np.ndarray:
    with PILImage.open(path) as image:
        if getattr(image, "is_animated", False) and image.format != "MPO":  # MPO: a camera JPEG's primary image first
            raise SignalError(f"{path}: an animation of {image.n_frames} frames; inr-fit fits a single image")
        if image.getexif().get(EXIF_ORIENTATION, 1) != 1:  # a phone photo: fitted as it is shown, upright
            image = ImageOps.exif_transpose(image)
        mode = image.mode
        if mode == "P":
            target = "RGBA" if "transparency" in image.info else "RGB"
        else:
            target = mode if mode in PIL_KEPT else PIL_CONVERSIONS.get(mode, "RGB")
        data = np.asarray(image if target == mode else image.convert(target))
    return data.astype(data.dtype.newbyteorder("=")) if data.dtype.byteorder == ">" else data


def write_image(path: str | Path, pixels: np.ndarray, dtype: np.dtype) -> None:
    """pixels [H, W, C] in [0, 1] (C 1..4: grey, grey+alpha, RGB, RGBA) -> PNG of ``dtype`` (uint8 or uint16), written
    atomically by pypng."""
    dtype = np.dtype(dtype)
    height, width, channels = pixels.shape
    data = np.round(np.clip(pixels, 0.0, 1.0) * np.iinfo(dtype).max).astype(dtype.newbyteorder(">"))
    writer = png.Writer(width, height, greyscale=channels <= 2, alpha=channels in (2, 4), bitdepth=8 * dtype.itemsize)
    rows = data.view(np.uint8).reshape(height, -1)  # packed: big-endian samples, as PNG stores them
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        writer.write_packed(file, (row.tobytes() for row in rows))


# Audio. libsndfile reads PCM to float exactly (x / 2^(bits - 1)), but its float -> 8/16/24-bit PCM conversion with
# clipping (which soundfile turns on) rounds down in WAV instead of to nearest (0.7 LSB -> 0, a bias of half a step):
# the reconstruction is quantised here and handed over as int32, which libsndfile only shifts (tests/test_signals.py).
PCM_BITS = {"PCM_U8": 8, "PCM_S8": 8, "PCM_16": 16, "PCM_24": 24, "PCM_32": 32}
FORMAT_NAMES = {"PCM_U8": "uint8", "PCM_S8": "int8", "PCM_16": "int16", "PCM_24": "int24", "PCM_32": "int32",
                "FLOAT": "float32", "DOUBLE": "float64"}  # describe()'s "format" (int16, int32, float32 before)
EXTENSIONS = {"WAV": "wav", "WAVEX": "wav", "RF64": "wav", "FLAC": "flac", "OGG": "ogg"}  # other containers -> WAV
WAV_SUBSTITUTES = {"PCM_S8": "PCM_U8"}  # a subtype WAV cannot hold -> this one, else FLOAT
LIBSNDFILE_HINTS = {"SF_INFO struct incomplete": "the header's sample rate or channel count is out of range"}


@dataclass
class Audio:
    samples: np.ndarray  # [T, C] float32 in [-1, 1]
    rate: int
    container: str  # libsndfile's major format of the file read: "WAV", "WAVEX", "FLAC", "OGG", ...
    subtype: str  # libsndfile's subtype: "PCM_16", "PCM_24", "FLOAT", "VORBIS", ...

    @property
    def sample_format(self) -> str:
        """int16, int24, int32, uint8, int8, float32, float64, or the subtype in lower case (vorbis, opus, ...)."""
        return FORMAT_NAMES.get(self.subtype, self.subtype.lower())

    @property
    def output_format(self) -> tuple[str, str, str]:
        """(container, subtype, file extension) of the reconstruction: the input's where libsndfile writes them."""
        if self.container in EXTENSIONS:
            return self.container, self.subtype, EXTENSIONS[self.container]
        subtype = self.subtype if soundfile.check_format("WAV", self.subtype) else WAV_SUBSTITUTES.get(self.subtype, "FLOAT")
        return "WAV", subtype, "wav"


def _libsndfile_message(error: BaseException) -> str:
    text = _first_line(error)
    return text + "".join(f": {hint}" for key, hint in LIBSNDFILE_HINTS.items() if key in text)


def read_audio(path: str | Path) -> Audio:
    """Any file libsndfile reads; raises SignalError (before any training) for one whose reconstruction it could not
    write back (checked by writing one frame to memory)."""
    path = Path(path)
    if not path.is_file():
        raise SignalError(f"{path}: no such file")
    try:
        with soundfile.SoundFile(str(path)) as file:
            bits = PCM_BITS.get(file.subtype)
            data = file.read(dtype="int32" if bits else "float64", always_2d=True)
            rate, container, subtype = file.samplerate, file.format, file.subtype
    except Exception as error:
        raise SignalError(f"{path}: cannot read as audio ({_libsndfile_message(error)})") from None
    if data.shape[0] == 0:
        raise SignalError(f"{path}: the audio file holds no samples")
    if bits:
        data = data / 2.0**31  # exact: libsndfile puts b-bit PCM in the top bits of int32
    else:
        bad = int(data.size - np.count_nonzero(np.isfinite(data)))
        if bad:
            raise SignalError(f"{path}: {bad} sample(s) are NaN or infinite; inr-fit fits finite values")
    audio = Audio(np.clip(data, -1.0, 1.0).astype(np.float32), rate, container, subtype)
    container, subtype, _ = audio.output_format
    try:
        with soundfile.SoundFile(io.BytesIO(), "w", audio.rate, data.shape[1], subtype, format=container) as probe:
            probe.write(np.zeros((1, data.shape[1]), np.float32))
    except Exception as error:
        raise SignalError(f"{path}: libsndfile cannot write its reconstruction ({container} {subtype}, {audio.rate} Hz, "
                          f"{data.shape[1]} channels: {_libsndfile_message(error)})") from None
    return audio


def write_audio(path: str | Path, samples: np.ndarray, like: Audio) -> None:
    """samples [T, C] in [-1, 1] -> ``like.output_format`` at ``like.rate`` (PCM rounded to nearest), atomically."""
    container, subtype, _ = like.output_format
    clipped = np.clip(samples, -1.0, 1.0).astype(np.float64)
    bits = PCM_BITS.get(subtype)
    if bits:
        top = 2 ** (bits - 1)
        data = np.clip(np.round(clipped * top), -top, top - 1).astype(np.int32) << (32 - bits)
    else:
        data = clipped.astype(np.float64 if subtype == "DOUBLE" else np.float32)
    with atomic_path(path) as tmp:
        soundfile.write(str(tmp), data, like.rate, subtype=subtype, format=container)
