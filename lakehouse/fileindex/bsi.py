"""Bit-slice index (``file-index.bsi.columns``) for integers, dates, times, timestamps and decimals.

Values become longs (``BitSliceIndexBitmapFileIndex.getValueMapper``: timestamps in millis up to
precision 3 and micros above, decimals as unscaled longs). Non-negative values go to a positive
BSI, negative ones (as absolute values) to a negative BSI; each BSI stores min, max, an
existence bitmap and one bitmap per bit ("slice"). Comparisons run O'Neil's algorithm over the
slices and answer with row sets (``BitSliceIndexRoaringBitmap``). Layout: version byte, row
count, then per sign a presence flag and ``version, min, max, ebm, slice count, slices``.
"""

from __future__ import annotations

import functools
import struct

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import roaring
from lakehouse.fileindex.result import REMAIN, IndexResult, RowSet
from lakehouse.fileindex.values import timestamp_longs
from lakehouse.manifest.binary_row import physical_array
from lakehouse.types import TIMESTAMP_ROOTS, DataType, type_param

BSI = "bsi"
VERSION_1 = 1
_LONG_MIN = -(2**63)
_ROOTS = ("TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIME", "DECIMAL", *TIMESTAMP_ROOTS)


def supports(dtype: DataType) -> bool:
    return dtype.root in _ROOTS and not (dtype.root == "DECIMAL" and type_param(dtype, "precision") > 18)


def to_longs(values: pa.Array, dtype: DataType) -> np.ndarray:
    """The long each (non-null) value is indexed as."""
    root = dtype.root
    if root == "DECIMAL":
        arr = values.cast(pa.decimal128(type_param(dtype, "precision"), type_param(dtype, "scale")))
        raw = np.frombuffer(arr.buffers()[1], dtype="<i8", count=2 * (arr.offset + len(arr)))
        return raw[2 * arr.offset :][0::2].copy()  # low half = the unscaled long (precision <= 18)
    if root in TIMESTAMP_ROOTS:
        return timestamp_longs(values, dtype)
    return physical_array(values, dtype).to_numpy(zero_copy_only=False).astype(np.int64)


@functools.lru_cache(maxsize=256)
def _literal_long(literal: pa.Scalar, dtype: DataType) -> int:
    """A filter literal as the long it is indexed as, computed once for all the files of a plan."""
    return int(to_longs(pa.array([literal]), dtype)[0])


# ---- writing --------------------------------------------------------------------------------


def _appender_bytes(members: np.ndarray, magnitudes: np.ndarray) -> bytes:
    """One sign's BSI over row masks; ``magnitudes`` is 0 outside ``members``.

    min is always 0 (``StatsCollectList`` starts its min at 0), max the largest magnitude.
    """
    top = int(magnitudes.max())
    out = bytearray([VERSION_1]) + struct.pack(">qq", 0, top)
    out += roaring.serialize(roaring.from_mask(members))
    slices = top.bit_length()
    out += struct.pack(">i", slices)
    # every row's bits at once: row i of ``bits`` masks the rows having bit i set
    as_bytes = magnitudes.astype("<u8").view(np.uint8).reshape(-1, 8)
    bits = np.ascontiguousarray(np.unpackbits(as_bytes, axis=1, count=slices, bitorder="little").T)
    for has_bit in bits.view(bool):
        out += roaring.serialize(roaring.from_mask(has_bit))
    return bytes(out)


