"""Streaming reads: ``spark.readStream.format("paimon")``, one micro-batch per step of the stream.

The stream is :mod:`lakehouse.read.stream`'s: ``scan.mode`` picks its start (``latest-full`` by
default: the latest snapshot's rows, then the changes of each later snapshot). Its offsets are
its positions (:class:`~lakehouse.read.stream.Position`) as JSON, ``{"snapshot": 7, "full":
false, "index": 0}``: the next unit to read. Spark keeps them in the query's checkpoint, and a
restarted query goes on exactly from there.

The driver finds a micro-batch's end (opening manifests only under a limit) and lists its units;
tasks read them: a primary-key table's units of one (partition, bucket) in one input partition,
in commit order, an append table's one per input partition. Rows come with a ``_row_kind``
column with ``read.changelog=true``, which a primary-key table's stream needs (its changes hold
updates and deletes); Spark asks a data source for one schema before it knows whether a read is
a batch or a stream, so the column cannot come by default.

Options: ``scan.mode``, ``scan.snapshot-id`` / ``scan.tag-name`` / ``scan.timestamp-millis``;
``read.stream.maxFilesPerTrigger``, ``read.stream.maxRowsPerTrigger`` and
``read.stream.maxBytesPerTrigger`` bound a micro-batch (``Trigger.AvailableNow`` reads the
snapshots there were at its start in as many); ``consumer-id`` (a read option, or the table's)
records the stream's next snapshot after each micro-batch, so that expiration keeps the
snapshots it still needs, and a new query with that consumer starts where it stopped (unless
``consumer.ignore-progress=true``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakehouse.errors import InvalidOptionError
from lakehouse.options import (
    CONSUMER_ID,
    CONSUMER_IGNORE_PROGRESS,
    READ_CHANGELOG,
    READ_STREAM_MAX_BYTES_PER_TRIGGER,
    READ_STREAM_MAX_FILES_PER_TRIGGER,
    READ_STREAM_MAX_ROWS_PER_TRIGGER,
    SCAN_MODE,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
    StartupMode,
    parse_bool,
    parse_choice,
    parse_int,
)
from lakehouse.paths import checked_name
from lakehouse.read.stream import Limits, Position, StreamRead, Unit, advance, between, start_position
from lakehouse.rowkind import ROW_KIND
from lakehouse.spark.reader import ScanOptions
from lakehouse.spark.types import arrow_layout, to_spark_batches
from lakehouse.store import consumers
from lakehouse.store.table_store import TableStore

# The read options each concrete scan.mode starts from (at most one is ever set)
_STARTS = {
    StartupMode.LATEST_FULL: (),
    StartupMode.LATEST: (),
    StartupMode.FROM_SNAPSHOT: (SCAN_SNAPSHOT_ID, SCAN_TAG_NAME),
    StartupMode.FROM_SNAPSHOT_FULL: (SCAN_SNAPSHOT_ID, SCAN_TAG_NAME),
    StartupMode.FROM_TIMESTAMP: (SCAN_TIMESTAMP_MILLIS,),
}


@dataclass(frozen=True)
class StreamOptions:
    """The options of a streaming read: where it starts, how much a micro-batch reads, and the
    consumer that records its progress."""

    mode: StartupMode
    scan: ScanOptions
    limits: Limits
    consumer_id: str | None
    ignore_progress: bool

    @classmethod
    def parse(cls, options: Mapping[str, str], table: TableStore) -> StreamOptions:
        scan = ScanOptions.parse(options)
        mode = parse_choice(options.get(SCAN_MODE, StartupMode.DEFAULT.value), SCAN_MODE, StartupMode)
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
        if given and given[0] not in _STARTS[mode]:
            raise InvalidOptionError(
                f"a stream with {SCAN_MODE}={mode} does not start at {given[0]}; remove it, or set "
                f"{SCAN_MODE} to {StartupMode.FROM_SNAPSHOT}, {StartupMode.FROM_SNAPSHOT_FULL} or "
                f"{StartupMode.FROM_TIMESTAMP}"
            )
        if _STARTS[mode] and not given:
            raise InvalidOptionError(
                f"a stream with {SCAN_MODE}={mode} starts at {' or '.join(_STARTS[mode])}: set it"
            )

        def limit(key: str) -> int | None:
            value = options.get(key)
            return None if value is None else parse_int(value, key, minimum=1)

        limits = Limits(
            limit(READ_STREAM_MAX_FILES_PER_TRIGGER),
            limit(READ_STREAM_MAX_ROWS_PER_TRIGGER),
            limit(READ_STREAM_MAX_BYTES_PER_TRIGGER),
        )
        table_options = table.schema.core_options
        consumer_id = options.get(CONSUMER_ID) or table_options.get(CONSUMER_ID)
        if consumer_id is not None:
            checked_name("consumer id", consumer_id, table.name)
        ignore = options.get(CONSUMER_IGNORE_PROGRESS) or table_options.get(CONSUMER_IGNORE_PROGRESS)
        return cls(mode, scan, limits, consumer_id, parse_bool(ignore or "false", CONSUMER_IGNORE_PROGRESS))

    def start(self, table: TableStore) -> Position:
        """Where a new query starts: where its consumer stopped, else where ``scan.mode`` says."""
        if self.consumer_id is not None and not self.ignore_progress:
            next_snapshot = consumers.next_snapshot(table, self.consumer_id)
            if next_snapshot is not None:
                return Position(next_snapshot)
        snapshot_id = self.scan.snapshot_id
        if self.scan.tag is not None:
            snapshot_id = table.snapshots.tag(self.scan.tag).id
        return start_position(table, self.mode, snapshot_id, self.scan.timestamp_ms)


@dataclass(frozen=True)
class StreamPartition(InputPartition):
    """Units one task reads one after the other."""

    units: tuple[Unit, ...]


class PaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a table's stream. ``table``: the table under the schema of the stream's
    Spark ``schema`` (which has ``_row_kind`` with ``read.changelog``)."""

    def __init__(self, table: TableStore, options: StreamOptions, schema: StructType) -> None:
        self.row_kinds = ROW_KIND in schema.fieldNames()
        if table.schema.primary_keys and not self.row_kinds:
            raise InvalidOptionError(
                f"table {table.name} has a primary key: its stream holds updates and deletes, which "
                f'only show with their row kind; read it with option("{READ_CHANGELOG}", "true") '
                f"(a {ROW_KIND} column: +I, -U, +U, -D)"
            )
        self.table = table
        self.options = options
        self.layout = arrow_layout(schema)
        self.last: int | None = None  # Trigger.AvailableNow: the latest snapshot when the query started
        self.initial: dict | None = None  # this query's start, when it did not start from a checkpoint
        self.recorded: int | None = None  # the consumer's next snapshot as this reader last recorded it

    def initialOffset(self) -> dict:  # noqa: N802 (Spark's names)
        """Where the query starts (Spark may ask more than once: the answer stays)."""
        if self.initial is None:
            self.initial = asdict(self.options.start(self.table))
        return self.initial

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        limits = self.options.limits
        if limits.files is not None:
            return ReadMaxFiles(limits.files)
        if limits.rows is not None:
            return ReadMaxRows(limits.rows)
        if limits.bytes is not None:
            return ReadMaxBytes(limits.bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.last = self.table.snapshots.latest_id() or 0

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # noqa: N802
        """The end of the next micro-batch. Spark plans it once the micro-batch before it is
        done (before it calls ``commit`` with that one's end), so ``start`` is recorded as the
        consumer's progress - unless it is where the query started: a query that stops before
        its first micro-batch is done starts there again."""
        if start != self.initial:
            self._record(Position(**start))
        last = self.last if self.last is not None else self.table.snapshots.latest_id() or 0
        return asdict(advance(self.table, Position(**start), last, self._limits(limit)))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        units = between(self.table, Position(**start), Position(**end))
        if not self.table.schema.primary_keys:
            return [StreamPartition((unit,)) for unit in units]
        buckets: dict[tuple[bytes, int], list[Unit]] = {}
        for unit in units:
            buckets.setdefault((unit.split.partition, unit.split.bucket), []).append(unit)
        return [StreamPartition(tuple(group)) for group in buckets.values()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        reader = StreamRead(self.table)
        for unit in partition.units:
            data = reader.read(unit)
            if not self.row_kinds:
                data = data.drop_columns([ROW_KIND])
            yield from to_spark_batches(data, self.layout)

    def _limits(self, limit: ReadLimit) -> Limits:
        """The limits of a micro-batch: none when Spark wants all there is (``Trigger.Once``),
        else the options' and Spark's."""
        if isinstance(limit, ReadAllAvailable):
            return Limits()
        if isinstance(limit, ReadMaxFiles):
            return self.options.limits.tighter(Limits(files=limit.max_files))
        if isinstance(limit, ReadMaxRows):
            return self.options.limits.tighter(Limits(rows=limit.max_rows))
        if isinstance(limit, ReadMaxBytes):
            return self.options.limits.tighter(Limits(bytes=limit.max_bytes))
        return self.options.limits

    def _record(self, position: Position) -> None:
        """Record the stream's next snapshot for its consumer, if it has one (once per snapshot:
        Spark asks for the latest offset many times a second while no data comes)."""
        if self.options.consumer_id is not None and position.snapshot != self.recorded:
            consumers.record(self.table, self.options.consumer_id, position.snapshot)
            self.recorded = position.snapshot
