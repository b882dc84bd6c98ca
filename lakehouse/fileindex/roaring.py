"""Roaring bitmaps in Java RoaringBitmap's portable format, as Paimon's ``RoaringBitmap32`` writes them.

Paimon run-optimizes before serializing; pyroaring (CRoaring) uses the same portable format and
the same container heuristics, so the bytes are identical. Serialized bitmaps sit back to back
inside index files, so :func:`read` works out each one's length from its header.
"""

from __future__ import annotations

import struct

import numpy as np
from pyroaring import BitMap

from lakehouse.errors import CorruptFileError

_COOKIE_NO_RUN = 12346  # SERIAL_COOKIE_NO_RUNCONTAINER
_COOKIE = 12347  # SERIAL_COOKIE
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096  # the largest container kept as a sorted array of 16-bit values
_BULK = 256  # below this many positions inserting them one by one is cheaper


def of(positions: np.ndarray) -> BitMap:
    """The bitmap of sorted, distinct row positions held in a numpy array."""
    if len(positions) < _BULK:
        return BitMap(np.asarray(positions).tolist())
    positions = np.asarray(positions, dtype=np.int64)
    high = positions >> 16
    starts = np.concatenate([[0], np.flatnonzero(high[1:] != high[:-1]) + 1])
    ends = np.append(starts[1:], len(positions))
    chunks = []
    for key, start, end in zip(high[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        low = positions[start:end] & 0xFFFF
        if end - start <= _ARRAY_MAX:
            chunks.append((key, end - start, low.astype("<u2").tobytes()))
        else:
            mask = np.zeros(1 << 16, dtype=bool)
            mask[low] = True
            chunks.append((key, end - start, np.packbits(mask, bitorder="little").tobytes()))
    return _assemble(chunks)


def from_mask(mask: np.ndarray) -> BitMap:
    """The bitmap of the rows where a boolean mask is true."""
    chunks = []
    for key, start in enumerate(range(0, len(mask), 1 << 16)):
        part = mask[start : start + (1 << 16)]
        card = int(np.count_nonzero(part))
        if card == 0:
            continue
        if card <= _ARRAY_MAX:
            chunks.append((key, card, np.flatnonzero(part).astype("<u2").tobytes()))
        else:
            bitset = np.packbits(part, bitorder="little").tobytes()
            chunks.append((key, card, bitset + bytes(8192 - len(bitset))))
    return _assemble(chunks)


def _assemble(chunks: list[tuple[int, int, bytes]]) -> BitMap:
    """A bitmap from ``(high 16 bits, cardinality, container bytes)`` in key order.

    The containers are laid out in the portable format without run containers (an array of
    16-bit values up to 4096 rows, a 65536-bit set above) and deserialized: a few vectorized
    passes instead of inserting every position.
    """
    first = 8 + 8 * len(chunks)  # cookie and count, then 4 descriptive and 4 offset bytes each
    head = bytearray(struct.pack("<II", _COOKIE_NO_RUN, len(chunks)))
    for key, card, _ in chunks:
        head += struct.pack("<HH", key, card - 1)
    for _, _, data in chunks:
        head += struct.pack("<I", first)
        first += len(data)
    return BitMap.deserialize(bytes(head) + b"".join(data for _, _, data in chunks))


def serialize(bitmap: BitMap) -> bytes:
    """``RoaringBitmap32.serialize()``: run-optimize, then the portable format."""
    bitmap.run_optimize()
    return bitmap.serialize()


def serialized_size(data: bytes | memoryview, offset: int = 0) -> int:
    """Length of the portable-format bitmap starting at ``offset``."""
    if not 0 <= offset < len(data):
        raise CorruptFileError(f"a roaring bitmap at offset {offset} lies outside its {len(data)} bytes")
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
        # 16-bit keys: 65536 containers at most, each described by 4 bytes at least
        if size > min(1 << 16, (len(data) - pos) // 4):
            raise CorruptFileError(f"truncated roaring bitmap ({size} containers in {len(data) - pos} bytes)")
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
