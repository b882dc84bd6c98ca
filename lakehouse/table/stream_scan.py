"""A streaming read of a table as a sequence of steps, for engines that drive streams (Spark's
micro-batches): Paimon's ``StreamTableScan``, with positions an engine checkpoints.

A stream starts where ``scan.mode`` says (or where its consumer stopped), reads that snapshot's
rows (the ``-full`` modes) and then the changes of every later snapshot (:mod:`lakehouse.read.stream`).
A :class:`~lakehouse.read.stream.StreamPosition` names the next unit of work exactly, so a
restarted stream goes on where its checkpoint says::

    scan = table.copy({"consumer-id": "audit"}).new_stream_scan()
    position = scan.start()
    end = scan.advance(position, scan.latest_snapshot_id() or 0, scan.limits)
    for unit in scan.units(position, end):          # each readable anywhere
        rows = scan.read(unit)                      # with a _row_kind column
    scan.record(end)                                # the consumer's progress, once rows are safe
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.read.read_options import StreamOptions
from lakehouse.read.stream import (
    StreamLimits,
    StreamPosition,
    StreamRead,
    StreamUnit,
    advance,
    between,
    start_position,
)
from lakehouse.schema import TableSchema
from lakehouse.store import consumers

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


class StreamScan:
    """The steps of a stream of one table (picklable: its reads run anywhere). Its options are the
    table handle's: ``scan.mode`` and a starting snapshot, tag or time, the per-step limits
    ``read.stream.max*PerTrigger``, ``consumer-id`` and ``consumer.ignore-progress``."""

    def __init__(self, table: TableStore) -> None:
        self.options = StreamOptions.of(table.schema.core_options, table.name)
        self.table = self.options.scan.view(table)

    @property
    def name(self) -> str:
        """The name of the table streamed."""
        return self.table.name

    @property
    def schema(self) -> TableSchema:
        """The schema of the stream's rows (that of its starting snapshot when it names one)."""
        return self.table.schema

    @property
    def limits(self) -> StreamLimits:
        """How much one step reads at most, per the options."""
        return self.options.limits

    def latest_snapshot_id(self) -> int | None:
        return self.table.snapshots.latest_id()

    def start(self) -> StreamPosition:
        """Where a new stream starts: where its consumer stopped (unless told to ignore it), else
        where ``scan.mode`` says."""
        o = self.options
        if o.consumer_id is not None and not o.ignore_progress:
            next_snapshot = consumers.next_snapshot(self.table, o.consumer_id)
            if next_snapshot is not None:
                return StreamPosition(next_snapshot)
        snapshot_id = o.scan.snapshot_id
        if o.scan.tag is not None:
            snapshot_id = self.table.snapshots.tag(o.scan.tag).id
        return start_position(self.table, o.mode, snapshot_id, o.scan.timestamp_ms)

    def advance(self, start: StreamPosition, last: int, limits: StreamLimits) -> StreamPosition:
        """The end of the next step from ``start``: the work of snapshots up to ``last``, as much
        as ``limits`` admit (at least one unit)."""
        return advance(self.table, start, last, limits)

    def units(self, start: StreamPosition, end: StreamPosition) -> list[StreamUnit]:
        """The units of the step from ``start`` to ``end``, in order."""
        return between(self.table, start, end)

    def read(self, unit: StreamUnit) -> pa.Table:
        """A unit's rows, each with its kind (``_row_kind``)."""
        return StreamRead(self.table).read(unit)

    def record(self, position: StreamPosition) -> None:
        """Record ``position``'s snapshot as the consumer's next one (nothing without a
        ``consumer-id``): expiration keeps it, and a new stream of the consumer starts there."""
        if self.options.consumer_id is not None:
            consumers.record(self.table, self.options.consumer_id, position.snapshot)
