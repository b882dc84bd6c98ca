"""Paimon's BinaryRow: the byte layout of partitions, keys and stats, and its hash code.

Layout (``org.apache.paimon.data.BinaryRow``, little-endian): a null bit set aligned to 8-byte
words whose first byte is the RowKind, one 8-byte slot per field, then a variable-length part in
8-byte words. Values of up to 8 bytes live in their slot; strings and binaries of up to 7 bytes
are stored inline (last slot byte = 0x80 | length); longer ones, non-compact decimals
(precision > 18) and non-compact timestamps (precision > 3) go to the variable part with
``offset << 32 | size`` in the slot.

Rows are built column-wise with numpy, so hashing a million bucket keys costs a few vector
operations per field, not a Python loop per row. Decoded values are *physical*: ints for integer,
DATE (days), TIME (millis of day) and TIMESTAMP types (in the Arrow unit of their precision),
``Decimal`` for DECIMAL, ``str``, ``bytes``, ``bool`` and ``float``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from decimal import Decimal
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import CorruptFileError
from lakehouse.io.pool import map_slices
from lakehouse.murmur import hash_words, murmur_hash
from lakehouse.types import (
    BINARY_ROOTS,
    STRING_ROOTS,
    TIMESTAMP_ROOTS,
    AtomicType,
    DataType,
    timestamp_unit,
    type_param,
)

HEADER_BITS = 8  # BinaryRow.HEADER_SIZE_IN_BITS: the RowKind byte
_FIXED_WIDTH = {
    "BOOLEAN": 1,
    "TINYINT": 1,
    "SMALLINT": 2,
    "INT": 4,
    "DATE": 4,
    "TIME": 4,
    "BIGINT": 8,
    "FLOAT": 4,
    "DOUBLE": 8,
}


class Slot(Enum):
    """How a field's value fills its 8-byte slot, for code that builds BinaryRows elsewhere (in
    another engine's expressions). ``INT8`` .. ``INT64``: the low 1, 2, 4 or 8 bytes of the
    physical integer (BOOLEAN 0 or 1, DATE days, TIME millis of day), little-endian, the rest
    zero; ``BYTES``: a string's UTF-8 bytes or a binary, up to 7 inline (last slot byte ``0x80 |
    length``), longer ones in the variable part (slot ``offset << 32 | length``); ``OTHER``: a
    layout not described here (floats' bits, decimals, timestamps). A null field's slot is zero."""

    INT8 = 1
    INT16 = 2
    INT32 = 4
    INT64 = 8
    BYTES = "bytes"
    OTHER = "other"

    @classmethod
    def of(cls, dtype: DataType) -> Slot:
        root = dtype.root
        if root in STRING_ROOTS or root in BINARY_ROOTS:
            return cls.BYTES
        if root in _FIXED_WIDTH and root not in ("FLOAT", "DOUBLE"):
            return cls(_FIXED_WIDTH[root])
        return cls.OTHER


def null_bits_width(arity: int) -> int:
    """Bytes of the null bit set; BinaryRow.calculateBitSetWidthInBytes."""
    return ((arity + 63 + HEADER_BITS) // 64) * 8


def is_compact_decimal(dtype: DataType) -> bool:
    return type_param(dtype, "precision") <= 18  # Decimal.isCompact


def is_compact_timestamp(dtype: DataType) -> bool:
    return type_param(dtype, "precision") <= 3  # Timestamp.isCompact


# ---- Arrow -> physical --------------------------------------------------------------------


def physical_type(dtype: DataType) -> pa.DataType:
    """Arrow type of the physical values of ``dtype``."""
    from lakehouse.types import to_arrow

    if dtype.root in ("DATE", "TIME"):
        return pa.int32()
    if dtype.root in TIMESTAMP_ROOTS:
        return pa.int64()
    return to_arrow(dtype)


def physical_array(arr: pa.Array, dtype: DataType) -> pa.Array:
    """Cast an Arrow column to the physical representation of ``dtype`` (see module doc)."""
    root = dtype.root
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_integer(arr.type) and root in ("DATE", "TIME", *TIMESTAMP_ROOTS):
        return arr  # already physical
    if root == "DATE":
        return arr.cast(pa.int32())
    if root == "TIME":
        if pa.types.is_time64(arr.type):
            return pc.divide(arr.cast(pa.int64()), 1000).cast(pa.int32())
        return arr.cast(pa.time32("ms")).cast(pa.int32())
    if root in TIMESTAMP_ROOTS:
        unit = timestamp_unit(type_param(dtype, "precision"))
        return arr.cast(pa.timestamp(unit, arr.type.tz)).cast(pa.int64())
    return arr


def physical_value(value: pa.Scalar, dtype: DataType) -> Any:
    """One scalar's physical value (what stats and partition rows hold)."""
    return physical_array(pa.array([value]), dtype)[0].as_py()


# ---- encoding -----------------------------------------------------------------------------


class EncodedRows:
    """``n`` BinaryRows packed in one buffer; row ``i`` is ``buffer[offsets[i]:offsets[i+1]]``."""

    def __init__(self, buffer: np.ndarray, offsets: np.ndarray) -> None:
        self.buffer = buffer
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def row(self, i: int) -> bytes:
        return self.buffer[self.offsets[i] : self.offsets[i + 1]].tobytes()

    def hash_codes(self) -> np.ndarray:
        """``BinaryRow.hashCode()`` of every row (int32)."""
        return murmur_hash(self.buffer, self.offsets)


HASHED_AT_ONCE = 1 << 20  # rows encoded at once (on all cores together) to hash them


def row_hashes(columns: list[pa.Array], types: list[DataType], num_rows: int = 1) -> np.ndarray:
    """``BinaryRow.hashCode()`` of every row of equally long columns (int32), slices of the rows
    encoded and hashed side by side on the cores, a bounded number of rows at a time: an encoding
    holds ~8 bytes per field of each row it encodes. Rows of fixed-width fields without nulls
    (the usual bucket key) are hashed from their slots alone: their header is all zeros."""

    def hashed(start: int, stop: int) -> np.ndarray:
        block = [c.slice(start, stop - start) for c in columns]
        fields = _Fields(block, types, stop - start)
        if fields.fixed_width():
            return hash_words(fields.slots.view("<u4"), prefix=null_bits_width(len(types)))
        return fields.encoded().hash_codes()

    hashes = map_slices(hashed, len(columns[0]) if columns else num_rows, HASHED_AT_ONCE)
    return hashes[0] if len(hashes) == 1 else np.concatenate(hashes)


def encode_rows(columns: list[pa.Array], types: list[DataType], num_rows: int = 1) -> EncodedRows:
    """Encode equally long Arrow columns as BinaryRows (RowKind +I), vectorized per field.

    ``num_rows`` only matters for arity 0 (no columns to count rows from).
    """
    return _Fields(columns, types, len(columns[0]) if columns else num_rows).encoded()


class _Fields:
    """The fields of ``n`` rows as BinaryRow encodes them: each row's 8-byte slots (an ``(n,
    arity)`` matrix), each field's null mask and variable-length part."""

    def __init__(self, columns: list[pa.Array], types: list[DataType], n: int) -> None:
        self.n = n
        self.slots = np.zeros((n, len(types)), dtype=np.uint64)
        self.null_masks: list[np.ndarray | None] = []
        self.var_parts: list[_VarPart | None] = []
        for i, (arr, dtype) in enumerate(zip(columns, types, strict=True)):
            arr = physical_array(arr, dtype)
            nulls = _null_mask(arr)
            self.null_masks.append(nulls)
            slot, var = _encode_field(arr, dtype, nulls)
            if nulls is not None:
                slot = slot.copy()
                slot[nulls] = 0  # setNullAt clears the slot
            self.slots[:, i] = slot
            self.var_parts.append(var)

    def fixed_width(self) -> bool:
        """Whether every row is its zero header and its slots: no nulls, no variable part."""
        return all(m is None for m in self.null_masks) and all(v is None for v in self.var_parts)

    def encoded(self) -> EncodedRows:
        """The rows packed in one buffer (once: the variable parts' offsets go into ``slots``)."""
        n, slots, arity = self.n, self.slots, self.slots.shape[1]
        nb = null_bits_width(arity)
        fixed = nb + 8 * arity
        # Cursor of each variable part: fields append their rounded sizes in field order.
        cursor = np.full(n, fixed, dtype=np.int64)
        copies: list[tuple[_VarPart, np.ndarray]] = []  # parts with bytes to copy, and where they start
        for i, var in enumerate(self.var_parts):
            if var is None:
                continue
            if var.data is not None:
                copies.append((var, cursor.copy()))
            if var.reserve_all:
                slots[:, i] |= cursor.astype(np.uint64) << np.uint64(32)
            else:
                big = var.lengths > 7
                at = cursor[big].astype(np.uint64) << np.uint64(32)
                slots[big, i] = at | var.lengths[big].astype(np.uint64)
            cursor += var.reserved
        sizes = cursor
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        buf = np.zeros(int(offsets[-1]), dtype=np.uint8)

        words = buf.view("<u8")
        row_words = offsets[:-1] // 8
        for i in range(arity):
            words[row_words + nb // 8 + i] = slots[:, i]
            nulls = self.null_masks[i]
            if nulls is not None and nulls.any():
                bit = i + HEADER_BITS
                pos = offsets[:-1][nulls] + bit // 8
                buf[pos] |= np.uint8(1 << (bit % 8))
        for var, starts in copies:
            take = var.reserved > 0
            at = offsets[:-1][take] + starts[take]
            _ragged_copy(var.data, var.starts[take], var.lengths[take], buf, at)
        return EncodedRows(buf, offsets)


def encode_values(rows: list[list[Any]], types: list[DataType]) -> EncodedRows:
    """Encode rows of physical values (one vectorized pass, however few rows)."""
    columns = [pa.array([r[i] for r in rows], physical_type(t)) for i, t in enumerate(types)]
    return encode_rows(columns, types, len(rows))


def encode_row(values: list[Any], types: list[DataType]) -> bytes:
    """Encode one row of physical values."""
    return encode_values([values], types).row(0)


class _VarPart:
    """Variable-length content of one field: raw bytes per row, or fixed reserved bytes."""

    def __init__(self, data, starts, lengths, reserved, reserve_all=False):
        self.data = data
        self.starts = starts
        self.lengths = lengths
        self.reserved = reserved
        self.reserve_all = reserve_all


def _null_mask(arr: pa.Array) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_null())


def _encode_field(arr: pa.Array, dtype: DataType, nulls: np.ndarray | None):
    root = dtype.root
    n = len(arr)
    if root in _FIXED_WIDTH:
        return _fixed_slot(arr, root, nulls), None
    if root == "DECIMAL":
        return _encode_decimal(arr, dtype, nulls)
    if root in TIMESTAMP_ROOTS:
        values = _numpy(arr, np.int64, nulls)
        if is_compact_timestamp(dtype):
            return _millis(values, dtype).view(np.uint64), None
        millis = _millis(values, dtype)
        nanos = _nanos_of_milli(values, dtype)
        data = millis.astype("<i8").view(np.uint8)
        starts = np.arange(n, dtype=np.int64) * 8
        lengths = np.full(n, 8, dtype=np.int64)
        var = _VarPart(data, starts, lengths, np.full(n, 8, dtype=np.int64), reserve_all=True)
        return nanos.astype(np.uint64), var
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        return _encode_bytes(arr, nulls)
    raise ValueError(f"type {dtype} cannot be stored in a BinaryRow key or partition")


def _numpy(arr: pa.Array, dtype, nulls: np.ndarray | None) -> np.ndarray:
    if nulls is not None:
        arr = arr.fill_null(0)
    return np.asarray(arr.cast(pa.from_numpy_dtype(dtype)), dtype=dtype)


def _fixed_slot(arr: pa.Array, root: str, nulls: np.ndarray | None) -> np.ndarray:
    if root == "BOOLEAN":
        return _numpy(arr.cast(pa.uint8()), np.uint8, nulls).astype(np.uint64)
    if root == "FLOAT":
        return _numpy(arr, np.float32, nulls).view(np.uint32).astype(np.uint64)
    if root == "DOUBLE":
        return _numpy(arr, np.float64, nulls).view(np.uint64)
    width = _FIXED_WIDTH[root]
    signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[width]
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    return _numpy(arr, signed, nulls).view(unsigned).astype(np.uint64)


def _millis(values: np.ndarray, dtype: DataType) -> np.ndarray:
    unit = timestamp_unit(type_param(dtype, "precision"))
    if unit == "s":
        return values * 1000
    return values // {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]


def _nanos_of_milli(values: np.ndarray, dtype: DataType) -> np.ndarray:
    unit = timestamp_unit(type_param(dtype, "precision"))
    if unit == "us":
        return (values % 1000) * 1000
    if unit == "ns":
        return values % 1_000_000
    return np.zeros(len(values), dtype=np.int64)


def _encode_decimal(arr: pa.Array, dtype: DataType, nulls: np.ndarray | None):
    n = len(arr)
    arr = arr.cast(pa.decimal128(type_param(dtype, "precision"), type_param(dtype, "scale")))
    if nulls is not None:
        arr = arr.fill_null(Decimal(0))
    raw = np.frombuffer(arr.buffers()[1], dtype="<i8", count=2 * (arr.offset + n))[2 * arr.offset :]
    low, high = raw[0::2], raw[1::2]
    if is_compact_decimal(dtype):
        return low.view(np.uint64).copy(), None
    # BigInteger.toByteArray(): minimal big-endian two's complement of the unscaled value.
    be = np.empty((n, 16), dtype=np.uint8)
    be[:, :8] = high.astype(">i8").view(np.uint8).reshape(n, 8)
    be[:, 8:] = low.astype(">i8").view(np.uint8).reshape(n, 8)
    negative = high < 0
    sign_byte = np.where(negative, 0xFF, 0x00).astype(np.uint8)
    redundant = np.zeros(n, dtype=np.int64)
    still = np.ones(n, dtype=bool)
    for j in range(15):
        next_high = (be[:, j + 1] & 0x80) != 0
        ok = still & (be[:, j] == sign_byte) & (next_high == negative)
        redundant += ok
        still = ok
    lengths = 16 - redundant
    if nulls is not None:
        lengths[nulls] = 0
    starts = np.arange(n, dtype=np.int64) * 16 + redundant
    var = _VarPart(be.reshape(-1), starts, lengths, np.full(n, 16, dtype=np.int64), reserve_all=True)
    return lengths.astype(np.uint64), var


def _encode_bytes(arr: pa.Array, nulls: np.ndarray | None):
    n = len(arr)
    binary = arr.cast(pa.large_binary())
    if nulls is not None:
        binary = binary.fill_null(b"")
    offs = np.frombuffer(binary.buffers()[1], dtype=np.int64, count=binary.offset + n + 1)[binary.offset :]
    data_buf = binary.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offs[:-1]
    lengths = offs[1:] - offs[:-1]
    small = lengths <= 7
    slot = np.zeros(n, dtype=np.uint64)
    if small.any():
        s_starts, s_len = starts[small], lengths[small]
        inline = (s_len.astype(np.uint64) | np.uint64(0x80)) << np.uint64(56)
        for j in range(7):
            has = s_len > j
            byte = np.zeros(len(s_len), dtype=np.uint64)
            byte[has] = data[s_starts[has] + j]
            inline |= byte << np.uint64(8 * j)
        slot[small] = inline
    reserved = np.where(small, 0, (lengths + 7) // 8 * 8)
    return slot, _VarPart(data, starts, lengths, reserved)


def _ragged_copy(src: np.ndarray, starts: np.ndarray, lengths: np.ndarray, dst: np.ndarray, dst_starts):
    total = int(lengths.sum())
    if total == 0:
        return
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    dst[np.repeat(dst_starts, lengths) + within] = src[np.repeat(starts, lengths) + within]


# ---- hashing ------------------------------------------------------------------------------


def hash_code(row: bytes) -> int:
    """``BinaryRow.hashCode()`` of one encoded row."""
    buf = np.frombuffer(row, dtype=np.uint8)
    return int(murmur_hash(buf, np.array([0, len(row)], dtype=np.int64))[0])


# ---- serialized form and decoding ----------------------------------------------------------


def serialize(row: bytes, arity: int) -> bytes:
    """SerializationUtils.serializeBinaryRow: big-endian arity, then the row bytes."""
    return struct.pack(">i", arity) + row


def deserialize(data: bytes) -> tuple[int, bytes]:
    """Split serialized bytes into (arity, row bytes)."""
    if len(data) < 4:
        raise CorruptFileError(f"a serialized BinaryRow of {len(data)} bytes is shorter than its arity")
    return struct.unpack_from(">i", data)[0], data[4:]


EMPTY_ROW = bytes(null_bits_width(0))  # BinaryRow.EMPTY_ROW: arity 0


def decode_row(row: bytes, types: list[DataType], positions: Iterable[int] | None = None) -> list[Any]:
    """Decode a BinaryRow (the fields at ``positions``, default all) into physical values (None for nulls).

    A row too short for its fields, or whose variable-length part points outside it, is a
    :class:`CorruptFileError` (the file holding it is damaged)."""
    nb = null_bits_width(len(types))
    if len(row) < nb + 8 * len(types):
        raise CorruptFileError(f"a BinaryRow of {len(row)} bytes is too short for {len(types)} fields")
    out: list[Any] = []
    try:
        for i in range(len(types)) if positions is None else positions:
            bit = i + HEADER_BITS
            if row[bit // 8] & (1 << (bit % 8)):
                out.append(None)
                continue
            out.append(_decode_field(row, nb + 8 * i, types[i]))
    except struct.error as e:
        raise CorruptFileError(f"a BinaryRow of {len(row)} bytes is corrupt ({e})") from None
    return out


def _variable(row: bytes, slot: int) -> bytes:
    """The variable-length part a slot points to (``offset << 32 | size``)."""
    start, size = slot >> 32, slot & 0xFFFFFFFF
    if start + size > len(row):
        raise CorruptFileError(f"a BinaryRow of {len(row)} bytes points to bytes {start}..{start + size}")
    return row[start : start + size]


def _decode_field(row: bytes, off: int, dtype: DataType) -> Any:
    root = dtype.root
    if root == "BOOLEAN":
        return row[off] != 0
    if root == "TINYINT":
        return struct.unpack_from("<b", row, off)[0]
    if root == "SMALLINT":
        return struct.unpack_from("<h", row, off)[0]
    if root in ("INT", "DATE", "TIME"):
        return struct.unpack_from("<i", row, off)[0]
    if root == "BIGINT":
        return struct.unpack_from("<q", row, off)[0]
    if root == "FLOAT":
        return struct.unpack_from("<f", row, off)[0]
    if root == "DOUBLE":
        return struct.unpack_from("<d", row, off)[0]
    slot = struct.unpack_from("<Q", row, off)[0]
    if root == "DECIMAL":
        if is_compact_decimal(dtype):
            unscaled = struct.unpack_from("<q", row, off)[0]
        else:
            unscaled = int.from_bytes(_variable(row, slot), "big", signed=True)
        return Decimal(unscaled).scaleb(-type_param(dtype, "scale"))
    if root in TIMESTAMP_ROOTS:
        if is_compact_timestamp(dtype):
            millis, nanos = struct.unpack_from("<q", row, off)[0], 0
        else:
            start = slot >> 32
            millis, nanos = struct.unpack_from("<q", row, start)[0], slot & 0xFFFFFFFF
        unit = timestamp_unit(type_param(dtype, "precision"))
        if unit == "s":
            return millis // 1000
        return (
            millis * {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]
            + nanos // {"ms": 1_000_000, "us": 1000, "ns": 1}[unit]
        )
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        if slot >> 63:
            size = (slot >> 56) & 0x7F
            if size > 7:
                raise CorruptFileError(f"a BinaryRow holds an inline value of {size} bytes (7 at most)")
            raw = row[off : off + size]
        else:
            raw = _variable(row, slot)
        return raw.decode("utf-8", errors="replace") if root in STRING_ROOTS else bytes(raw)
    return None  # nested types carry no stats


def supports(dtype: DataType) -> bool:
    """Whether values of ``dtype`` can be stored in a BinaryRow by this module."""
    return isinstance(dtype, AtomicType)
