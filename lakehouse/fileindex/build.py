"""Building the indexes of one data file (``DataFileIndexWriter``) from its whole columns.

The container lists columns and index types in the order Java's HashMaps iterate them (the
writer groups maintainers by index type, then collects them per column), so our bytes match.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from lakehouse.fileindex import format
from lakehouse.fileindex.java_hashmap import JavaHashMap, string_hash
from lakehouse.fileindex.options import ColumnIndex, buildable
from lakehouse.fileindex.registry import INDEX_TYPES
from lakehouse.types import DataType

INDEX_SUFFIX = ".index"  # DataFilePathFactory.INDEX_PATH_SUFFIX


def build_index(index: ColumnIndex, column: pa.Array, dtype: DataType) -> bytes | None:
    """Serialized bytes of one index over one column (None: this column cannot be indexed)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return INDEX_TYPES[index.index_type].build(column, dtype, index.options)  # buildable() knows it


def java_order(indexes: list[ColumnIndex]) -> list[ColumnIndex]:
    """The order ``DataFileIndexWriter.serializeMaintainers`` leaves columns and types in."""
    by_type = JavaHashMap()
    columns_of: dict[str, JavaHashMap] = {}
    for index in indexes:
        by_type.compute_if_absent(index.index_type, string_hash(index.index_type))
        columns_of.setdefault(index.index_type, JavaHashMap()).put(index.column, string_hash(index.column))
    lookup = {(i.column, i.index_type): i for i in indexes}
    outer = JavaHashMap()
    inner: dict[str, JavaHashMap] = {}
    for index_type in by_type:
        for column in columns_of[index_type]:
            outer.compute_if_absent(column, string_hash(column))
            inner.setdefault(column, JavaHashMap()).put(index_type, string_hash(index_type))
    return [lookup[(column, t)] for column in outer for t in inner[column]]


class FileIndexBuilder:
    """Builds the file-index container of data files: the given indexes over columns of ``types``."""

    def __init__(self, indexes: list[ColumnIndex], types: Mapping[str, DataType]) -> None:
        self.indexes = java_order(indexes)
        self.types = dict(types)

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], types: Mapping[str, DataType], table: str
    ) -> FileIndexBuilder:
        """The indexes a table's ``file-index.*`` options declare (typed error for unknown kinds)."""
        return cls(buildable(options, table), types)

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(i.column for i in self.indexes))

    def __bool__(self) -> bool:
        return bool(self.indexes)

    def build(self, table: pa.Table) -> bytes:
        """The container of every declared index over the rows of one data file."""
        out: dict[str, dict[str, bytes]] = {}
        for index in self.indexes:
            data = build_index(index, table.column(index.column), self.types[index.column])
            if data is not None:
                out.setdefault(index.column, {})[index.index_type] = data
        return format.write(out)
