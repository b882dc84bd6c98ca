"""Column statistics of data files: read from Parquet footers, Paimon's stats modes, SimpleStats bytes.

Modes (``metadata.stats-mode``, per column ``fields.<col>.stats-mode``): ``none``, ``counts``
(null count only), ``full``, ``truncate(N)`` (strings and binaries cut to N code points/bytes; a
truncated max is rounded up so it stays an upper bound). Nested columns carry no stats. Value
stats are stored densely: columns without stats are left out and ``_VALUE_STATS_COLS`` names the
rest (null when none was left out) - ``SimpleStatsConverter.toBinaryDenseMode``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lakehouse.errors import InvalidOptionError
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import SimpleStats
from lakehouse.options import METADATA_STATS_MODE, CoreOptions
from lakehouse.predicate import ColumnStats
from lakehouse.types import (
    BINARY_ROOTS,
    STRING_ROOTS,
    TIMESTAMP_ROOTS,
    AtomicType,
    DataField,
    DataType,
    timestamp_unit,
    type_param,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pq

_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")
KEY_STATS_MODE = "truncate(128)"  # system and key columns (StatsCollectorFactories)


@dataclass(frozen=True)
class StatsMode:
    kind: str  # none | counts | full | truncate
    length: int = 0

    @classmethod
    def parse(cls, text: str, key: str = METADATA_STATS_MODE) -> StatsMode:
        low = text.strip().lower()
        if low in ("none", "counts", "full"):
            return cls(low)
        m = _TRUNCATE.match(low)
        if not m or int(m[1]) <= 0:
            raise InvalidOptionError(f"{key}={text!r}; use none, counts, full or truncate(N)")
        return cls("truncate", int(m[1]))


def value_modes(fields: list[DataField], options: CoreOptions) -> list[StatsMode]:
    """Stats mode of each value column (table mode unless ``fields.<col>.stats-mode`` is set)."""
    table_mode = options.required(METADATA_STATS_MODE)
    return [
        StatsMode.parse(
            options.get(f"fields.{f.name}.stats-mode") or table_mode, f"fields.{f.name}.stats-mode"
        )
        for f in fields
    ]


def from_parquet(
    metadata: pq.FileMetaData, fields: list[DataField], modes: list[StatsMode]
) -> list[ColumnStats]:
    """Stats of ``fields`` (top-level columns by name) under their modes, from the min/max and
    null counts the Parquet writer computed while encoding (``ParquetSimpleStatsExtractor``),
    folded over the file's row groups: no pass over the rows of their own."""
    rows = metadata.num_rows
    groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
    where = {groups[0].column(j).path_in_schema: j for j in range(metadata.num_columns)} if groups else {}
    return [
        _footer_stats([g.column(where[f.name]).statistics for g in groups], f.type, m, rows)
        if has_stats(f.type, m) and f.name in where
        else ColumnStats(None, None, None, rows)
        for f, m in zip(fields, modes, strict=True)
    ]


def _footer_stats(
    groups: list[pq.Statistics | None], dtype: DataType, mode: StatsMode, rows: int
) -> ColumnStats:
    counted = [s for s in groups if s is not None and s.has_null_count]
    if len(counted) < len(groups):
        return ColumnStats(None, None, None, rows)
    nulls = sum(s.null_count for s in counted)
    if mode.kind == "counts" or nulls == rows:
        return ColumnStats(None, None, nulls, rows)
    bounded = [s for s in counted if s.has_min_max]
    # values without bounds: NaNs only (which bounds skip), or bounds the writer found too long
    unknown = any(s.num_values and not s.has_min_max for s in counted)
    if not bounded or (unknown and dtype.root not in ("FLOAT", "DOUBLE")):
        return ColumnStats(None, None, nulls, rows)
    lo = _physical(min(s.min_raw for s in bounded), dtype)
    hi = _physical(max(s.max_raw for s in bounded), dtype)
    if mode.kind == "truncate" and dtype.root in STRING_ROOTS + BINARY_ROOTS:
        lo, hi = truncate_min(lo, mode.length), truncate_max(hi, mode.length)
        if hi is None:
            return ColumnStats(None, None, nulls, rows)
    return ColumnStats(lo, hi, nulls, rows)


