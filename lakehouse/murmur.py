"""Paimon's MurmurHash3 x86_32 (``MurmurHashUtils.hashBytes``, seed 42), vectorized over many slices.

One function covers both Java entry points: ``hashBytesByWords`` (BinaryRow hash codes, lengths
always a multiple of 4) and ``hashBytes`` (BinaryString hash codes, with a byte-wise tail) agree
whenever the length is a multiple of 4. Slices of equal length are hashed together as one
``(rows, length)`` matrix.
"""

from __future__ import annotations

import numpy as np

SEED = 42  # MurmurHashUtils.DEFAULT_SEED
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = k * _C1
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    h = h ^ (k * _C2)
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def murmur_hash(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Hash of every slice ``buf[offsets[i]:offsets[i+1]]`` (uint8 buffer), as int32."""
    sizes = np.diff(offsets)
    out = np.empty(len(sizes), dtype=np.uint32)
    same = len(sizes) == 0 or sizes.min() == sizes.max()  # rows of fixed-width fields: no sort
    distinct = sizes[:1] if same else np.unique(sizes)
    for size in distinct.tolist():
        rows: slice | np.ndarray
        if len(distinct) == 1 and offsets[0] == 0 and len(buf) == offsets[-1]:
            rows = slice(None)  # one size, contiguous: the buffer is already a matrix
            block = buf.reshape(len(sizes), size)
        else:
            rows = np.flatnonzero(sizes == size)
            block = buf[offsets[:-1][rows][:, None] + np.arange(size)]
        aligned = size - size % 4
        words = np.ascontiguousarray(block[:, :aligned]).view("<u4")
        h = np.full(block.shape[0], SEED, dtype=np.uint32)
        with np.errstate(over="ignore"):
            for j in range(aligned // 4):
                h = _mix(h, words[:, j])
            for j in range(aligned, size):  # tail bytes, sign-extended like Java's byte
                h = _mix(h, block[:, j].view(np.int8).astype(np.int32).view(np.uint32))
            h ^= np.uint32(size)
            h ^= h >> np.uint32(16)
            h = h * np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h = h * np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
        out[rows] = h
    return out.view(np.int32)
