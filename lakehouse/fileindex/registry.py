"""The file-index types this engine knows, registered once: Paimon's name of each, the column
types it takes, its per-column settings, and how it is built, read and checked. Everything that
handles file indexes looks the type up here; a type missing from it is newer than this engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from lakehouse.fileindex import bitmap, bloom, bsi
from lakehouse.fileindex.result import IndexResult
from lakehouse.types import DataType


class IndexWriter(Protocol):
    """One index of one file being written: its column added a piece at a time, then serialized
    (None: this column cannot be indexed)."""

    def add(self, column: pa.Array) -> None: ...

    def finish(self) -> bytes | None: ...


class IndexReader(Protocol):
    """One index of one file, read: which rows may satisfy a comparison of its column."""

    def visit(self, op: str, literals: tuple[Any, ...]) -> IndexResult: ...


@dataclass(frozen=True)
class IndexType:
    name: str
    supports: Callable[[DataType], bool]
    writer: Callable[[DataType, Mapping[str, str]], IndexWriter]  # column type, its options
    reader: Callable[[bytes, DataType], IndexReader]
    check: Callable[[bytes, pa.Array, DataType], list[str]]  # problems against the column
    settings: Callable[[Mapping[str, str]], Any] | None = None  # validates per-column options


class _WholeColumn:
    """An index whose layout needs every value first (bitmap, BSI): the pieces are kept, the
    index built from them at the end."""

    def __init__(self, build: Callable[[pa.Array], bytes | None]) -> None:
        self.build = build
        self.pieces: list[pa.Array] = []

    def add(self, column: pa.Array) -> None:
        self.pieces.append(column)

    def finish(self) -> bytes | None:
        column = pa.chunked_array(self.pieces).combine_chunks()
        self.pieces = []
        return self.build(column)


def _bloom_writer(dtype: DataType, options: Mapping[str, str]) -> IndexWriter:
    return bloom.BloomWriter(dtype, *bloom.settings(options))


def _bitmap_writer(dtype: DataType, options: Mapping[str, str]) -> IndexWriter:
    return _WholeColumn(lambda column: bitmap.build(column, dtype, options))


def _bsi_writer(dtype: DataType, options: Mapping[str, str]) -> IndexWriter:
    return _WholeColumn(lambda column: bsi.build(column, dtype))


INDEX_TYPES: dict[str, IndexType] = {
    t.name: t
    for t in (
        IndexType(
            bloom.BLOOM_FILTER, bloom.supports, _bloom_writer, bloom.BloomReader, bloom.check, bloom.settings
        ),
        IndexType(
            bitmap.BITMAP, bitmap.supports, _bitmap_writer, bitmap.BitmapReader, bitmap.check, bitmap.settings
        ),
        IndexType(bsi.BSI, bsi.supports, _bsi_writer, bsi.BsiReader, bsi.check),
    )
}
