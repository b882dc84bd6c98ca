"""Bitmap file index (``file-index.bitmap.columns``): one Roaring bitmap of row positions per value.

Layout (``BitmapFileIndex``): a version byte, then
- V1 (``BitmapFileIndexMeta``): row count, bitmap count, has-null flag, null offset, then every
  ``value, offset`` pair in Java HashMap order;
- V2 (``BitmapFileIndexMetaV2``, the default): the same counts plus the null bitmap length, then a
  sorted dictionary split into blocks of at most ``index-block-size`` bytes (block keys and offsets
  first, then each block's ``value, offset, length`` entries);
followed by the body: the null bitmap (when it has several rows) and every other bitmap. A value
(or null) seen in exactly one row has no bitmap; its offset is ``-1 - row``.

Answers are row sets: NOT EQUAL / NOT IN are the complement over all rows, nulls included, as in
Paimon; the reader's caller applies the exact filter afterwards.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lakehouse.errors import CorruptFileError, InvalidOptionError
from lakehouse.fileindex import roaring
from lakehouse.fileindex.java_hashmap import (
    binary_string_hashes,
    computed_order,
    double_hash_codes,
    float_hash_codes,
    long_hash_codes,
)
from lakehouse.fileindex.result import REMAIN, IndexResult, RowSet
from lakehouse.fileindex.values import timestamp_longs
from lakehouse.manifest.binary_row import physical_array
from lakehouse.options import parse_memory_size
from lakehouse.types import STRING_ROOTS, TIMESTAMP_ROOTS, DataType

BITMAP = "bitmap"
VERSION_1, VERSION_2 = 1, 2
DEFAULT_BLOCK_SIZE = "16kb"

# root -> struct format of a dictionary value (None: length-prefixed UTF-8)
_FORMATS = {
    "BOOLEAN": ">?", "TINYINT": ">b", "SMALLINT": ">h", "INT": ">i", "DATE": ">i", "TIME": ">i",
    "BIGINT": ">q", "TIMESTAMP": ">q", "TIMESTAMP_LTZ": ">q", "FLOAT": ">f", "DOUBLE": ">d",
    "CHAR": None, "VARCHAR": None,
}  # fmt: skip


def supports(dtype: DataType) -> bool:
    return dtype.root in _FORMATS


# ---- values ---------------------------------------------------------------------------------


def index_keys(column: pa.Array, dtype: DataType) -> list[Any]:
    """The index keys of a column's values (``BitmapFileIndex.getValueMapper``)."""
    root = dtype.root
    if root in STRING_ROOTS:
        return column.cast(pa.binary()).to_pylist()
    if root in TIMESTAMP_ROOTS:
        return timestamp_longs(column, dtype).tolist()
    return physical_array(column, dtype).to_pylist()


def _hash_codes(keys: list[Any], dtype: DataType) -> np.ndarray:
    """Java ``hashCode`` of each key as HashMap sees it."""
    root = dtype.root
    if root in STRING_ROOTS:
        return binary_string_hashes(keys)
    if root in ("BIGINT", *TIMESTAMP_ROOTS):
        return long_hash_codes(np.array(keys, dtype=np.int64))
    if root == "FLOAT":
        return float_hash_codes(np.array(keys, dtype=np.float32))
    if root == "DOUBLE":
        return double_hash_codes(np.array(keys, dtype=np.float64))
    if root == "BOOLEAN":
        return np.where(np.array(keys, dtype=bool), 1231, 1237)
    return np.array(keys, dtype=np.int64)  # Integer, Short, Byte: the value itself


def _float_order(v: float) -> tuple:
    """``Float.compare`` order: -0.0 < 0.0 < ... < NaN."""
    return (math.isnan(v), 0.0 if math.isnan(v) else v, math.copysign(1, v))


def _sort_key(root: str):
    """``BitmapFileIndexMetaV2.getComparator`` (and ``compareTo`` of the boxed keys) as a sort key;
    ints, booleans and strings (unsigned bytes) sort as they are."""
    return _float_order if root in ("FLOAT", "DOUBLE") else None


def _write_value(out: bytearray, value: Any, fmt: str | None) -> None:
    if fmt is None:
        out += struct.pack(">i", len(value)) + value
    else:
        out += struct.pack(fmt, value)


def _value_size(value: Any, fmt: str | None) -> int:
    return 4 + len(value) if fmt is None else struct.calcsize(fmt)


# ---- writing --------------------------------------------------------------------------------


def group_rows(column: pa.Array, dtype: DataType) -> tuple[list[Any], np.ndarray, list[np.ndarray]]:
    """(distinct values as index keys in first-seen order, null rows, the rows of each value).

    First-seen order is the order Java's ``computeIfAbsent`` meets the values in. Rows come out
    ascending: a stable sort of the dictionary codes (a radix sort for narrow codes).
    """
    encoded = pc.dictionary_encode(column)
    keys = index_keys(encoded.dictionary, dtype)
    narrow = np.int16 if len(keys) < 2**15 else np.int32
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(narrow)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(-1, len(keys) + 1)).tolist()
    groups = [order[a:b] for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]
    return keys, order[bounds[0] : bounds[1]], groups


