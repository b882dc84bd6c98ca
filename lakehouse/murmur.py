"""Paimon's MurmurHash3 x86_32 (``MurmurHashUtils.hashBytes``, seed 42), vectorized over many slices.

One function covers both Java entry points: ``hashBytesByWords`` (BinaryRow hash codes, lengths
always a multiple of 4) and ``hashBytes`` (BinaryString hash codes, with a byte-wise tail) agree
whenever the length is a multiple of 4. Slices of equal length are hashed together as one
``(rows, length)`` matrix, a column of 4-byte words at a time, in place: each step of the mix is
one pass over the rows with no temporary array.
"""

from __future__ import annotations

import functools

import numpy as np

SEED = 42  # MurmurHashUtils.DEFAULT_SEED
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _mix(h: np.ndarray, k: np.ndarray, scratch: tuple[np.ndarray, np.ndarray]) -> None:
    """Mix the word ``k`` of each row into its state ``h`` (uint32, in place)."""
    a, b = scratch
    np.multiply(k, _C1, out=a)
    np.left_shift(a, np.uint32(15), out=b)
    np.right_shift(a, np.uint32(17), out=a)
    np.bitwise_or(a, b, out=a)
    np.multiply(a, _C2, out=a)
    np.bitwise_xor(h, a, out=h)
    np.left_shift(h, np.uint32(13), out=a)
    np.right_shift(h, np.uint32(19), out=h)
    np.bitwise_or(h, a, out=h)
    np.multiply(h, np.uint32(5), out=h)
    np.add(h, np.uint32(0xE6546B64), out=h)


def _finish(h: np.ndarray, size: int, scratch: np.ndarray) -> np.ndarray:
    """The hash (int32) of states ``h`` (in place) of ``size`` bytes each: Murmur's final avalanche."""
    h ^= np.uint32(size)
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        np.right_shift(h, np.uint32(shift), out=scratch)
        h ^= scratch
        h *= np.uint32(factor)
    np.right_shift(h, np.uint32(16), out=scratch)
    h ^= scratch
    return h.view(np.int32)


def hash_words(words: np.ndarray, prefix: int = 0, tail: np.ndarray | None = None) -> np.ndarray:
    """Hash (int32) of every row of a ``(rows, m)`` matrix of little-endian 32-bit words, each
    row read as ``prefix`` zero bytes (a multiple of 4), its ``4 m`` bytes, then its ``tail``
    bytes (a ``(rows, t)`` matrix, t < 4, each byte sign-extended to a word as Java's ``hashBytes``
    mixes them): a BinaryRow of fixed-width fields is its zero header and its fields' slots."""
    rows = words.shape[0]
    h = np.full(rows, _zeros_state(prefix), dtype=np.uint32)
    scratch = np.empty(rows, dtype=np.uint32), np.empty(rows, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            _mix(h, words[:, j], scratch)
        tail = np.empty((rows, 0), dtype=np.uint8) if tail is None else tail
        for j in range(tail.shape[1]):
            _mix(h, tail[:, j].view(np.int8).astype(np.int32).view(np.uint32), scratch)
        return _finish(h, prefix + 4 * words.shape[1] + tail.shape[1], scratch[0])


@functools.cache
def _zeros_state(size: int) -> int:
    """The state after hashing ``size`` zero bytes (a multiple of 4)."""
    h = np.full(1, SEED, dtype=np.uint32)
    zero = np.zeros(1, dtype=np.uint32)
    scratch = np.empty(1, dtype=np.uint32), np.empty(1, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for _ in range(size // 4):
            _mix(h, zero, scratch)
    return int(h[0])


def murmur_hash(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Hash of every slice ``buf[offsets[i]:offsets[i+1]]`` (uint8 buffer), as int32."""
    sizes = np.diff(offsets)
    out = np.empty(len(sizes), dtype=np.int32)
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
        out[rows] = hash_words(words, tail=block[:, aligned:] if aligned < size else None)
    return out
