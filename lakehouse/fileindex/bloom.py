"""Bloom filter file index (``file-index.bloom-filter.columns``): Paimon's BloomFilter64.

Sizing: ``m = -n ln p / ln(2)^2`` bits, then padded up to whole bytes the way Java does it (always
adding 1..8 bits), ``k = max(1, round(m/n ln 2))``. Probing is Kirsch-Mitzenmacher with Java 32-bit
int arithmetic over the 64-bit FastHash. Serialized as a 4-byte big-endian ``k`` followed by the
bit set (bit ``i`` is ``byte[i >> 3] & (1 << (i & 7))``). Building hashes a whole column at once.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse.errors import CorruptFileError, InvalidOptionError
from lakehouse.fileindex.hashing import fast_hash
from lakehouse.fileindex.result import REMAIN, SKIP, IndexResult
from lakehouse.types import AtomicType, DataType

BLOOM_FILTER = "bloom-filter"
DEFAULT_ITEMS = 1_000_000  # BloomFilterFileIndex.DEFAULT_ITEMS
DEFAULT_FPP = 0.1


def supports(dtype: DataType) -> bool:
    """Every atomic type FastHash covers: not BOOLEAN, not DECIMAL."""
    return isinstance(dtype, AtomicType) and dtype.root not in ("BOOLEAN", "DECIMAL")


def settings(options: Mapping[str, str]) -> tuple[int, float]:
    """(expected items, false-positive probability) of an index's ``items`` and ``fpp`` options."""
    items_text, fpp_text = options.get("items", str(DEFAULT_ITEMS)), options.get("fpp", str(DEFAULT_FPP))
    try:
        items = int(items_text)
    except ValueError:
        items = 0
    try:
        fpp = float(fpp_text)
    except ValueError:
        fpp = 0.0
    if items <= 0:
        raise InvalidOptionError(f"items={items_text!r} must be a positive whole number")
    if not 0 < fpp < 1:
        raise InvalidOptionError(f"fpp={fpp_text!r} must be a probability between 0 and 1, like 0.01")
    return items, fpp


def sizing(items: int, fpp: float) -> tuple[int, int]:
    """(number of hash functions, number of bits) of ``BloomFilter64(items, fpp)``."""
    nb = int(-items * math.log(fpp) / (math.log(2) * math.log(2)))
    num_bits = nb + (8 - nb % 8)
    return max(1, int(math.floor(num_bits / items * math.log(2) + 0.5))), num_bits


def _positions(hashes: np.ndarray, k: int, num_bits: int) -> np.ndarray:
    """Bit positions probed for each hash: a ``(len(hashes), k)`` matrix."""
    h = hashes.astype(np.int64, copy=False)
    hash1 = h.astype(np.int32)  # low 32 bits
    hash2 = (h >> 32).astype(np.int32)  # high 32 bits
    i = np.arange(1, k + 1, dtype=np.int32)
    with np.errstate(over="ignore"):
        combined = hash1[:, None] + i[None, :] * hash2[:, None]  # int32, wraps like Java
    combined ^= combined >> 31  # ~combined where negative
    return np.remainder(combined, np.int32(num_bits), out=combined)


HASHES_AT_ONCE = 1 << 20  # bounds the (hashes x k) position matrix of a build


def _set_bits(bits: np.ndarray, hashes: np.ndarray, k: int) -> None:
    """Set the bits ``hashes`` probe in the packed bit set ``bits`` (uint8, bit ``i`` in byte
    ``i >> 3``), a bounded block of hashes at a time: an unbuffered or (``ufunc.at``) of each
    position's bit into its byte, which needs no sort of the positions."""
    for start in range(0, len(hashes), HASHES_AT_ONCE):
        pos = _positions(hashes[start : start + HASHES_AT_ONCE], k, len(bits) * 8).ravel()
        np.bitwise_or.at(bits, pos >> 3, np.left_shift(np.uint8(1), (pos & 7).astype(np.uint8)))


