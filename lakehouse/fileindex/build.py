"""Building the indexes of one data file (``DataFileIndexWriter``), a piece of its rows at a time.

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


def java_order(indexes: list[ColumnIndex]) -> list[ColumnIndex]:
    """The order ``DataFileIndexWriter.serializeMaintainers`` leaves columns and types in."""
    by_type: JavaHashMap[str] = JavaHashMap()
    columns_of: dict[str, JavaHashMap[str]] = {}
    for index in indexes:
        by_type.compute_if_absent(index.index_type, string_hash(index.index_type))
        columns_of.setdefault(index.index_type, JavaHashMap()).put(index.column, string_hash(index.column))
    lookup = {(i.column, i.index_type): i for i in indexes}
    outer: JavaHashMap[str] = JavaHashMap()
    inner: dict[str, JavaHashMap[str]] = {}
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

    def writer(self) -> FileIndexWriter:
        """The indexes of one file, filled as its rows are written."""
        return FileIndexWriter(self)

    def build(self, table: pa.Table) -> bytes:
        """The container of every declared index over the rows of one data file."""
        writer = self.writer()
        writer.add(table)
        return writer.finish()


class FileIndexWriter:
    """The file-index container of one data file, its columns added a piece of rows at a time
    (``DataFileIndexWriter``): what it holds per index is the index's own state (a bloom filter's
    bits), or the column for indexes that need every value first."""

    def __init__(self, builder: FileIndexBuilder) -> None:
        self.writers = [
            (index, INDEX_TYPES[index.index_type].writer(builder.types[index.column], index.options))
            for index in builder.indexes  # buildable() knows every type
        ]

    def add(self, rows: pa.Table) -> None:
        """Index ``rows``, the next rows of the file (at least the indexed columns)."""
        for index, writer in self.writers:
            column = rows.column(index.column)
            writer.add(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)

    def finish(self) -> bytes:
        """The serialized container over every row added."""
        out: dict[str, dict[str, bytes]] = {}
        for index, writer in self.writers:
            data = writer.finish()
            if data is not None:
                out.setdefault(index.column, {})[index.index_type] = data
        return format.write(out)
