"""Column statistics of data files: collection from Arrow, Paimon's stats modes, SimpleStats bytes.

Modes (``metadata.stats-mode``, per column ``fields.<col>.stats-mode``): ``none``, ``counts``
(null count only), ``full``, ``truncate(N)`` (strings and binaries cut to N code points/bytes; a
truncated max is rounded up so it stays an upper bound). Nested columns carry no stats. Value
stats are stored densely: columns without stats are left out and ``_VALUE_STATS_COLS`` names the
rest (null when none was left out) - ``SimpleStatsConverter.toBinaryDenseMode``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import InvalidOptionError
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import SimpleStats
from lakehouse.options import CoreOptions
from lakehouse.predicate import ColumnStats
from lakehouse.types import BINARY_ROOTS, STRING_ROOTS, AtomicType, DataField, DataType

_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")
KEY_STATS_MODE = "truncate(128)"  # system and key columns (StatsCollectorFactories)


@dataclass(frozen=True)
class StatsMode:
    kind: str  # none | counts | full | truncate
    length: int = 0

    @classmethod
    def parse(cls, text: str, key: str = "metadata.stats-mode") -> StatsMode:
        low = text.strip().lower()
        if low in ("none", "counts", "full"):
            return cls(low)
        m = _TRUNCATE.match(low)
        if not m or int(m[1]) <= 0:
            raise InvalidOptionError(f"{key}={text!r}; use none, counts, full or truncate(N)")
        return cls("truncate", int(m[1]))


def value_modes(fields: list[DataField], options: CoreOptions) -> list[StatsMode]:
    """Stats mode of each value column (table mode unless ``fields.<col>.stats-mode`` is set)."""
    table_mode = options.get("metadata.stats-mode")
    return [
        StatsMode.parse(
            options.get(f"fields.{f.name}.stats-mode") or table_mode, f"fields.{f.name}.stats-mode"
        )
        for f in fields
    ]


def collect(table: pa.Table, fields: list[DataField], modes: list[StatsMode]) -> list[ColumnStats]:
    """Stats of ``fields`` (columns of ``table`` by name) under their modes, vectorized per column."""
    return [_column_stats(table.column(f.name), f.type, m) for f, m in zip(fields, modes, strict=True)]


def _column_stats(column: pa.ChunkedArray, dtype: DataType, mode: StatsMode) -> ColumnStats:
    rows = len(column)
    if not has_stats(dtype, mode):
        return ColumnStats(None, None, None, rows)
    nulls = column.null_count
    if mode.kind == "counts" or nulls == rows:
        return ColumnStats(None, None, nulls, rows)
    physical = binary_row.physical_array(column.combine_chunks(), dtype)
    mm = pc.min_max(physical)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if dtype.root in ("FLOAT", "DOUBLE") and (lo is None or hi is None or lo > hi):
        return ColumnStats(None, None, nulls, rows)  # only NaNs: no usable bounds
    if mode.kind == "truncate" and dtype.root in STRING_ROOTS + BINARY_ROOTS:
        lo, hi = truncate_min(lo, mode.length), truncate_max(hi, mode.length)
        if hi is None:
            return ColumnStats(None, None, nulls, rows)
    return ColumnStats(lo, hi, nulls, rows)


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
    nullable = [t.copy(True) for t in types]
    arity = len(types)
    bounds = [row for file in stats for row in ([s.min for s in file], [s.max for s in file])]
    encoded = binary_row.encode_values(bounds, nullable) if stats else None
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


def merge(a: ColumnStats | None, b: ColumnStats) -> ColumnStats:
    """Stats of the concatenation of two slices of one column."""
    if a is None:
        return b
    rows = a.row_count + b.row_count
    if a.null_count is None or b.null_count is None:
        return ColumnStats(None, None, None, rows)
    nulls = a.null_count + b.null_count

    def bound(x, y, pick):
        x_has, y_has = a.null_count < a.row_count, b.null_count < b.row_count
        if (x_has and x is None) or (y_has and y is None):
            return None  # a slice with values but no bound (counts mode, NaNs, failed truncation)
        if not x_has:
            return y
        if not y_has:
            return x
        return pick(x, y)

    return ColumnStats(bound(a.min, b.min, min), bound(a.max, b.max, max), nulls, rows)