@dataclass(frozen=True)
class BloomFilter:
    num_hash_functions: int
    bits: bytes

    @property
    def num_bits(self) -> int:
        return len(self.bits) * 8

    @classmethod
    def sized(cls, hashes: np.ndarray, k: int, num_bits: int) -> BloomFilter:
        """A filter of ``num_bits`` bits and ``k`` hash functions holding ``hashes``."""
        bits = np.zeros(num_bits // 8, dtype=np.uint8)
        _set_bits(bits, hashes, k)
        return cls(k, bits.tobytes())

    def serialize(self) -> bytes:
        return struct.pack(">i", self.num_hash_functions) + self.bits

    @classmethod
    def deserialize(cls, data: bytes) -> BloomFilter:
        if len(data) < 5:
            raise CorruptFileError(f"bloom filter index of {len(data)} bytes is truncated")
        k = struct.unpack_from(">i", data)[0]
        if k <= 0 or k > 64:
            raise CorruptFileError(f"bloom filter index claims {k} hash functions; the index is corrupt")
        return cls(k, bytes(data[4:]))

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        bits = np.frombuffer(self.bits, dtype=np.uint8)
        pos = _positions(hashes, self.num_hash_functions, self.num_bits)
        hit = (bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return hit.all(axis=1)


class BloomWriter:
    """The bloom filter of a file being written, filled a column piece at a time (nulls are not
    indexed): it holds the filter's packed bits, never the column."""

    def __init__(self, dtype: DataType, items: int = DEFAULT_ITEMS, fpp: float = DEFAULT_FPP) -> None:
        self.dtype = dtype
        self.k, num_bits = sizing(items, fpp)
        self.bits = np.zeros(num_bits // 8, dtype=np.uint8)

    def add(self, column: pa.Array) -> None:
        _set_bits(self.bits, fast_hash(column.drop_null(), self.dtype), self.k)

    def finish(self) -> bytes:
        return BloomFilter(self.k, self.bits.tobytes()).serialize()


def build(column: pa.Array, dtype: DataType, items: int = DEFAULT_ITEMS, fpp: float = DEFAULT_FPP) -> bytes:
    """The serialized bloom filter of a whole column (nulls are not indexed)."""
    writer = BloomWriter(dtype, items, fpp)
    writer.add(column)
    return writer.finish()


class BloomReader:
    """Answers equality and IN: SKIP when no probed value can be in the file."""

    def __init__(self, data: bytes, dtype: DataType) -> None:
        self.filter = BloomFilter.deserialize(data)
        self.dtype = dtype

    def visit(self, op: str, literals: tuple) -> IndexResult:
        if op not in ("eq", "in"):
            return REMAIN
        if any(v is None or not getattr(v, "is_valid", True) for v in literals):
            return REMAIN  # a null probe never skips
        return REMAIN if self.filter.might_contain(_probe_hashes(literals, self.dtype)).any() else SKIP


@functools.lru_cache(maxsize=256)
def _probe_hashes(literals: tuple, dtype: DataType) -> np.ndarray:
    """The hashes of a filter's literals, computed once for all the files a plan probes."""
    return fast_hash(pa.array(list(literals)), dtype)


def check(data: bytes, column: pa.Array, dtype: DataType) -> list[str]:
    """Problems of a serialized bloom filter against its column: every value present must test
    REMAIN, and the bits must equal a rebuild over the data with the stored size and hash count
    (so any flipped bit shows)."""
    stored = BloomFilter.deserialize(data)
    hashes = fast_hash(column.drop_null(), dtype)
    missing = ~stored.might_contain(hashes) if len(hashes) else np.zeros(0, bool)
    if missing.any():
        value = column.drop_null()[int(np.flatnonzero(missing)[0])].as_py()
        return [f"bloom filter rejects {int(missing.sum())} values present in the data, e.g. {value!r}"]
    rebuilt = BloomFilter.sized(hashes, stored.num_hash_functions, stored.num_bits)
    if rebuilt.bits != stored.bits:
        return ["bloom filter bits differ from a rebuild over the data (corrupted bits)"]
    return []
