"""Fixed buckets: a row's bucket is ``abs(hash(bucket key BinaryRow) % N)``, as Java computes it.

``DefaultBucketFunction.bucket`` with Java's truncating ``%``; the hash is ``BinaryRow.hashCode``
of the bucket-key columns, so a key lands in the same bucket whichever engine writes it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse.manifest import binary_row
from lakehouse.types import DataType


def java_bucket(hash_codes: np.ndarray, num_buckets: int) -> np.ndarray:
    """``Math.abs(hash % numBuckets)`` with Java int semantics, vectorized."""
    return np.abs(np.fmod(hash_codes.astype(np.int64), num_buckets)).astype(np.int32)


def fixed_buckets(columns: list[pa.Array], types: list[DataType], num_buckets: int) -> np.ndarray:
    """Bucket of every row from its bucket-key columns."""
    hashes = binary_row.row_hashes(columns, types)
    return java_bucket(hashes, num_buckets)
