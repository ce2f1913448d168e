"""Reading and writing the signals inr-fit fits: images (whatever imageio reads) and WAV audio.

Values are float32 in [0, 1] for images (uint8 / 255, uint16 / 65535) and in [-1, 1] for audio
(int16 / 2^15, int32 / 2^31, float32 as stored). Bad files raise ValueError with one clear line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..io import atomic_path
from .png16 import is_16bit_colour_png, read_png16, write_png16


@dataclass
class Image:
    pixels: np.ndarray  # [H, W, C] float32 in [0, 1], C in 1..4
    dtype: np.dtype  # stored sample type, reused when writing (uint8 or uint16)


@dataclass
class Audio:
    samples: np.ndarray  # [T, C] float32 in [-1, 1]
    rate: int
    sample_format: str  # "int16" | "int32" | "float32"


def read_image(path: str | Path) -> Image:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        data = read_png16(path) if is_16bit_colour_png(path) else np.asarray(iio.imread(path))
    except ValueError:
        raise
    except Exception as error:  # imageio raises many types for unreadable files
        raise ValueError(f"{path}: cannot read as an image ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None
    if data.ndim == 2:
        data = data[:, :, None]
    if data.ndim != 3 or not 1 <= data.shape[2] <= 4:
        raise ValueError(f"{path}: expected a single H x W image with 1 to 4 channels, got shape {data.shape}")
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise ValueError(f"{path}: the image is empty ({data.shape[1]}x{data.shape[0]})")
    if data.dtype == np.uint8:
        return Image((data / 255.0).astype(np.float32), np.dtype(np.uint8))
    if data.dtype == np.uint16:
        return Image((data / 65535.0).astype(np.float32), np.dtype(np.uint16))
    if data.dtype == np.bool_:
        return Image(data.astype(np.float32), np.dtype(np.uint8))
    if np.issubdtype(data.dtype, np.floating):
        return Image(np.clip(data, 0.0, 1.0).astype(np.float32), np.dtype(np.uint16))
    raise ValueError(f"{path}: unsupported pixel type {data.dtype}")


def write_image(path: str | Path, pixels: np.ndarray, dtype: np.dtype) -> None:
    """pixels [H, W, C] in [0, 1] -> PNG of ``dtype`` (uint8 or uint16), written atomically."""
    peak = np.iinfo(dtype).max
    data = np.round(np.clip(pixels, 0.0, 1.0) * peak).astype(dtype)
    with atomic_path(path) as tmp:
        if dtype == np.uint16:  # Pillow cannot write 16-bit colour
            write_png16(tmp, data)
        else:
            iio.imwrite(tmp, data[:, :, 0] if data.shape[2] == 1 else data, extension=".png")


WAVE_PCM, WAVE_FLOAT, WAVE_EXTENSIBLE = 1, 3, 0xFFFE
FORMATS = {(WAVE_PCM, 16): ("int16", "<i2", 2.0**15), (WAVE_PCM, 32): ("int32", "<i4", 2.0**31), (WAVE_FLOAT, 32): ("float32", "<f4", 1.0)}


def read_wav(path: str | Path) -> Audio:
    """RIFF/WAVE with 16- or 32-bit PCM or 32-bit float samples, any number of channels."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    data = path.read_bytes()
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a WAV file (no RIFF/WAVE header)")
    fmt, samples, offset = None, None, 12
    while offset + 8 <= len(data):
        chunk_id, size = data[offset : offset + 4], struct.unpack("<I", data[offset + 4 : offset + 8])[0]
        body = data[offset + 8 : offset + 8 + size]
        if chunk_id == b"fmt " and len(body) >= 16:
            tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", body[:16])
            if tag == WAVE_EXTENSIBLE and len(body) >= 26:
                tag = struct.unpack("<H", body[24:26])[0]
            fmt = (tag, channels, rate, bits)
        elif chunk_id == b"data":
            samples = body
        offset += 8 + size + (size & 1)
    if fmt is None or samples is None:
        raise ValueError(f"{path}: corrupt WAV file (missing fmt or data chunk)")
    tag, channels, rate, bits = fmt
    if (tag, bits) not in FORMATS or channels < 1:
        raise ValueError(f"{path}: unsupported WAV format (tag {tag}, {bits} bits, {channels} channels); use int16, int32 or float32")
    name, numpy_type, scale = FORMATS[(tag, bits)]
    frame_bytes = channels * bits // 8
    n_frames = len(samples) // frame_bytes
    if n_frames == 0:
        raise ValueError(f"{path}: the WAV file holds no samples")
    values = np.frombuffer(samples[: n_frames * frame_bytes], dtype=numpy_type).reshape(n_frames, channels)
    return Audio((values / scale).astype(np.float32), rate, name)


def write_wav(path: str | Path, samples: np.ndarray, rate: int, sample_format: str) -> None:
    """samples [T, C] in [-1, 1] -> WAV in ``sample_format`` (int16, int32 or float32), written atomically."""
    (tag, bits), (_, numpy_type, scale) = next((key, value) for key, value in FORMATS.items() if value[0] == sample_format)
    clipped = np.clip(samples, -1.0, 1.0) * scale
    if tag == WAVE_PCM:
        clipped = np.clip(np.round(clipped), -scale, scale - 1)
    payload = clipped.astype(numpy_type).tobytes()
    channels = samples.shape[1]
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * channels * bits // 8, channels * bits // 8, bits)
    riff = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(payload)) + payload
    with atomic_path(path) as tmp:
        tmp.write_bytes(b"RIFF" + struct.pack("<I", len(riff)) + riff)
