"""A read's options, parsed once: which snapshot (or range of snapshots) a batch read addresses,
where a stream starts and how much each of its steps reads.

Reads take them as Paimon does, as dynamic options of the table handle they read through
(``table.copy({"scan.snapshot-id": "3"})``): time travel ``scan.snapshot-id``,
``scan.timestamp-millis`` or ``scan.tag-name``; the changes of a range ``incremental-between``
(``"start,end"``: snapshots ``start+1 .. end``) with ``streaming-read-overwrite`` (the files
overwrites added count as changes); ``read.changelog`` (each row with its kind, a ``_row_kind``
column); for streams ``scan.mode``, ``consumer-id``, ``consumer.ignore-progress`` and the
per-step limits ``read.stream.maxFilesPerTrigger`` / ``maxRowsPerTrigger`` / ``maxBytesPerTrigger``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidOptionError, SnapshotNotFoundError
from lakehouse.options import (
    CONSUMER_ID,
    CONSUMER_IGNORE_PROGRESS,
    INCREMENTAL_BETWEEN,
    READ_CHANGELOG,
    READ_STREAM_MAX_BYTES_PER_TRIGGER,
    READ_STREAM_MAX_FILES_PER_TRIGGER,
    READ_STREAM_MAX_ROWS_PER_TRIGGER,
    SCAN_MODE,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
    STREAMING_READ_OVERWRITE,
    CoreOptions,
    StartupMode,
    parse_bool,
    parse_choice,
    parse_int,
)
from lakehouse.paths import checked_name
from lakehouse.read.stream import StreamLimits

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

# The options each concrete scan.mode starts a stream from (at most one is ever set)
_STARTS = {
    StartupMode.LATEST_FULL: (),
    StartupMode.LATEST: (),
    StartupMode.FROM_SNAPSHOT: (SCAN_SNAPSHOT_ID, SCAN_TAG_NAME),
    StartupMode.FROM_SNAPSHOT_FULL: (SCAN_SNAPSHOT_ID, SCAN_TAG_NAME),
    StartupMode.FROM_TIMESTAMP: (SCAN_TIMESTAMP_MILLIS,),
}


@dataclass(frozen=True)
class ScanOptions:
    """The snapshot a batch read addresses (all None: the latest) or the snapshots whose changes it
    reads (``incremental``: start, end), and whether rows come with their kind (``changelog``)."""

    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    tag: str | None = None
    changelog: bool = False
    incremental: tuple[int, int] | None = None
    overwrites: bool = False  # streaming-read-overwrite: the changes of overwrites are their new files

    @classmethod
    def of(cls, options: CoreOptions) -> ScanOptions:
        """The scan options among a table handle's options; at most one snapshot may be addressed."""
        scan = cls(
            _integer(options, SCAN_SNAPSHOT_ID),
            _integer(options, SCAN_TIMESTAMP_MILLIS),
            options.get(SCAN_TAG_NAME),
            parse_bool(options.get(READ_CHANGELOG) or "false", READ_CHANGELOG),
            _snapshot_range(options.get(INCREMENTAL_BETWEEN)),
            parse_bool(options.get(STREAMING_READ_OVERWRITE) or "false", STREAMING_READ_OVERWRITE),
        )
        addressed = (scan.snapshot_id, scan.timestamp_ms, scan.tag, scan.incremental)
        if len([v for v in addressed if v is not None]) > 1:
            raise InvalidOptionError(
                f"set at most one of {SCAN_SNAPSHOT_ID}, {SCAN_TIMESTAMP_MILLIS}, {SCAN_TAG_NAME} and "
                f"{INCREMENTAL_BETWEEN}"
            )
        return scan

    def view(self, table: TableStore) -> TableStore:
        """The table as a read of the addressed snapshot sees it (time travel: with that snapshot's
        schema); the table itself when that snapshot does not exist (yet): a batch read of it
        fails when planned, a stream waits for it or starts at the earliest snapshot."""
        if (self.snapshot_id, self.timestamp_ms, self.tag) == (None, None, None):
            return table
        try:
            return table.travel(self.snapshot_id, self.timestamp_ms, self.tag)[1]
        except SnapshotNotFoundError:
            return table


@dataclass(frozen=True)
class StreamOptions:
    """Where a stream starts (``mode``, from ``scan``'s snapshot, tag or time), how much each step
    reads, and the consumer that records its progress."""

    mode: StartupMode
    scan: ScanOptions
    limits: StreamLimits
    consumer_id: str | None
    ignore_progress: bool

    @classmethod
    def of(cls, options: CoreOptions, table: str) -> StreamOptions:
        scan = ScanOptions.of(options)
        mode = parse_choice(options.get(SCAN_MODE) or StartupMode.DEFAULT.value, SCAN_MODE, StartupMode)
        given = [
            key
            for key, value in (
                (SCAN_SNAPSHOT_ID, scan.snapshot_id),
                (SCAN_TAG_NAME, scan.tag),
                (SCAN_TIMESTAMP_MILLIS, scan.timestamp_ms),
            )
            if value is not None
        ]
        if mode == StartupMode.DEFAULT and not given:
            mode = StartupMode.LATEST_FULL
        elif mode == StartupMode.DEFAULT:
            by_time = given[0] == SCAN_TIMESTAMP_MILLIS
            mode = StartupMode.FROM_TIMESTAMP if by_time else StartupMode.FROM_SNAPSHOT
        starts = _STARTS[StartupMode(mode)]
        if given and given[0] not in starts:
            raise InvalidOptionError(
                f"a stream with {SCAN_MODE}={mode} does not start at {given[0]}; remove it, or set "
                f"{SCAN_MODE} to {StartupMode.FROM_SNAPSHOT}, {StartupMode.FROM_SNAPSHOT_FULL} or "
                f"{StartupMode.FROM_TIMESTAMP}"
            )
        if starts and not given:
            raise InvalidOptionError(
                f"a stream with {SCAN_MODE}={mode} starts at {' or '.join(starts)}: set it"
            )

        def limit(key: str) -> int | None:
            value = options.get(key)
            return None if value is None else parse_int(value, key, minimum=1)

        limits = StreamLimits(
            limit(READ_STREAM_MAX_FILES_PER_TRIGGER),
            limit(READ_STREAM_MAX_ROWS_PER_TRIGGER),
            limit(READ_STREAM_MAX_BYTES_PER_TRIGGER),
        )
        consumer_id = options.get(CONSUMER_ID)
        if consumer_id is not None:
            checked_name("consumer id", consumer_id, table)
        ignore = parse_bool(options.get(CONSUMER_IGNORE_PROGRESS) or "false", CONSUMER_IGNORE_PROGRESS)
        return cls(StartupMode(mode), scan, limits, consumer_id, ignore)


def _integer(options: CoreOptions, key: str) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidOptionError(f"read option {key}={value!r} must be an integer") from None


def _snapshot_range(value: str | None) -> tuple[int, int] | None:
    """``"start,end"`` as two snapshot ids."""
    if value is None:
        return None
    try:
        start, end = (int(part) for part in value.split(","))
    except ValueError:
        raise InvalidOptionError(
            f"read option {INCREMENTAL_BETWEEN}={value!r} must be two snapshot ids, 'start,end'"
        ) from None
    return start, end
