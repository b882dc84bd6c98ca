"""Reads in Paimon's shape: read builder, then a scan that plans splits, then a read of the splits.

``table.new_read_builder()`` fixes what a read reads: a filter, a projection, whether rows come
with their kind, and - through the table handle's options (``table.copy({...})``) - which
snapshot (time travel) or which range of snapshots (``incremental-between``: their changes). Its
scan plans on one machine (:class:`TableScan`, a :class:`~lakehouse.read.scan.Plan` of
picklable splits), its read reads splits anywhere (:class:`~lakehouse.read.table_read.TableRead`,
whole or a batch at a time), as Paimon's ``ReadBuilder`` / ``TableScan`` / ``TableRead`` do::

    builder = table.new_read_builder().with_filter(col("dt") == "2024-01-01").with_projection(["id"])
    splits = builder.new_scan().plan().splits
    rows = builder.new_read().to_arrow(splits)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import InvalidArgumentError, SnapshotNotFoundError
from lakehouse.options import INCREMENTAL_BETWEEN
from lakehouse.predicate import Predicate
from lakehouse.read import scan
from lakehouse.read.changes import splits_between
from lakehouse.read.read_options import ScanOptions
from lakehouse.read.table_read import TableRead
from lakehouse.schema import TableSchema

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


class ReadBuilder:
    """What a read of one table reads; builds its scan and its read (Paimon's ``ReadBuilder``).

    Picklable: build it where the read is planned, send it (or its read) where splits are read.
    The snapshot it addresses is resolved when it is built, so its scan and its reads agree on
    the schema whichever process makes them."""

    def __init__(self, table: TableStore) -> None:
        self._options = ScanOptions.of(table.schema.core_options)
        self._table = table
        self._view = self._options.view(table)
        self._filter: Predicate | None = None
        self._columns: list[str] | None = None
        self._row_kinds = self._options.changelog

    def with_filter(self, predicate: Predicate | None) -> ReadBuilder:
        """Read only rows matching ``predicate``; planning prunes partitions, buckets and files."""
        self._filter = predicate
        return self

    def with_projection(self, columns: Sequence[str] | None) -> ReadBuilder:
        """Read only ``columns``, in this order (None: every column)."""
        if isinstance(columns, str):
            raise InvalidArgumentError(
                f"columns of table {self._table.name} is a list of names, e.g. [{columns!r}]"
            )
        self._columns = None if columns is None else list(columns)
        return self

    def with_row_kinds(self, row_kinds: bool = True) -> ReadBuilder:
        """Give every row its kind (``+I``, ``-U``, ``+U``, ``-D``) in a last ``_row_kind`` column."""
        self._row_kinds = row_kinds
        return self

    @property
    def schema(self) -> TableSchema:
        """The schema the read's rows have (a time-travel read's: that of its snapshot)."""
        return self._view.schema

    @property
    def incremental(self) -> tuple[int, int] | None:
        """``(start, end)`` of an ``incremental-between`` read: the changes of snapshots
        ``start+1 .. end``; None for a read of one snapshot."""
        return self._options.incremental

    @property
    def read_schema(self) -> pa.Schema:
        """The Arrow schema of the rows read: the projected columns, then ``_row_kind``."""
        return self.new_read().output_schema

    def new_scan(self) -> TableScan:
        return TableScan(self._view, self._options, self._filter)

    def new_read(self) -> TableRead:
        changes = self._options.incremental is not None
        return TableRead(self._view, self._columns, self._filter, self._row_kinds, changes=changes)


class TableScan:
    """Plans a read (Paimon's ``TableScan``): pruning by partition, bucket, statistics and file
    indexes, or the changed files of an incremental read, one split each, in commit order."""

    def __init__(self, table: TableStore, options: ScanOptions, filter: Predicate | None) -> None:
        self._table = table
        self._options = options
        self._filter = filter

    def plan(self) -> scan.Plan:
        o = self._options
        if o.incremental is None:
            snapshot = self._table.snapshot(o.snapshot_id, o.timestamp_ms, o.tag)
            return scan.plan(self._table, snapshot, self._filter)
        start, end = o.incremental
        try:
            last, splits = splits_between(self._table, start, end, o.overwrites)
        except (SnapshotNotFoundError, InvalidArgumentError) as e:
            raise type(e)(
                f"{INCREMENTAL_BETWEEN} {start},{end}: {e}; give start <= end <= the latest"
            ) from None
        return scan.Plan(last, self._table.schema.id, splits, **scan.target_sizes(self._table.schema))