def build(column: pa.Array, dtype: DataType) -> bytes | None:
    """Serialize the BSI of a whole column; None when a value cannot be indexed (Long.MIN_VALUE)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    values = np.zeros(len(column), dtype=np.int64)
    values[valid] = to_longs(column.drop_null(), dtype)
    if (values == _LONG_MIN).any():
        return None  # Java cannot slice |Long.MIN_VALUE| either; no index beats a wrong one
    out = bytearray([VERSION_1]) + struct.pack(">i", len(column))
    positive = valid & (values >= 0)
    for members in (positive, valid & ~positive):
        out += struct.pack(">?", bool(members.any()))
        if members.any():
            out += _appender_bytes(members, np.where(members, np.abs(values), 0))
    return bytes(out)


# ---- reading --------------------------------------------------------------------------------


class _Slices:
    """One sign's BSI: O'Neil comparisons against non-negative predicates."""

    def __init__(self, min_value: int, max_value: int, ebm: BitMap, slices: list[BitMap]) -> None:
        self.min, self.max, self.ebm, self.slices = min_value, max_value, ebm, slices

    @classmethod
    def empty(cls) -> _Slices:
        return cls(0, 0, BitMap(), [])

    def compare(self, op: str, predicate: int) -> BitMap:
        shortcut = self._by_min_max(op, predicate)
        return shortcut if shortcut is not None else self._oneil(op, predicate - self.min)

    def _by_min_max(self, op: str, p: int) -> BitMap | None:
        lo, hi = self.min, self.max
        all_match, none_match = {
            "eq": (lo == hi == p, p < lo or p > hi),
            "ge": (p <= lo, p > hi),
            "gt": (p < lo, p >= hi),
            "le": (p >= hi, p < lo),
            "lt": (p > hi, p <= lo),
        }[op]
        return BitMap(self.ebm) if all_match else BitMap() if none_match else None

    def _oneil(self, op: str, p: int) -> BitMap:
        """Slices from the top bit down; ``eq`` keeps the rows equal to ``p`` so far.

        Only the side the operator asks for (rows above or below ``p``) is accumulated. Slices
        only hold rows of ``ebm``, so every set stays within it. ``eq`` is rebound, never updated
        in place: it starts as ``ebm`` itself.
        """
        want_above, want_below = op in ("gt", "ge"), op in ("lt", "le")
        side, eq = BitMap(), self.ebm
        for i in range(len(self.slices) - 1, -1, -1):
            if not eq:
                break  # no row shares p's top bits: every row is already decided
            if (p >> i) & 1:
                if want_below:
                    side |= eq - self.slices[i]
                eq = eq & self.slices[i]
            else:
                if want_above:
                    side |= eq & self.slices[i]
                eq = eq - self.slices[i]
        if op == "eq":
            return eq & self.ebm  # a fresh bitmap even if no slice was read
        return side | eq if op in ("ge", "le") else side


class BsiReader:
    """Row sets for comparisons, IN/NOT IN (nulls excluded) and null tests from a serialized BSI."""

    def __init__(self, data: bytes, dtype: DataType) -> None:
        self.dtype = dtype
        view = memoryview(data)
        try:
            if view[0] > VERSION_1:
                raise CorruptFileError(f"bsi index version {view[0]} is not supported")
            (self.rows,) = struct.unpack_from(">i", view, 1)
            if self.rows < 0:
                raise CorruptFileError(f"bsi index claims {self.rows} rows")
            pos = 5
            signs = []
            for _ in range(2):
                present = view[pos]
                pos += 1
                if not present:
                    signs.append(_Slices.empty())
                    continue
                if view[pos] > VERSION_1:
                    raise CorruptFileError(f"bsi bitmap version {view[pos]} is not supported")
                lo, hi = struct.unpack_from(">qq", view, pos + 1)
                ebm, pos = roaring.read(view, pos + 17)
                (count,) = struct.unpack_from(">i", view, pos)
                if not 0 <= count <= 64:
                    raise CorruptFileError(f"bsi index claims {count} slices")
                pos += 4
                slices = []
                for _ in range(count):
                    bm, pos = roaring.read(view, pos)
                    slices.append(bm)
                signs.append(_Slices(lo, hi, ebm, slices))
        except (struct.error, IndexError) as e:
            raise CorruptFileError(f"bsi index is corrupt or truncated ({e})") from None
        self.positive, self.negative = signs

    @property
    def not_null(self) -> BitMap:
        """Rows with a value (a fresh bitmap)."""
        return self.positive.ebm | self.negative.ebm

    def decode(self, rows: int) -> np.ndarray:
        """The long of every row as the slices encode it (0 for rows without a value)."""
        values = np.zeros(rows, dtype=np.int64)
        for part, sign in ((self.positive, 1), (self.negative, -1)):
            acc = np.zeros(rows, dtype=np.int64)
            for bit, rows_with_bit in enumerate(part.slices):
                acc[np.asarray(rows_with_bit.to_array(), dtype=np.int64)] += np.int64(1) << np.int64(bit)
            members = np.asarray(part.ebm.to_array(), dtype=np.int64)
            values[members] = sign * (acc[members] + part.min)
        return values

    def _eq(self, v: int) -> BitMap:
        if v == _LONG_MIN:
            return BitMap()
        return self.negative.compare("eq", -v) if v < 0 else self.positive.compare("eq", v)

    def compare_longs(self, op: str, v: int) -> BitMap:
        """Rows whose long compares to ``v`` by ``op`` (lt, le, gt, ge)."""
        pos, neg = self.positive, self.negative
        if op in ("lt", "le"):
            if v == _LONG_MIN:
                return BitMap()
            if v < 0:
                return neg.compare("gt" if op == "lt" else "ge", -v)
            return pos.compare(op, v) | neg.ebm
        if v == _LONG_MIN:
            return self.not_null
        if v < 0:
            return pos.ebm | neg.compare("lt" if op == "gt" else "le", -v)
        return pos.compare(op, v)

    def visit(self, op: str, literals: tuple) -> IndexResult:
        if op == "is_null":
            return RowSet(BitMap(range(self.rows)) - self.not_null)
        if op == "is_not_null":
            return RowSet(self.not_null)
        if any(v is None or not v.is_valid for v in literals):
            return REMAIN  # comparisons with NULL: leave them to the exact filter
        values = [_literal_long(v, self.dtype) for v in literals]
        if op in ("lt", "le", "gt", "ge"):
            return RowSet(self.compare_longs(op, values[0]))
        if op not in ("eq", "in", "ne", "not_in"):
            return REMAIN
        found = BitMap()
        for v in values:
            found |= self._eq(v)
        return RowSet(found if op in ("eq", "in") else self.not_null - found)


RANGE_SAMPLES = 8  # range queries a check compares with the data


def check(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    """Problems of a serialized bit-slice index against its column: every row decodes to its
    value, the existence bitmaps cover exactly the non-null rows, and sampled range queries agree."""
    reader = BsiReader(data, dtype)
    problems = []
    if reader.rows != len(column):
        problems.append(f"bsi covers {reader.rows} rows, the file has {len(column)}")
    valid = np.flatnonzero(np.asarray(column.is_valid()))
    longs = to_longs(column.drop_null(), dtype)
    if reader.not_null != roaring.of(valid) or (reader.positive.ebm & reader.negative.ebm):
        return [*problems, "bsi existence bitmaps differ from the non-null rows"]
    decoded = reader.decode(len(column))[valid]
    if not np.array_equal(decoded, longs):
        first = int(np.flatnonzero(decoded != longs)[0])
        return [
            *problems,
            f"bsi value of row {int(valid[first])} is {decoded[first]}, the data says {longs[first]}",
        ]
    if len(longs):
        for pivot in np.quantile(longs, np.linspace(0, 1, RANGE_SAMPLES)).astype(np.int64).tolist():
            expected = roaring.of(valid[longs < pivot])
            if reader.compare_longs("lt", pivot) != expected:
                problems.append(f"bsi range query < {pivot} differs from the data")
                break
    return problems
