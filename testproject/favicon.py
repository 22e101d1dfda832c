"""The test project's favicon: a 32 px ledger mark, drawn here so no binary file is kept.

Browsers ask every site for ``/favicon.ico``; without it each page logs a 404. The icon
is an ICO holding one PNG (allowed since Windows Vista, read by every browser): a
rounded square in the admin's blue with three white ruled lines, the ledger's pages.
"""

from __future__ import annotations

import struct
import zlib
from functools import cache

from django.http import HttpRequest, HttpResponse

SIZE = 32
BLUE = (0x41, 0x76, 0x90, 0xFF)  # the Django admin's header colour
WHITE = (0xFF, 0xFF, 0xFF, 0xFF)
CLEAR = (0, 0, 0, 0)
RADIUS = 6
LINES = (9, 15, 21)  # rows where a ruled line starts; each is 3 px thick


def _pixel(x: int, y: int) -> tuple[int, int, int, int]:
    # Outside the rounded corners: transparent.
    cx = min(max(x, RADIUS), SIZE - 1 - RADIUS)
    cy = min(max(y, RADIUS), SIZE - 1 - RADIUS)
    if (x - cx) ** 2 + (y - cy) ** 2 > RADIUS**2:
        return CLEAR
    if any(top <= y < top + 3 for top in LINES) and 7 <= x < SIZE - 7:
        return WHITE
    return BLUE


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png() -> bytes:
    """Return the mark as a 32x32 RGBA PNG."""
    rows = b"".join(
        b"\x00" + bytes(v for x in range(SIZE) for v in _pixel(x, y)) for y in range(SIZE)
    )
    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0)  # 8 bits, RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 9))
        + _chunk(b"IEND", b"")
    )


@cache
def ico() -> bytes:
    """Return the ICO file: its header, one directory entry, and the PNG."""
    image = png()
    entry = struct.pack("<BBBBHHII", SIZE, SIZE, 0, 0, 1, 32, len(image), 6 + 16)
    return struct.pack("<HHH", 0, 1, 1) + entry + image


def favicon(request: HttpRequest) -> HttpResponse:
    """Serve ``/favicon.ico``, cacheable for a day."""
    response = HttpResponse(ico(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response
