"""Which columns get which file indexes: ``file-index.<type>.columns`` and per-column options.

``file-index.bloom-filter.columns = user_id`` declares an index; ``file-index.bloom-filter.user_id.fpp
= 0.01`` configures it (``FileIndexOptions``). Declarations are checked against the schema when a
table is created or its options change, so an index the data type cannot carry is refused up front.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError
from lakehouse.fileindex.registry import INDEX_TYPES
from lakehouse.options import parse_memory_size
from lakehouse.types import DataField

PREFIX = "file-index."
IN_MANIFEST_THRESHOLD = "file-index.in-manifest-threshold"
DEFAULT_IN_MANIFEST_THRESHOLD = "500 B"
READ_ENABLED = "file-index.read.enabled"


@dataclass(frozen=True)
class ColumnIndex:
    """One index of one column, with its own options (``items``, ``fpp``, ``version`` ...)."""

    column: str
    index_type: str
    options: dict[str, str] = field(default_factory=dict)


def declared(options: Mapping[str, str]) -> list[ColumnIndex]:
    """Every declared index, in declaration order, with its per-column options."""
    indexes: dict[tuple[str, str], dict[str, str]] = {}
    for key, value in options.items():
        if key.startswith(PREFIX) and key.endswith(".columns"):
            index_type = key[len(PREFIX) : -len(".columns")]
            for name in value.split(","):
                if not name.strip():
                    raise InvalidOptionError(f"{key}={value!r} names an empty column")
                indexes.setdefault((name.strip(), index_type), {})
    for key, value in options.items():
        parts = key[len(PREFIX) :].split(".") if key.startswith(PREFIX) else []
        if len(parts) != 3 or key.endswith(".columns"):
            continue
        index_type, column, option = parts
        if (column, index_type) not in indexes:
            raise InvalidOptionError(
                f"option {key!r} configures column {column!r}, which {PREFIX}{index_type}.columns does not "
                f"declare; add it there first"
            )
        indexes[(column, index_type)][option] = value
    return [ColumnIndex(c, t, o) for (c, t), o in indexes.items()]


def buildable(options: Mapping[str, str], table: str) -> list[ColumnIndex]:
    """The declared indexes, refusing kinds this engine cannot build (e.g. options set by another)."""
    indexes = declared(options)
    for index in indexes:
        if index.index_type not in INDEX_TYPES:
            raise UnsupportedFeatureError(
                f"table {table}: file index type {index.index_type!r} is not supported; "
                f"use one of {sorted(INDEX_TYPES)} (remove {PREFIX}{index.index_type}.columns)"
            )
    return indexes


def validate(options: Mapping[str, str], fields: list[DataField] | tuple[DataField, ...], table: str) -> None:
    """Refuse indexes on unknown columns, of unknown kinds, or on types they cannot index."""
    types = {f.name: f.type for f in fields}
    for index in buildable(options, table):
        if index.column not in types:
            raise InvalidOptionError(
                f"table {table}: {index.index_type} index names unknown column {index.column!r}"
            )
        dtype = types[index.column]
        if not INDEX_TYPES[index.index_type].supports(dtype):
            raise InvalidOptionError(
                f"table {table}: a {index.index_type} index cannot be built on column {index.column!r} "
                f"of type {dtype}; choose another index type or column"
            )
        settings = INDEX_TYPES[index.index_type].settings
        try:
            if settings is not None:
                settings(index.options)
        except InvalidOptionError as e:
            where = f"{PREFIX}{index.index_type}.{index.column}"
            raise InvalidOptionError(f"table {table}: option {where}.{e}") from None
    in_manifest_threshold(options)


def in_manifest_threshold(options: Mapping[str, str]) -> int:
    """Largest index (bytes) embedded in the manifest; bigger ones get their own file."""
    text = options.get(IN_MANIFEST_THRESHOLD, DEFAULT_IN_MANIFEST_THRESHOLD)
    return parse_memory_size(text, IN_MANIFEST_THRESHOLD)
