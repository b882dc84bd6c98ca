"""The file-index types this engine knows, registered once: Paimon's name of each, the column
types it takes, its per-column settings, and how it is built, read and checked. Everything that
handles file indexes looks the type up here; a type missing from it is newer than this engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse.fileindex import bitmap, bloom, bsi
from lakehouse.types import DataType


@dataclass(frozen=True)
class IndexType:
    name: str
    supports: Callable[[DataType], bool]
    build: Callable[[pa.Array, DataType, Mapping[str, str]], bytes | None]  # column, type, its options
    reader: Callable[[bytes, DataType], Any]  # answers visit(op, literals) with an IndexResult
    check: Callable[[bytes, pa.Array, DataType], list[str]]  # problems against the column
    settings: Callable[[Mapping[str, str]], Any] | None = None  # validates per-column options


def _build_bloom(column: pa.Array, dtype: DataType, options: Mapping[str, str]) -> bytes | None:
    return bloom.build(column, dtype, *bloom.settings(options))


def _build_bsi(column: pa.Array, dtype: DataType, options: Mapping[str, str]) -> bytes | None:
    return bsi.build(column, dtype)


INDEX_TYPES: dict[str, IndexType] = {
    t.name: t
    for t in (
        IndexType(
            bloom.BLOOM_FILTER, bloom.supports, _build_bloom, bloom.BloomReader, bloom.check, bloom.settings
        ),
        IndexType(
            bitmap.BITMAP, bitmap.supports, bitmap.build, bitmap.BitmapReader, bitmap.check, bitmap.settings
        ),
        IndexType(bsi.BSI, bsi.supports, _build_bsi, bsi.BsiReader, bsi.check),
    )
}
