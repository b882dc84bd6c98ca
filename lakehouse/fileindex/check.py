"""Proving a data file's indexes tell the truth about its data.

Each index is decoded and compared with a brute-force evaluation of the column it covers:
- bloom filter: every value present tests REMAIN, and the bit set equals one rebuilt from the
  data with the stored size and hash count (so any flipped bit shows);
- bitmap: the dictionary holds exactly the distinct values, each with exactly its rows, and the
  null rows are exactly the nulls;
- bit-slice index: the value of every row decoded from the slices equals the data, the
  existence bitmaps cover exactly the non-null rows, and sampled range queries agree.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex import bitmap, bloom, bsi, roaring
from lakehouse.fileindex.hashing import fast_hash
from lakehouse.types import DataType

_RANGE_SAMPLES = 8


def check_index(index_type: str, data: bytes | None, column: pa.Array, dtype: DataType) -> list[str]:
    """Problems of one serialized index against the column it was built over ([] when it is right)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if data is None:  # an empty index claims the column has no values at all
        return [] if column.null_count == len(column) else ["empty index, but the column has values"]
    try:
        if index_type == bloom.BLOOM_FILTER:
            return _check_bloom(data, column, dtype)
        if index_type == bitmap.BITMAP:
            return _check_bitmap(data, column, dtype)
        if index_type == bsi.BSI:
            return _check_bsi(data, column, dtype)
    except CorruptFileError as e:
        return [f"unreadable: {e}"]
    return [f"index type {index_type!r} is newer than this engine, which cannot check it"]


def _check_bloom(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    stored = bloom.BloomFilter.deserialize(data)
    hashes = fast_hash(column.drop_null(), dtype)
    missing = ~stored.might_contain(hashes) if len(hashes) else np.zeros(0, bool)
    if missing.any():
        value = column.drop_null()[int(np.flatnonzero(missing)[0])].as_py()
        return [f"bloom filter rejects {int(missing.sum())} values present in the data, e.g. {value!r}"]
    rebuilt = bloom.BloomFilter.sized(hashes, stored.num_hash_functions, stored.num_bits)
    if rebuilt.bits != stored.bits:
        return ["bloom filter bits differ from a rebuild over the data (corrupted bits)"]
    return []


def _check_bitmap(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    reader = bitmap.BitmapReader(data, dtype)
    problems = []
    if reader.row_count != len(column):
        problems.append(f"bitmap covers {reader.row_count} rows, the file has {len(column)}")
    keys, nulls, positions = bitmap.group_rows(column, dtype)
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


def _check_bsi(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    reader = bsi.BsiReader(data, dtype)
    problems = []
    if reader.rows != len(column):
        problems.append(f"bsi covers {reader.rows} rows, the file has {len(column)}")
    valid = np.flatnonzero(np.asarray(column.is_valid()))
    longs = bsi.to_longs(column.drop_null(), dtype)
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
        for pivot in np.quantile(longs, np.linspace(0, 1, _RANGE_SAMPLES)).astype(np.int64).tolist():
            expected = roaring.of(valid[longs < pivot])
            if reader.compare_longs("lt", pivot) != expected:
                problems.append(f"bsi range query < {pivot} differs from the data")
                break
    return problems
