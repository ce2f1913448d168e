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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import png
import soundfile
from PIL import Image as PILImage

from ..config.memory import check_memory
from ..io import atomic_path
from .image_formats import (
    PIL_DTYPES,
    SignalError,
    first_line,
    pillow_image,
    png_direct,
    read_pillow,
    read_png,
    read_tiff,
    tiff_layout,
)


@dataclass(frozen=True)
class ImageHeader:
    """What decoding an image will give, read from its header alone."""

    height: int
    width: int
    channels: int  # 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
    dtype: np.dtype  # the PNG sample type the reconstruction is written in (uint8 or uint16)
    itemsize: int  # bytes per sample of the decoded array, before the float32 conversion

    @property
    def decode_bytes(self) -> int:
        """Approximate peak bytes of decoding: the samples twice (the library's buffer and numpy's array, or a
        mode conversion) and float32 twice (the conversion and the scaling)."""
        return self.height * self.width * self.channels * (2 * self.itemsize + 2 * 4)


@dataclass
class Image:
    pixels: np.ndarray  # [H, W, C] float32 in [0, 1]; C: 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
    dtype: np.dtype  # the PNG sample type the reconstruction is written in (uint8 or uint16)


def _image_file(path: str | Path, read: Callable[[Path, str], Any]) -> Any:
    """``read(path, kind)`` with kind "png", "tiff" or "pillow" (by the file's signature); every library error but
    SignalError becomes one."""
    path = Path(path)
    if not path.is_file():
        raise SignalError(f"{path}: no such file")
    with open(path, "rb") as file:
        head = file.read(8)
    kind = ("png" if head == b"\x89PNG\r\n\x1a\n"
            else "tiff" if head[:4] in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+") else "pillow")
    try:
        return read(path, kind)
    except SignalError:
        raise
    except Exception as error:  # the libraries raise many types for unreadable files
        raise SignalError(f"{path}: cannot read as an image ({first_line(error)})") from None


def read_image_header(path: str | Path) -> ImageHeader:
    """The size, channels and sample type ``read_image`` will give, without decoding the pixels; SignalError as
    ``read_image`` for what it would refuse by shape or sample type."""
    def read(path: Path, kind: str) -> ImageHeader:
        if kind == "png":
            with open(path, "rb") as file:
                width, height, depth, planes, _ = png_direct(file)
            return _header(path, (height, width, planes), np.dtype(np.uint16 if depth > 8 else np.uint8), 2**depth - 1)
        layout = tiff_layout(path) if kind == "tiff" else None
        if layout is not None:
            return _header(path, *layout, None)
        with pillow_image(path) as (_, target, size):
            dtype = PIL_DTYPES.get(target, np.dtype(np.uint16 if target.startswith("I;16") else np.uint8))
            return _header(path, (*size, PILImage.getmodebands(target)), dtype, None)
    return _image_file(path, read)


def read_image(path: str | Path, header: ImageHeader | None = None) -> Image:
    """The image at ``path`` (``header``: its ``read_image_header``, read again if None): checked against the memory
    limit before decoding, and against the header after; SignalError (one line) for a file it cannot fit."""
    header = header or read_image_header(path)
    check_memory(f"{path}: the decoded image ({header.width}x{header.height}, {header.channels} channels) and its "
                 "float32 copies", header.decode_bytes)

    def read(path: Path, kind: str) -> Image:
        if kind == "png":
            return _image(path, *read_png(path))
        data = read_tiff(path) if kind == "tiff" else None
        return _image(path, read_pillow(path) if data is None else data, None)
    image = _image_file(path, read)
    if image.pixels.shape != (header.height, header.width, header.channels) or image.dtype != header.dtype:
        raise SignalError(f"{path}: decoded as {image.pixels.shape} {image.dtype.name}, but its header says "
                          f"{(header.height, header.width, header.channels)} {header.dtype.name}")
    return image


def _header(path: Path, shape: tuple[int, ...], dtype: np.dtype, peak: int | None) -> ImageHeader:
    """The header of pixels [H, W(, C)] of ``dtype`` (``peak``: their maximum, None for the type's); SignalError
    for a shape or type inr-fit does not fit."""
    shape = tuple(shape) + (1,) * (len(shape) == 2)
    if len(shape) != 3 or not 1 <= shape[2] <= 4:
        raise SignalError(f"{path}: expected a single H x W image with 1 to 4 channels, got shape {shape}")
    if shape[0] == 0 or shape[1] == 0:
        raise SignalError(f"{path}: the image is empty ({shape[1]}x{shape[0]})")
    if np.issubdtype(dtype, np.floating) or dtype == np.bool_:
        written = np.dtype(np.uint16 if np.issubdtype(dtype, np.floating) else np.uint8)
    elif peak is None and dtype not in (np.uint8, np.uint16):
        raise SignalError(f"{path}: unsupported pixel type {dtype} (expected 8- or 16-bit unsigned or float)")
    else:
        written = np.dtype(np.uint16 if (peak or np.iinfo(dtype).max) > 255 else np.uint8)
    return ImageHeader(*shape, written, np.dtype(dtype).itemsize)


def _image(path: Path, data: np.ndarray, peak: int | None) -> Image:
    header = _header(path, data.shape, data.dtype, peak)
    data = data.reshape(header.height, header.width, header.channels)
    if np.issubdtype(data.dtype, np.floating):
        bad = int(data.size - np.count_nonzero(np.isfinite(data)))
        if bad:
            raise SignalError(f"{path}: {bad} pixel value(s) are NaN or infinite; inr-fit fits finite values")
        return Image(np.clip(data, 0.0, 1.0).astype(np.float32), header.dtype)
    peak = 1 if data.dtype == np.bool_ else peak or np.iinfo(data.dtype).max
    return Image(data.astype(np.float32) / np.float32(peak), header.dtype)


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


@dataclass(frozen=True)
class AudioHeader:
    """An audio file's facts, read without its samples."""

    rate: int
    container: str  # libsndfile's major format of the file read: "WAV", "WAVEX", "FLAC", "OGG", ...
    subtype: str  # libsndfile's subtype: "PCM_16", "PCM_24", "FLOAT", "VORBIS", ...
    frames: int
    channels: int

    @property
    def sample_format(self) -> str:
        """int16, int24, int32, uint8, int8, float32, float64, or the subtype in lower case (vorbis, opus, ...)."""
        return FORMAT_NAMES.get(self.subtype, self.subtype.lower())

    @property
    def output_format(self) -> tuple[str, str, str]:
        """(container, subtype, file extension) of the reconstruction: the input's where libsndfile writes them."""
        if self.container in EXTENSIONS:
            return self.container, self.subtype, EXTENSIONS[self.container]
        subtype = (self.subtype if soundfile.check_format("WAV", self.subtype)
                   else WAV_SUBSTITUTES.get(self.subtype, "FLOAT"))
        return "WAV", subtype, "wav"

    @property
    def decode_bytes(self) -> int:
        """Approximate peak bytes of reading the samples: as int32 or float64, the float64 scaling and clipping,
        and the float32 copy."""
        return self.frames * self.channels * (3 * 8 + 4)


@dataclass(frozen=True)
class Audio(AudioHeader):
    samples: np.ndarray  # [T, C] float32 in [-1, 1]


def _libsndfile_message(error: BaseException) -> str:
    text = first_line(error)
    return text + "".join(f": {hint}" for key, hint in LIBSNDFILE_HINTS.items() if key in text)


def _sound_file(path: str | Path) -> soundfile.SoundFile:
    """The open file (header read); SignalError for a missing or unreadable one."""
    path = Path(path)
    if not path.is_file():
        raise SignalError(f"{path}: no such file")
    try:
        return soundfile.SoundFile(str(path))
    except Exception as error:
        raise SignalError(f"{path}: cannot read as audio ({_libsndfile_message(error)})") from None


def read_audio_header(path: str | Path) -> AudioHeader:
    """What ``read_audio`` will give, without reading the samples; SignalError (before any training) for a file
    without samples or whose reconstruction libsndfile could not write back (checked by writing one frame to
    memory)."""
    with _sound_file(path) as file:
        header = AudioHeader(file.samplerate, file.format, file.subtype, file.frames, file.channels)
    if header.frames == 0:
        raise SignalError(f"{path}: the audio file holds no samples")
    container, subtype, _ = header.output_format
    try:
        with soundfile.SoundFile(io.BytesIO(), "w", header.rate, header.channels, subtype, format=container) as probe:
            probe.write(np.zeros((1, header.channels), np.float32))
    except Exception as error:
        raise SignalError(f"{path}: libsndfile cannot write its reconstruction ({container} {subtype}, "
                          f"{header.rate} Hz, {header.channels} channels: {_libsndfile_message(error)})") from None
    return header


def read_audio(path: str | Path, header: AudioHeader | None = None) -> Audio:
    """Any file libsndfile reads (``header``: its ``read_audio_header``, read again if None), checked against the
    memory limit before its samples are read."""
    header = header or read_audio_header(path)
    check_memory(f"{path}: the samples read ({header.frames} x {header.channels}) and their float copies",
                 header.decode_bytes)
    bits = PCM_BITS.get(header.subtype)
    try:
        with _sound_file(path) as file:
            data = file.read(dtype="int32" if bits else "float64", always_2d=True)
    except SignalError:
        raise
    except Exception as error:
        raise SignalError(f"{path}: cannot read as audio ({_libsndfile_message(error)})") from None
    if bits:
        data = data / 2.0**31  # exact: libsndfile puts b-bit PCM in the top bits of int32
    else:
        bad = int(data.size - np.count_nonzero(np.isfinite(data)))
        if bad:
            raise SignalError(f"{path}: {bad} sample(s) are NaN or infinite; inr-fit fits finite values")
    if data.shape != (header.frames, header.channels):
        raise SignalError(f"{path}: read {data.shape[0]} x {data.shape[1]} samples, but its header says "
                          f"{header.frames} x {header.channels}")
    return Audio(header.rate, header.container, header.subtype, header.frames, header.channels,
                 np.clip(data, -1.0, 1.0).astype(np.float32))


def write_audio(path: str | Path, samples: np.ndarray, like: AudioHeader) -> None:
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
