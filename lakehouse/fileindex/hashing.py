"""Vectorized 64-bit hashes of Paimon's ``FastHash``: xxHash64 for bytes, Thomas Wang's for numbers.

Both run over whole Arrow columns with numpy ``uint64`` arithmetic (which wraps like Java's
``long``). xxHash64 processes rows grouped by byte length, each group as one ``(rows, length)``
matrix, so no Python code runs per row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse.fileindex.values import timestamp_longs
from lakehouse.manifest.binary_row import physical_array
from lakehouse.types import BINARY_ROOTS, STRING_ROOTS, TIMESTAMP_ROOTS, DataType

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_BLOCK_BYTES = 1 << 22  # values hashed per gathered (rows, length) matrix, in bytes


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _merge(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (h ^ _round(np.zeros_like(v), v)) * _P1 + _P4


def _xxh64_fixed(block: np.ndarray) -> np.ndarray:
    """XXH64 (seed 0) of every row of a ``(rows, length)`` uint8 matrix."""
    n, length = block.shape
    with np.errstate(over="ignore"):
        pos = 0
        if length >= 32:
            stripes = length // 32
            lanes = np.ascontiguousarray(block[:, : stripes * 32]).view("<u8").reshape(n, stripes, 4)
            v1 = np.full(n, _P1 + _P2, dtype=np.uint64)
            v2 = np.full(n, _P2, dtype=np.uint64)
            v3 = np.zeros(n, dtype=np.uint64)
            v4 = np.full(n, np.uint64(0) - _P1, dtype=np.uint64)
            for s in range(stripes):
                v1, v2 = _round(v1, lanes[:, s, 0]), _round(v2, lanes[:, s, 1])
                v3, v4 = _round(v3, lanes[:, s, 2]), _round(v4, lanes[:, s, 3])
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = _merge(h, v)
            pos = stripes * 32
        else:
            h = np.full(n, _P5, dtype=np.uint64)
        h = h + np.uint64(length)
        while pos + 8 <= length:
            lane = np.ascontiguousarray(block[:, pos : pos + 8]).view("<u8").reshape(n)
            h = _rotl(h ^ _round(np.zeros(n, dtype=np.uint64), lane), 27) * _P1 + _P4
            pos += 8
        if pos + 4 <= length:
            word = np.ascontiguousarray(block[:, pos : pos + 4]).view("<u4").reshape(n).astype(np.uint64)
            h = _rotl(h ^ (word * _P1), 23) * _P2 + _P3
            pos += 4
        while pos < length:
            h = _rotl(h ^ (block[:, pos].astype(np.uint64) * _P5), 11) * _P1
            pos += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h


def xxh64(values: pa.Array) -> np.ndarray:
    """XXH64 (seed 0) of each (non-null) string or binary value, as int64."""
    binary = values.cast(pa.large_binary())
    n = len(binary)
    offsets = np.frombuffer(binary.buffers()[1], dtype=np.int64, count=binary.offset + n + 1)[binary.offset :]
    data_buf = binary.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = np.empty(n, dtype=np.uint64)
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        step = max(1, _BLOCK_BYTES // max(1, length))  # bounds the gathered matrix for long values
        for chunk in range(0, len(rows), step):
            picked = rows[chunk : chunk + step]
            out[picked] = _xxh64_fixed(data[starts[picked][:, None] + np.arange(length)])
    return out.view(np.int64)


def long_hash(keys: np.ndarray) -> np.ndarray:
    """Thomas Wang's 64-bit integer hash (``FastHash.getLongHash``) of int64 keys."""
    k = keys.astype(np.int64)
    with np.errstate(over="ignore"):
        k = (~k) + (k << np.int64(21))
        k = k ^ (k >> np.int64(24))
        k = (k + (k << np.int64(3))) + (k << np.int64(8))
        k = k ^ (k >> np.int64(14))
        k = (k + (k << np.int64(2))) + (k << np.int64(4))
        k = k ^ (k >> np.int64(28))
        k = k + (k << np.int64(31))
    return k


def fast_hash(values: pa.Array, dtype: DataType) -> np.ndarray:
    """``FastHash.getHashFunction(type).hash`` of every value (nulls must be dropped first)."""
    root = dtype.root
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        return xxh64(values)
    if root == "FLOAT":
        bits = values.cast(pa.float32()).to_numpy(zero_copy_only=False).view(np.int32)
        return long_hash(_canonical_nan(bits, values, np.int32(0x7FC00000)))
    if root == "DOUBLE":
        bits = values.cast(pa.float64()).to_numpy(zero_copy_only=False).view(np.int64)
        return long_hash(_canonical_nan(bits, values, np.int64(0x7FF8000000000000)))
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIME"):
        return long_hash(physical_array(values, dtype).to_numpy(zero_copy_only=False))
    if root in TIMESTAMP_ROOTS:
        return long_hash(timestamp_longs(values, dtype))
    raise ValueError(f"{dtype} cannot be hashed for a bloom filter")


def _canonical_nan(bits: np.ndarray, values: pa.Array, nan: np.integer) -> np.ndarray:
    """Float.floatToIntBits / Double.doubleToLongBits map every NaN to one bit pattern."""
    is_nan = np.isnan(values.to_numpy(zero_copy_only=False))
    return np.where(is_nan, nan, bits) if is_nan.any() else bits