def _physical(raw: Any, dtype: DataType) -> Any:
    """A Parquet footer bound (physical Parquet value) as the physical value Paimon's stats hold."""
    root = dtype.root
    if root in STRING_ROOTS:
        return raw.decode()
    if root == "DECIMAL":
        unscaled = raw if isinstance(raw, int) else int.from_bytes(raw, "big", signed=True)
        return Decimal(unscaled).scaleb(-type_param(dtype, "scale"))
    if root in TIMESTAMP_ROOTS and timestamp_unit(type_param(dtype, "precision")) == "s":
        return raw // 1000  # Parquet has no seconds: Arrow writes them as millis
    return raw


def truncate_min(value: str | bytes, length: int) -> str | bytes:
    return value[:length]


def truncate_max(value: str | bytes, length: int) -> str | bytes | None:
    """Shortest prefix-based upper bound of ``value`` of at most ``length`` units; None if none exists."""
    if len(value) <= length:
        return value
    if isinstance(value, bytes):
        for i in range(length - 1, -1, -1):
            if value[i] != 0xFF:
                return value[:i] + bytes([value[i] + 1])
        return None
    for i in range(length - 1, -1, -1):
        cp = ord(value[i]) + 1
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xE000  # skip surrogates, which UTF-8 cannot encode
        if cp <= 0x10FFFF:
            return value[:i] + chr(cp)
    return None


def to_simple_stats(types: list[DataType], stats: list[list[ColumnStats]]) -> list[SimpleStats]:
    """Encode the stats of many files (all mode: columns without stats hold nulls) in one pass."""
    if not stats:
        return []
    nullable = [t.copy(True) for t in types]
    arity = len(types)
    bounds = [row for file in stats for row in ([s.min for s in file], [s.max for s in file])]
    encoded = binary_row.encode_values(bounds, nullable)
    return [
        SimpleStats(
            binary_row.serialize(encoded.row(2 * i), arity),
            binary_row.serialize(encoded.row(2 * i + 1), arity),
            tuple(s.null_count for s in file),
        )
        for i, file in enumerate(stats)
    ]


def has_stats(dtype: DataType, mode: StatsMode) -> bool:
    """Whether a column gets stats at all (a mode other than none, and an atomic type)."""
    return mode.kind != "none" and isinstance(dtype, AtomicType)


def to_dense_stats(
    fields: list[DataField], modes: list[StatsMode], stats: list[list[ColumnStats]]
) -> tuple[list[SimpleStats], tuple[str, ...] | None]:
    """Value stats of many files without the columns that have none, and the names kept (None: all)."""
    keep = [i for i, (f, m) in enumerate(zip(fields, modes, strict=True)) if has_stats(f.type, m)]
    encoded = to_simple_stats([fields[i].type for i in keep], [[file[i] for i in keep] for file in stats])
    return encoded, None if len(keep) == len(fields) else tuple(fields[i].name for i in keep)


def decode(
    stats: SimpleStats, types: list[DataType], row_count: int, positions: list[int] | None = None
) -> list[ColumnStats]:
    """Stats for pruning of the stored columns at ``positions`` (default all) of a SimpleStats."""
    if not types:
        return []
    positions = list(range(len(types))) if positions is None else positions
    lo = binary_row.decode_row(binary_row.deserialize(stats.min_values)[1], types, positions)
    hi = binary_row.decode_row(binary_row.deserialize(stats.max_values)[1], types, positions)
    counts = stats.null_counts
    return [
        ColumnStats(a, b, counts[p] if p < len(counts) else None, row_count)
        for p, a, b in zip(positions, lo, hi, strict=True)
    ]
