"""A data file's deletion vector: the positions of its deleted rows, in Paimon's serialized form.

Two widths exist. The default 32-bit vector holds a ``RoaringBitmap`` and is framed as::

    int32 BE size | int32 BE magic 1581511376 | portable roaring bitmap | int32 BE CRC32

with ``size`` covering magic and bitmap, and the CRC computed over the same bytes. The 64-bit vector
(``deletion-vectors.bitmap64=true``, the one Iceberg can read) uses the same frame with the magic
1681511377 written little-endian, and its bitmap is Java's ``OptimizedRoaringBitmap64`` layout:
a little-endian uint64 count, then for every high 32-bit key from 0 up to the largest one, a uint32
key and the portable 32-bit bitmap of the low halves - keys without positions included, as empty
bitmaps. Both widths run-optimize before serializing, as Java does, so the bytes match Java's.
"""

from __future__ import annotations

import array
import struct
import zlib

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap, BitMap64

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import roaring

MAGIC_32 = 1581511376
MAGIC_64 = 1681511377
MAX_POSITION_32 = 2**31 - 1  # RoaringBitmap32.MAX_VALUE
MAX_POSITION_64 = ((2**31 - 2) << 32) | 2**31  # OptimizedRoaringBitmap64.MAX_VALUE
_MAX_KEY_64 = 2**31 - 2
_EMPTY_BITMAP = BitMap().serialize()
_ADVICE = "restore the index file from a backup or roll the table back to an earlier snapshot"


class DeletionVector:
    """The deleted row positions of one data file (32-bit or 64-bit roaring bitmap)."""

    __slots__ = ("_bitmap",)

    def __init__(self, bitmap: BitMap | BitMap64) -> None:
        self._bitmap = bitmap

    @classmethod
    def from_positions(cls, positions: npt.ArrayLike, bitmap64: bool = False) -> DeletionVector:
        """A vector of row positions (any order, repeats allowed), built in bulk without a Python loop."""
        arr = np.asarray(positions)
        if arr.size and arr.dtype.kind not in "iu":
            raise ValueError(f"row positions must be integers, not {arr.dtype}")
        arr = arr.ravel()
        limit = MAX_POSITION_64 if bitmap64 else MAX_POSITION_32
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) > limit):
            raise ValueError(
                f"row positions must lie in [0, {limit}] for a {64 if bitmap64 else 32}-bit deletion "
                f"vector, got [{int(arr.min())}, {int(arr.max())}]"
            )
        arr = arr.astype(np.uint64 if bitmap64 else np.uint32)
        if arr.size > 1 and (arr[1:] < arr[:-1]).any():
            arr = np.sort(arr)  # CRoaring adds sorted values several times faster
        if bitmap64:
            return cls(BitMap64(array.array("Q", arr.tobytes())))
        return cls(BitMap(array.array("I", arr.tobytes())))

    @property
    def bitmap64(self) -> bool:
        return isinstance(self._bitmap, BitMap64)

    @property
    def cardinality(self) -> int:
        """Number of deleted rows."""
        return len(self._bitmap)

    def positions(self) -> np.ndarray:
        """The deleted row positions, ascending, as int64."""
        dtype = np.uint64 if self.bitmap64 else np.uint32
        return np.frombuffer(self._bitmap.to_array(), dtype=dtype).astype(np.int64)

    def deleted_mask(self, num_rows: int) -> np.ndarray:
        """A boolean mask over rows ``[0, num_rows)``, true where the row is deleted."""
        mask = np.zeros(num_rows, dtype=bool)
        positions = self.positions()
        mask[positions[positions < num_rows]] = True
        return mask

    def kept_rows(self, num_rows: int) -> np.ndarray:
        """Ascending int64 indices of the rows in ``[0, num_rows)`` that are not deleted."""
        return np.flatnonzero(~self.deleted_mask(num_rows)).astype(np.int64)

    def merge(self, other: DeletionVector) -> DeletionVector:
        """A new vector deleting the rows either vector deletes; both must have the same width."""
        mine, theirs = self._bitmap, other._bitmap
        if isinstance(mine, BitMap64) and isinstance(theirs, BitMap64):
            return DeletionVector(mine | theirs)
        if isinstance(mine, BitMap) and isinstance(theirs, BitMap):
            return DeletionVector(mine | theirs)
        raise ValueError("cannot merge a 32-bit deletion vector with a 64-bit one")

    def serialize(self) -> bytes:
        """Java's ``DeletionVector.serializeTo`` bytes: length, magic, bitmap, CRC."""
        if isinstance(self._bitmap, BitMap64):
            payload = struct.pack("<I", MAGIC_64) + _bitmap64_bytes(self._bitmap)
        else:
            payload = struct.pack(">I", MAGIC_32) + roaring.serialize(self._bitmap)
        return struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))

    @classmethod
    def deserialize(cls, data: bytes, file: str, offset: int = 0) -> DeletionVector:
        """The vector serialized in ``data`` (exactly one vector's bytes), read from ``file`` at ``offset``.

        Checks the length prefix, the magic, the CRC and the bitmap layout, so a damaged index file
        raises :class:`CorruptFileError` instead of silently dropping or resurrecting rows.
        """
        where = f"deletion vector at offset {offset} of {file}"
        if len(data) < 12:
            raise CorruptFileError(f"{where} is truncated ({len(data)} bytes); {_ADVICE}")
        size = struct.unpack_from(">I", data)[0]
        if len(data) != size + 8:
            raise CorruptFileError(
                f"{where} is truncated or has a bad length: its header says {size + 8} bytes, "
                f"{len(data)} are there; {_ADVICE}"
            )
        payload = data[4 : 4 + size]
        stored, computed = struct.unpack_from(">I", data, 4 + size)[0], zlib.crc32(payload)
        big, little = struct.unpack_from(">I", payload)[0], struct.unpack_from("<I", payload)[0]
        if big != MAGIC_32 and little != MAGIC_64:
            raise CorruptFileError(
                f"{where} has magic {big} (expected {MAGIC_32} or little-endian {MAGIC_64}): "
                f"not a deletion vector; {_ADVICE}"
            )
        if stored != computed:
            raise CorruptFileError(
                f"{where} fails its checksum (stored CRC32 {stored:#010x}, computed {computed:#010x}); "
                f"{_ADVICE}"
            )
        try:
            if big == MAGIC_32:
                return cls(_bitmap32(payload[4:]))
            return cls(_bitmap64(payload[4:]))
        except (CorruptFileError, ValueError, OverflowError, struct.error) as e:
            raise CorruptFileError(f"{where} holds a malformed bitmap ({e}); {_ADVICE}") from None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DeletionVector)
            and self.bitmap64 == other.bitmap64
            and self._bitmap == other._bitmap
        )

    def __repr__(self) -> str:
        return f"DeletionVector({64 if self.bitmap64 else 32}-bit, {self.cardinality} deleted)"


