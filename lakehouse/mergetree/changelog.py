"""Changelog producers (``changelog-producer``): the changelog files primary-key writers add.

Streaming readers of a table with a producer read its snapshots' changelog files instead of
their data files (:mod:`lakehouse.read.changes`). The files have the layout of data files and
rows in key order; names start with ``changelog-file.prefix``.

* ``none``: no changelog files.
* ``input``: every flush of the write buffer also writes its input rows, with their row kinds,
  ordered by key and sequence, committed with the data (``MergeTreeWriter``).
* ``full-compaction``: a compaction into the top level writes, for every key it saw beyond its
  top-level row, the difference between that row and the merged row; committed with the COMPACT
  snapshot (``FullChangelogMergeFunctionWrapper``). Writers compact fully every
  ``full-compaction.delta-commits`` commits, by default every commit.
* ``lookup``: a compaction that brings level-0 rows up writes, for each of their keys, the
  difference between its newest version above level 0 (in the compaction, else looked up in the
  levels above the output) and the merged row (``LookupChangelogMergeFunctionWrapper``); writers
  push level 0 up at every commit.

A difference is +I (the new row) for a new key, -D (the old row) for a deleted one, and -U (old)
then +U (new) for a key that got a new version; ``changelog-producer.row-deduplicate`` drops
the -U/+U pair when the rows are equal (ignoring
``changelog-producer.row-deduplicate-ignore-fields``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import nulls_first
from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError
from lakehouse.format import parquet
from lakehouse.manifest import stats
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.options import (
    CHANGELOG_FILE_COMPRESSION,
    CHANGELOG_FILE_FORMAT,
    CHANGELOG_FILE_PREFIX,
    CHANGELOG_FILE_STATS_MODE,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS,
    FULL_COMPACTION_DELTA_COMMITS,
    ChangelogProducerKind,
    MergeEngineKind,
)
from lakehouse.rowkind import ADD_KINDS, RowKind
from lakehouse.store.data_writer import FileLayout


@dataclass(frozen=True)
class ChangelogProducer:
    """A table's ``changelog-producer`` and the columns row-deduplication compares (None: off)."""

    kind: ChangelogProducerKind
    compared: tuple[str, ...] | None = None

    @classmethod
    def of(cls, schema, table: str) -> ChangelogProducer:
        """The table's producer; options Paimon refuses are refused with what to change."""
        options = schema.core_options
        try:
            kind, engine = options.changelog_producer, options.merge_engine
        except InvalidOptionError as e:
            raise InvalidOptionError(f"table {table}: {e}") from None
        if kind != ChangelogProducerKind.NONE and not schema.primary_keys:
            raise InvalidOptionError(
                f"table {table}: changelog-producer={kind} needs a primary key; define one or remove "
                f"the option"
            )
        if kind == ChangelogProducerKind.LOOKUP and options.get(FULL_COMPACTION_DELTA_COMMITS) is not None:
            raise InvalidOptionError(
                f"table {table}: full-compaction.delta-commits is incompatible with "
                f"changelog-producer=lookup; use changelog-producer=full-compaction for periodic full "
                f"compactions with changelog, or remove full-compaction.delta-commits"
            )
        if engine == MergeEngineKind.FIRST_ROW and kind not in (
            ChangelogProducerKind.NONE,
            ChangelogProducerKind.LOOKUP,
        ):
            raise InvalidOptionError(
                f"table {table}: merge-engine first-row supports changelog-producer none and lookup only"
            )
        fmt = options.get(CHANGELOG_FILE_FORMAT)
        if fmt is not None and fmt.strip().lower() != "parquet":
            raise UnsupportedFeatureError(
                f"table {table}: changelog-file.format={fmt!r} is not supported by this engine; use 'parquet'"
            )
        compared = None
        if options.get_bool(CHANGELOG_PRODUCER_ROW_DEDUPLICATE):
            ignored = options.names(CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS)
            unknown = [c for c in ignored if c not in schema.field_names]
            if unknown:
                raise InvalidOptionError(
                    f"table {table}: changelog-producer.row-deduplicate-ignore-fields names unknown "
                    f"columns {unknown}"
                )
            compared = tuple(n for n in schema.field_names if n not in ignored)
        return cls(kind, compared)


def changelog_layout(layout: FileLayout, options) -> FileLayout:
    """The layout of a table's changelog files: its data file layout with the ``changelog-file.*``
    prefix, compression and stats mode, and no file index (changelog is read sequentially)."""
    mode = options.get(CHANGELOG_FILE_STATS_MODE)
    modes = layout.value_modes
    if mode is not None:
        modes = [stats.StatsMode.parse(mode, CHANGELOG_FILE_STATS_MODE)] * len(layout.value_fields)
    compression = options.get(CHANGELOG_FILE_COMPRESSION)
    return replace(
        layout,
        prefix=options.get(CHANGELOG_FILE_PREFIX),
        indexes=None,
        value_modes=modes,
        parquet=layout.parquet if compression is None else replace(layout.parquet, compression=compression),
    )


