"""16-bit colour PNG, which Pillow (imageio's PNG backend) reads as 8-bit and cannot write.

Written from the PNG specification (W3C PNG 2nd edition): IHDR, zlib-compressed IDAT scanlines each led by a
filter byte (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth), IEND. Non-interlaced images only.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS_BY_COLOR_TYPE = {0: 1, 2: 3, 4: 2, 6: 4}


def is_16bit_colour_png(path: Path) -> bool:
    """True for a non-interlaced 16-bit PNG with more than one channel (grey 16-bit is read fine by Pillow)."""
    with open(path, "rb") as file:
        head = file.read(29)
    return (len(head) == 29 and head[:8] == SIGNATURE and head[12:16] == b"IHDR" and head[24] == 16
            and head[25] in (2, 4, 6) and head[28] == 0)


def _chunks(data: bytes):
    offset = len(SIGNATURE)
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        yield kind, data[offset + 8 : offset + 8 + length]
        offset += 12 + length


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_png16(path: Path) -> np.ndarray:
    """[H, W, C] uint16 pixels of a 16-bit PNG; raises ValueError if it is corrupt."""
    data = Path(path).read_bytes()
    chunks = list(_chunks(data))
    width, height, _, colour_type, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    channels = CHANNELS_BY_COLOR_TYPE[colour_type]
    bpp, stride = 2 * channels, 2 * channels * width
    try:
        raw = np.frombuffer(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), np.uint8)
    except zlib.error as error:
        raise ValueError(f"{path}: corrupt PNG data ({error})") from None
    if raw.size != height * (stride + 1):
        raise ValueError(f"{path}: corrupt PNG data (expected {height * (stride + 1)} bytes, got {raw.size})")
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    previous = np.zeros(stride, np.uint8)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 2:
            current = line + previous
        elif kind == 1:  # Sub: a running sum per byte lane, bpp bytes apart
            current = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1)
        elif kind in (3, 4):
            current, up = line.copy(), previous.astype(np.int32)
            for x in range(stride):
                left = current[x - bpp] & 0xFF if x >= bpp else 0
                if kind == 3:
                    current[x] += (left + up[x]) // 2
                else:
                    current[x] += _paeth(left, int(up[x]), int(up[x - bpp]) if x >= bpp else 0)
        else:
            raise ValueError(f"{path}: corrupt PNG data (filter type {kind})")
        out[y] = previous = (current & 0xFF).astype(np.uint8)
    return out.view(">u2").reshape(height, width, channels).astype(np.uint16)


def write_png16(path: Path, pixels: np.ndarray) -> None:
    """Write [H, W, C] uint16 pixels (C = 1..4) as a 16-bit PNG (filter None, zlib level 6)."""
    height, width, channels = pixels.shape
    colour_type = {v: k for k, v in CHANNELS_BY_COLOR_TYPE.items()}[channels]
    scanlines = np.zeros((height, 1 + 2 * channels * width), np.uint8)
    scanlines[:, 1:] = pixels.astype(">u2").view(np.uint8).reshape(height, -1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 16, colour_type, 0, 0, 0)
    Path(path).write_bytes(SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 6))
                           + chunk(b"IEND", b""))
