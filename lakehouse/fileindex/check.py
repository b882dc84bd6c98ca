"""Proving a data file's indexes tell the truth about its data: each index decoded and compared
with a brute-force evaluation of the column it covers (each type's ``check``, see
:mod:`lakehouse.fileindex.registry`)."""

from __future__ import annotations

import pyarrow as pa

from lakehouse.errors import CorruptFileError
from lakehouse.fileindex.registry import INDEX_TYPES
from lakehouse.types import DataType


def check_index(index_type: str, data: bytes | None, column: pa.Array, dtype: DataType) -> list[str]:
    """Problems of one serialized index against the column it was built over ([] when it is right)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if data is None:  # an empty index claims the column has no values at all
        return [] if column.null_count == len(column) else ["empty index, but the column has values"]
    known = INDEX_TYPES.get(index_type)
    if known is None:
        return [f"index type {index_type!r} is newer than this engine, which cannot check it"]
    try:
        return known.check(data, column, dtype)
    except CorruptFileError as e:
        return [f"unreadable: {e}"]