def input_rows(versions: pa.Table, key: list[str], sequence_fields: list[str]) -> pa.Table:
    """Input rows as ``input`` writes them: by key, then ``sequence.field``, then sequence number."""
    columns = comparable_keys(versions, key)
    for c in [*sequence_fields, parquet.SEQUENCE_NUMBER]:
        columns = columns.append_column(c, versions.column(c))
    return versions.take(nulls_first.sort_indices(columns, columns.column_names))


def differences(
    before: pa.Table,
    after: pa.Table,
    has_before: np.ndarray,
    emit: np.ndarray,
    compared: tuple[str, ...] | None,
) -> pa.Table:
    """The changelog rows, in key order, of keys whose previous row is ``before`` (where
    ``has_before``) and whose merged row is ``after`` (aligned tables, one row per key), for the
    keys in ``emit``: +I, -D, or -U/+U; a previous row that is itself a retraction counts as none."""
    old = has_before & _adds(before)
    new = _adds(after)
    insert = emit & ~old & new
    delete = emit & old & ~new
    update = emit & old & new
    if compared is not None and update.any():
        rows = np.flatnonzero(update)
        same = rows_equal(before.take(rows), after.take(rows), compared)
        update[rows[same]] = False
    was = np.flatnonzero(delete | update)
    now = np.flatnonzero(insert | update)
    parts = pa.concat_tables(
        [
            _with_kinds(
                before.select(after.column_names).take(was),
                np.where(delete[was], RowKind.DELETE, RowKind.UPDATE_BEFORE),
            ),
            _with_kinds(after.take(now), np.where(insert[now], RowKind.INSERT, RowKind.UPDATE_AFTER)),
        ]
    )
    order = np.argsort(np.concatenate([2 * was, 2 * now + 1]), kind="stable")
    return parts.take(pa.array(order))


def _adds(table: pa.Table) -> np.ndarray:
    """Rows whose kind adds (+I, +U); null rows (no row) do not."""
    kinds = table.column(parquet.VALUE_KIND).combine_chunks()
    return np.asarray(pc.is_in(kinds, pa.array(ADD_KINDS, kinds.type)).fill_null(False))


def _with_kinds(table: pa.Table, kinds: np.ndarray) -> pa.Table:
    i = table.schema.get_field_index(parquet.VALUE_KIND)
    field = table.schema.field(i)
    return table.set_column(i, field, pa.array(kinds.astype(np.int8), field.type))


def rows_equal(a: pa.Table, b: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """Per row, whether ``a`` and ``b`` hold equal values in every one of ``columns``."""
    out = np.ones(a.num_rows, bool)
    for c in columns:
        out &= values_equal(a.column(c).combine_chunks(), b.column(c).combine_chunks())
    return out


def values_equal(x: pa.Array, y: pa.Array) -> np.ndarray:
    """Element-wise equality of two arrays of one type: nulls equal nulls, nested values compare
    by content (lists and maps element by element, structs field by field)."""
    valid_x, valid_y = np.asarray(x.is_valid()), np.asarray(y.is_valid())
    both = valid_x & valid_y
    t = x.type
    if pa.types.is_struct(t):
        equal = np.ones(len(x), bool)
        for i in range(t.num_fields):
            equal &= values_equal(x.field(i), y.field(i))
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        equal = _lists_equal(x, y, both)
    else:
        equal = np.asarray(pc.equal(x, y).fill_null(False))
    return (valid_x == valid_y) & (~both | equal)


def _lists_equal(x: pa.Array, y: pa.Array, both: np.ndarray) -> np.ndarray:
    """Equality of list (or map) values: equal lengths and equal elements, position by position."""
    ox, oy = np.asarray(x.offsets, np.int64), np.asarray(y.offsets, np.int64)
    lx, ly = np.diff(ox), np.diff(oy)
    rows = np.flatnonzero(both & (lx == ly))
    lengths = lx[rows]
    within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ex = _elements(x).take(pa.array(np.repeat(ox[rows], lengths) + within))
    ey = _elements(y).take(pa.array(np.repeat(oy[rows], lengths) + within))
    mismatches = np.bincount(
        np.repeat(np.arange(len(rows)), lengths), weights=~values_equal(ex, ey), minlength=len(rows)
    )
    equal = np.zeros(len(x), bool)
    equal[rows] = mismatches == 0
    return equal


def _elements(array: pa.Array) -> pa.Array:
    """The child values a list's (or a map's) offsets point into."""
    if pa.types.is_map(array.type):
        return pa.StructArray.from_arrays([array.keys, array.items], names=["key", "value"])
    return array.values
