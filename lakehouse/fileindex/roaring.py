"""Roaring bitmaps in Java RoaringBitmap's portable format, as Paimon's ``RoaringBitmap32`` writes them.

Paimon run-optimizes before serializing; pyroaring (CRoaring) uses the same portable format and
the same container heuristics, so the bytes are identical. Serialized bitmaps sit back to back
inside index files, so :func:`read` works out each one's length from its header.
"""

from __future__ import annotations

import struct

from pyroaring import BitMap

from lakehouse.errors import CorruptFileError

_COOKIE_NO_RUN = 12346  # SERIAL_COOKIE_NO_RUNCONTAINER
_COOKIE = 12347  # SERIAL_COOKIE
_NO_OFFSET_THRESHOLD = 4


def serialize(bitmap: BitMap) -> bytes:
    """``RoaringBitmap32.serialize()``: run-optimize, then the portable format."""
    bitmap.run_optimize()
    return bitmap.serialize()


def serialized_size(data: bytes | memoryview, offset: int = 0) -> int:
    """Length of the portable-format bitmap starting at ``offset``."""
    try:
        cookie = struct.unpack_from("<I", data, offset)[0]
        pos = offset + 4
        if cookie & 0xFFFF == _COOKIE:
            size = (cookie >> 16) + 1
            runs = bytes(data[pos : pos + (size + 7) // 8])
            pos += (size + 7) // 8
            has_offsets = size >= _NO_OFFSET_THRESHOLD
        elif cookie == _COOKIE_NO_RUN:
            size = struct.unpack_from("<I", data, pos)[0]
            pos += 4
            runs, has_offsets = b"", True
        else:
            raise CorruptFileError(f"not a roaring bitmap (cookie {cookie:#x})")
        headers = struct.unpack_from(f"<{2 * size}H", data, pos)
        pos += 4 * size + (4 * size if has_offsets else 0)
        for i in range(size):
            cardinality = headers[2 * i + 1] + 1
            if runs and runs[i // 8] & (1 << (i % 8)):
                pos += 2 + 4 * struct.unpack_from("<H", data, pos)[0]
            elif cardinality <= 4096:
                pos += 2 * cardinality
            else:
                pos += 8192
    except struct.error as e:
        raise CorruptFileError(f"truncated roaring bitmap ({e})") from None
    if pos > len(data):
        raise CorruptFileError("truncated roaring bitmap")
    return pos - offset


def read(data: bytes | memoryview, offset: int = 0) -> tuple[BitMap, int]:
    """The bitmap serialized at ``offset`` and the offset just past it."""
    size = serialized_size(data, offset)
    try:
        return BitMap.deserialize(bytes(data[offset : offset + size])), offset + size
    except (ValueError, OverflowError) as e:
        raise CorruptFileError(f"corrupt roaring bitmap ({e})") from None
