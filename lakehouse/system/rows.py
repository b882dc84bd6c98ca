"""System tables over a table's rows: ``$audit_log`` and ``$binlog`` (rows with their kind) and
``$ro`` (read-optimized: only files that need no merge).

Batch reads, as Paimon's: ``$audit_log`` is the table's rows with a leading ``rowkind`` column
(``+I``, ``+U``: the kind of the version that won the merge); ``$binlog`` packs every column into
an array (one element per row in a batch read); ``$ro`` of a primary-key table reads only the
top level (``num-levels - 1``), i.e. what the last full compaction produced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.read import scan
from lakehouse.read.table_read import TableRead
from lakehouse.rowkind import ROW_KIND
from lakehouse.system.metadata import travel

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

AUDIT_KIND = "rowkind"  # $audit_log's column of row kinds


def audit_log(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    snap, view = travel(table, options)
    data = TableRead(view, row_kinds=True).to_arrow(scan.plan(view, snap).splits)
    kinds = data.column(ROW_KIND)
    kind = pa.field(AUDIT_KIND, pa.string(), nullable=False)
    return data.drop_columns([ROW_KIND]).add_column(0, kind, kinds)


def binlog(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    log = audit_log(table, options)
    arrays = [log.column(AUDIT_KIND)]
    fields = [log.schema.field(AUDIT_KIND)]
    for f in log.schema:
        if f.name == AUDIT_KIND:
            continue
        values = log.column(f.name).combine_chunks()
        offsets = pa.array(range(len(values) + 1), pa.int32())
        arrays.append(pa.ListArray.from_arrays(offsets, values))
        fields.append(pa.field(f.name, pa.list_(f.type)))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_optimized(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    snap, view = travel(table, options)
    splits = scan.plan(view, snap).splits
    if view.schema.primary_keys:
        top = view.schema.core_options.num_levels - 1
        splits = [s for s in map(lambda s: _only_level(s, top), splits) if s.files]
    return TableRead(view).to_arrow(splits)


def _only_level(split: scan.Split, level: int) -> scan.Split:
    """``split`` restricted to files of ``level`` (one sorted run: read without merging)."""
    keep = [i for i, f in enumerate(split.files) if f.level == level]

    def pick(values: tuple) -> tuple:
        return tuple(values[i] for i in keep) if values else values

    return replace(
        split,
        files=pick(split.files),
        raw_convertible=True,
        selections=pick(split.selections),
        deletions=pick(split.deletions),
    )


TABLES = {"audit_log": audit_log, "binlog": binlog, "ro": read_optimized}