def settings(options: Mapping[str, str]) -> tuple[int, int]:
    """(format version, V2 dictionary block size in bytes) of an index's options."""
    text = options.get("version", str(VERSION_2))
    if text.strip() not in (str(VERSION_1), str(VERSION_2)):
        raise InvalidOptionError(f"version={text!r} must be {VERSION_1} or {VERSION_2}")
    block = parse_memory_size(options.get("index-block-size", DEFAULT_BLOCK_SIZE), "index-block-size")
    if block <= 0:
        raise InvalidOptionError("index-block-size must be positive, like '16 kb'")
    return int(text), block


def build(column: pa.Array, dtype: DataType, options: Mapping[str, str] | None = None) -> bytes:
    """Serialize the bitmap index of a whole column (V2 unless ``version`` says 1)."""
    version, block_size = settings(options or {})
    fmt = _FORMATS[dtype.root]
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    rows = len(column)
    keys, null_positions, positions = group_rows(column, dtype)
    null_rows = roaring.of(null_positions)
    bitmaps = dict(zip(keys, positions, strict=True))

    sort_key = _sort_key(dtype.root)

    null_bytes = roaring.serialize(null_rows)
    body = bytearray(null_bytes if len(null_rows) > 1 else b"")
    offsets: dict[Any, int] = {}
    lengths: dict[Any, int] = {}
    # the writer calls computeIfAbsent for every non-null row: rows after the last new value's
    # first row may still grow the HashMap
    valid = np.flatnonzero(np.asarray(column.is_valid()))
    trailing = bool(keys) and int(valid[-1]) > int(positions[-1][0])
    for key in computed_order(keys, _hash_codes(keys, dtype), sort_key, trailing):
        positions = bitmaps[key]
        if len(positions) == 1:
            offsets[key] = -1 - int(positions[0])
        else:
            data = roaring.serialize(roaring.of(positions))
            offsets[key], lengths[key] = len(body), len(data)
            body += data
    null_offset = -1 - null_rows[0] if len(null_rows) == 1 else 0
    out = bytearray([version])
    out += struct.pack(">ii?", rows, len(keys), len(null_rows) > 0)
    if version == VERSION_1:
        if len(null_rows):
            out += struct.pack(">i", null_offset)
        for key, offset in offsets.items():
            _write_value(out, key, fmt)
            out += struct.pack(">i", offset)
    else:
        if len(null_rows):
            out += struct.pack(">ii", null_offset, len(null_bytes))
        out += _v2_dictionary(offsets, lengths, fmt, sort_key, block_size)
    return bytes(out + body)


def _v2_dictionary(offsets: dict, lengths: dict, fmt: str | None, sort_key, limit: int) -> bytes:
    """Sorted entries packed into blocks of at most ``limit`` bytes, blocks indexed by first key."""
    blocks: list[list[Any]] = [[]] if offsets else []
    sizes = [4] if offsets else []
    for key in sorted(offsets, key=sort_key):
        entry = 8 + _value_size(key, fmt)
        if sizes[-1] + entry > limit:
            if not blocks[-1]:
                raise ValueError(f"a bitmap dictionary entry exceeds index-block-size {limit}")
            blocks.append([])
            sizes.append(4)
        blocks[-1].append(key)
        sizes[-1] += entry
    out = bytearray(struct.pack(">i", len(blocks)))
    start = 0
    for block, size in zip(blocks, sizes, strict=True):
        _write_value(out, block[0], fmt)
        out += struct.pack(">i", start)
        start += size
    out += struct.pack(">i", start)
    for block in blocks:
        out += struct.pack(">i", len(block))
        for key in block:
            _write_value(out, key, fmt)
            out += struct.pack(">ii", offsets[key], lengths.get(key, -1))
    return bytes(out)


# ---- reading --------------------------------------------------------------------------------


@dataclass
class _Parsed:
    rows: int
    null: BitMap
    offsets: dict[Any, int]
    body: int  # where bitmap offsets count from