def _bitmap32(data: bytes) -> BitMap:
    """A 32-bit portable bitmap that fills ``data`` exactly."""
    if roaring.serialized_size(data) != len(data):
        raise CorruptFileError("bytes follow the bitmap")
    return BitMap.deserialize(data)


def _bitmap64_bytes(bitmap: BitMap64) -> bytes:
    """``OptimizedRoaringBitmap64.serialize``: dense keys 0..max, empty bitmaps for absent keys.

    CRoaring writes the same per-key bitmaps but only for keys that hold positions, so its output is
    re-laid with the gaps filled.
    """
    bitmap.run_optimize()
    sparse = bitmap.serialize()
    buckets = {key: sparse[start:end] for key, start, end in _buckets(sparse)}
    top = max(buckets, default=-1)
    parts = [struct.pack("<Q", top + 1)]
    for key in range(top + 1):
        parts += [struct.pack("<I", key), buckets.get(key, _EMPTY_BITMAP)]
    return b"".join(parts)


def _bitmap64(data: bytes) -> BitMap64:
    """A 64-bit bitmap in the layout above that fills ``data`` exactly, keys ascending."""
    buckets = _buckets(data)
    keys = [key for key, _, _ in buckets]
    if keys != sorted(set(keys)) or (keys and keys[-1] > _MAX_KEY_64):
        raise CorruptFileError("bitmap keys are out of order or too large")
    if (buckets[-1][2] if buckets else 8) != len(data):
        raise CorruptFileError("bytes follow the bitmap")
    return BitMap64.deserialize(data)


def _buckets(data: bytes) -> list[tuple[int, int, int]]:
    """``(high key, start, end)`` of every 32-bit bitmap of a 64-bit portable bitmap."""
    count = struct.unpack_from("<Q", data)[0]
    if count > (len(data) - 8) // 12:  # each bucket takes at least a key and an 8-byte header
        raise CorruptFileError(f"bitmap count {count} does not fit in {len(data)} bytes")
    found, pos = [], 8
    for _ in range(count):
        key = struct.unpack_from("<I", data, pos)[0]
        start = pos + 4
        pos = start + roaring.serialized_size(data, start)
        found.append((key, start, pos))
    return found
