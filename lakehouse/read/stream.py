"""Streaming reads: where a stream of a table starts, and what each of its steps reads.

As Paimon's streaming scan, a stream reads the rows of its starting snapshot (``scan.mode``
``latest-full`` or ``from-snapshot-full``), then the changes of every later snapshot, found as
:mod:`lakehouse.read.changes` finds them: changelog files when the table has a changelog
producer, else the new files of APPEND snapshots; OVERWRITE snapshots add nothing. The work of
one snapshot is a list of :class:`StreamUnit`s in a fixed order - a split of the full scan, or
one changed file - so a :class:`StreamPosition` (a snapshot, whether its full scan is pending,
and how many of its units were read) names the same rows whenever it is read again: a stream
restarted from its checkpoint goes on exactly where it stopped. Limits cut a step between two units.

A stream needs every snapshot from its position on; a consumer (``consumer-id``) records the
position's snapshot, and snapshot expiration keeps it (:mod:`lakehouse.ops.expire`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import SnapshotNotFoundError
from lakehouse.options import CONSUMER_ID, StartupMode
from lakehouse.read import scan
from lakehouse.read.changes import changed_splits, read_changed
from lakehouse.read.scan import Split, file_by_file
from lakehouse.read.table_read import TableRead

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class StreamPosition:
    """Where a stream stands: the next unit it reads is unit ``index`` of the work of snapshot
    ``snapshot`` - its full scan when ``full``, else its changes."""

    snapshot: int
    full: bool = False
    index: int = 0


@dataclass(frozen=True)
class StreamUnit:
    """One piece of a stream's work, read on its own: a split of a full scan (``changes``
    False), or one changed file."""

    split: Split
    changes: bool

    @property
    def files(self) -> int:
        return len(self.split.files)

    @property
    def rows(self) -> int:
        """The rows the unit holds (of a full-scan split: before its keys are merged)."""
        return self.split.row_count

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.split.files)


@dataclass(frozen=True)
class StreamLimits:
    """At most this many files, rows and bytes per step (None: no limit); a step reads at least
    one unit, however large."""

    files: int | None = None
    rows: int | None = None
    bytes: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.files is None and self.rows is None and self.bytes is None

    def tighter(self, other: StreamLimits) -> StreamLimits:
        """The smaller of the two limits of each kind."""

        def smaller(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        return StreamLimits(
            smaller(self.files, other.files), smaller(self.rows, other.rows), smaller(self.bytes, other.bytes)
        )

    def admits(self, files: int, rows: int, size: int) -> bool:
        """Whether a step reading this many files, rows and bytes stays within the limits."""
        pairs = ((self.files, files), (self.rows, rows), (self.bytes, size))
        return all(limit is None or used <= limit for limit, used in pairs)


def start_position(
    table: TableStore, mode: StartupMode, snapshot_id: int | None, timestamp_ms: int | None
) -> StreamPosition:
    """Where a new stream starts in ``mode`` (not ``default``: resolved by the caller), from
    ``snapshot_id`` (``from-snapshot``...) or ``timestamp_ms`` (``from-timestamp``).

    A table without snapshots streams from snapshot 1 on (``latest-full``: its rows); a start
    before the earliest snapshot starts at the earliest one; a snapshot not committed yet is
    waited for."""
    snapshots = table.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if mode == StartupMode.LATEST_FULL:
        return StreamPosition(latest or 1, full=True)
    if mode == StartupMode.LATEST:
        return StreamPosition((latest or 0) + 1)
    if mode == StartupMode.FROM_TIMESTAMP:
        assert timestamp_ms is not None, "StreamOptions.of requires the start time of this mode"
        before = snapshots.newest_at_or_before(timestamp_ms - 1)
        return StreamPosition(before + 1 if before is not None else earliest or 1)
    assert snapshot_id is not None, "StreamOptions.of requires the start snapshot of this mode"
    return StreamPosition(max(snapshot_id, earliest or 1), full=mode == StartupMode.FROM_SNAPSHOT_FULL)


def units_of(table: TableStore, snapshot_id: int, full: bool) -> list[StreamUnit]:
    """The work of snapshot ``snapshot_id`` in a stream: the splits of its full scan (a
    split of files read without merging: one per file), or its changed files."""
    snapshots = table.snapshots
    try:
        snap = snapshots.snapshot(snapshot_id)
    except SnapshotNotFoundError:
        raise SnapshotNotFoundError(
            f"table {table.name}: snapshot {snapshot_id}, which a stream reads next, has expired (the "
            f"earliest is {snapshots.earliest_id()}); give the stream a {CONSUMER_ID} so that expiration "
            f"keeps the snapshots it still needs, and start it again (a new checkpoint location)"
        ) from None
    if full:
        return [StreamUnit(s, False) for split in scan.plan(table, snap).splits for s in file_by_file(split)]
    return [StreamUnit(s, True) for s in changed_splits(table, snap)]


def advance(table: TableStore, start: StreamPosition, last: int, limits: StreamLimits) -> StreamPosition:
    """The position after the next step from ``start``: the units of snapshots up to ``last``,
    as many as ``limits`` admit (at least one). Only limits make it open manifests."""
    if start.snapshot > last:
        return start
    if limits.unlimited:
        return StreamPosition(last + 1)
    taken = files = rows = size = 0
    position = start
    while position.snapshot <= last:
        work = units_of(table, position.snapshot, position.full)
        for i in range(position.index, len(work)):
            unit = work[i]
            used = (files + unit.files, rows + unit.rows, size + unit.size)
            if taken and not limits.admits(*used):
                return StreamPosition(position.snapshot, position.full, i)
            taken, (files, rows, size) = taken + 1, used
        position = StreamPosition(position.snapshot + 1)
    return position


def between(table: TableStore, start: StreamPosition, end: StreamPosition) -> list[StreamUnit]:
    """The units a step from ``start`` to ``end`` (a position :func:`advance` returned) reads, in
    order."""
    units: list[StreamUnit] = []
    position = start
    while position.snapshot < end.snapshot or (
        position.snapshot == end.snapshot and position.index < end.index
    ):
        work = units_of(table, position.snapshot, position.full)
        stop = end.index if position.snapshot == end.snapshot else len(work)
        units += work[position.index : stop]
        position = StreamPosition(position.snapshot + 1)
    return units


class StreamRead:
    """Reads units of a stream, each row with its ``_row_kind``: changed files as they were
    written, full-scan splits merged (``+I``, or ``+U`` for an updated key)."""

    def __init__(self, table: TableStore) -> None:
        self.table = table
        self.full = TableRead(table, row_kinds=True)

    def read(self, unit: StreamUnit) -> pa.Table:
        return read_changed(self.table, unit.split) if unit.changes else self.full.read_split(unit.split)