class BitmapReader:
    """Row sets for =, <>, IN, NOT IN, IS NULL and IS NOT NULL from a serialized bitmap index."""

    def __init__(self, data: bytes, dtype: DataType) -> None:
        self.data = memoryview(data)
        self.dtype = dtype
        self.fmt = _FORMATS.get(dtype.root, "")
        if self.fmt == "":
            raise CorruptFileError(f"a bitmap index cannot hold {dtype}")
        try:
            self.parsed = self._parse()
        except (struct.error, UnicodeDecodeError, IndexError) as e:
            raise CorruptFileError(f"bitmap index is corrupt or truncated ({e})") from None

    @property
    def row_count(self) -> int:
        return self.parsed.rows

    def _value(self, pos: int) -> tuple[Any, int]:
        if self.fmt is None:
            (n,) = struct.unpack_from(">i", self.data, pos)
            if n < 0 or pos + 4 + n > len(self.data):
                raise struct.error(f"string of {n} bytes at {pos}")
            return bytes(self.data[pos + 4 : pos + 4 + n]), pos + 4 + n
        return struct.unpack_from(self.fmt, self.data, pos)[0], pos + struct.calcsize(self.fmt)

    def _fits(self, count: int, what: str, least: int, pos: int) -> None:
        """A count read at ``pos`` of things of ``least`` bytes each must fit the bytes left."""
        if not 0 <= count <= (len(self.data) - pos) // least:
            raise CorruptFileError(f"bitmap index claims {count} {what} in {len(self.data) - pos} bytes")

    def _parse(self) -> _Parsed:
        data = self.data
        version = data[0]
        rows, count, has_null = struct.unpack_from(">ii?", data, 1)
        pos = 10
        null_offset = 0
        offsets: dict[Any, int] = {}
        if version == VERSION_1:
            if has_null:
                (null_offset,) = struct.unpack_from(">i", data, pos)
                pos += 4
            self._fits(count, "values", 5, pos)
            for _ in range(count):
                key, pos = self._value(pos)
                offsets[key], pos = struct.unpack_from(">i", data, pos)[0], pos + 4
            body = pos
        elif version == VERSION_2:
            if has_null:
                null_offset, _ = struct.unpack_from(">ii", data, pos)
                pos += 8
            (blocks,) = struct.unpack_from(">i", data, pos)
            pos += 4
            self._fits(blocks, "dictionary blocks", 5, pos)
            for _ in range(blocks):
                _, pos = self._value(pos)
                pos += 4
            (blocks_size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            body = pos + blocks_size
            if not pos <= body <= len(data):
                raise CorruptFileError(f"bitmap index dictionary claims {blocks_size} of {len(data)} bytes")
            for _ in range(blocks):
                (entries,) = struct.unpack_from(">i", data, pos)
                pos += 4
                self._fits(entries, "dictionary entries", 9, pos)
                for _ in range(entries):
                    key, pos = self._value(pos)
                    offsets[key], pos = struct.unpack_from(">i", data, pos)[0], pos + 8
        else:
            raise CorruptFileError(f"bitmap index version {version} is not supported (1 or 2)")
        if rows < 0 or count != len(offsets):
            raise CorruptFileError("bitmap index header is inconsistent")
        null = BitMap()
        if has_null and null_offset < 0:
            null = BitMap([-1 - null_offset])
        elif has_null:
            null = roaring.read(data, body + null_offset)[0]
        return _Parsed(rows, null, offsets, body)

    def bitmap_of(self, key: Any) -> BitMap:
        """Rows holding one index key (see :func:`index_keys`)."""
        offset = self.parsed.offsets.get(key)
        if offset is None:
            return BitMap()
        if offset < 0:
            return BitMap([-1 - offset])
        return roaring.read(self.data, self.parsed.body + offset)[0]

    def _lookup(self, literals: tuple) -> BitMap:
        found = BitMap()
        values = [v for v in literals if v is not None and v.is_valid]
        if len(values) < len(literals):
            found |= self.parsed.null
        if values:
            for key in index_keys(pa.array(values), self.dtype):
                found |= self.bitmap_of(key)
        return found

    def visit(self, op: str, literals: tuple) -> IndexResult:
        if op in ("eq", "in"):
            return RowSet(self._lookup(literals))
        if op in ("ne", "not_in"):
            return RowSet(BitMap(range(self.parsed.rows)) - self._lookup(literals))
        if op == "is_null":
            return RowSet(BitMap(self.parsed.null))
        if op == "is_not_null":
            return RowSet(BitMap(range(self.parsed.rows)) - self.parsed.null)
        return REMAIN


def check(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    """Problems of a serialized bitmap index against its column: the dictionary holds exactly
    the distinct values, each with exactly its rows, and the null rows are exactly the nulls."""
    reader = BitmapReader(data, dtype)
    problems = []
    if reader.row_count != len(column):
        problems.append(f"bitmap covers {reader.row_count} rows, the file has {len(column)}")
    keys, nulls, positions = group_rows(column, dtype)
    if reader.parsed.null != roaring.of(nulls):
        problems.append("bitmap null rows differ from the data")
    if set(keys) != set(reader.parsed.offsets):
        problems.append(
            f"bitmap dictionary has {len(reader.parsed.offsets)} values, the data {len(keys)} distinct ones"
        )
    for key, rows in zip(keys, positions, strict=True):
        if reader.bitmap_of(key) != roaring.of(rows):
            problems.append(f"bitmap rows of value {key!r} differ from the data")
            break
    return problems
