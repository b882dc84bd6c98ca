"""Streaming reads: ``spark.readStream.format("paimon")``, one micro-batch per step of the stream.

The stream is :mod:`lakehouse.read.stream`'s: ``scan.mode`` picks its start (``latest-full`` by
default: the latest snapshot's rows, then the changes of each later snapshot). Its offsets are
its positions (:class:`~lakehouse.read.stream.StreamPosition`) as JSON, ``{"snapshot": 7, "full":
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

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

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

from lakehouse import ROW_KIND, StreamLimits, StreamPosition, StreamScan, StreamUnit
from lakehouse.errors import InvalidOptionError
from lakehouse.spark.types import arrow_layout, to_spark_batches


@dataclass(frozen=True)
class StreamPartition(InputPartition):
    """Units one task reads one after the other."""

    units: tuple[StreamUnit, ...]


class PaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a table's stream: the steps of ``scan``, whose Spark ``schema`` has
    ``_row_kind`` with ``read.changelog``."""

    def __init__(self, scan: StreamScan, schema: StructType) -> None:
        self.row_kinds = ROW_KIND in schema.fieldNames()
        if scan.schema.primary_keys and not self.row_kinds:
            raise InvalidOptionError(
                f"table {scan.name} has a primary key: its stream holds updates and deletes, which "
                f'only show with their row kind; read it with option("read.changelog", "true") '
                f"(a {ROW_KIND} column: +I, -U, +U, -D)"
            )
        self.scan = scan
        self.layout = arrow_layout(schema)
        self.last: int | None = None  # Trigger.AvailableNow: the latest snapshot when the query started
        self.initial: dict[str, Any] | None = (
            None  # this query's start, when it did not start from a checkpoint
        )
        self.recorded: int | None = None  # the consumer's next snapshot as this reader last recorded it

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's names)
        """Where the query starts (Spark may ask more than once: the answer stays)."""
        if self.initial is None:
            self.initial = asdict(self.scan.start())
        return self.initial

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        limits = self.scan.limits
        if limits.files is not None:
            return ReadMaxFiles(limits.files)
        if limits.rows is not None:
            return ReadMaxRows(limits.rows)
        if limits.bytes is not None:
            return ReadMaxBytes(limits.bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.last = self.scan.latest_snapshot_id() or 0

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        """The end of the next micro-batch. Spark plans it once the micro-batch before it is
        done (before it calls ``commit`` with that one's end), so ``start`` is recorded as the
        consumer's progress - unless it is where the query started: a query that stops before
        its first micro-batch is done starts there again."""
        if start != self.initial:
            self._record(StreamPosition(**start))
        last = self.last if self.last is not None else self.scan.latest_snapshot_id() or 0
        return asdict(self.scan.advance(StreamPosition(**start), last, self._limits(limit)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        units = self.scan.units(StreamPosition(**start), StreamPosition(**end))
        if not self.scan.schema.primary_keys:
            return [StreamPartition((unit,)) for unit in units]
        buckets: dict[tuple[bytes, int], list[StreamUnit]] = {}
        for unit in units:
            buckets.setdefault((unit.split.partition, unit.split.bucket), []).append(unit)
        return [StreamPartition(tuple(group)) for group in buckets.values()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamPartition)
        for unit in partition.units:
            data = self.scan.read(unit)
            if not self.row_kinds:
                data = data.drop_columns([ROW_KIND])
            yield from to_spark_batches(data, self.layout)

    def _limits(self, limit: ReadLimit) -> StreamLimits:
        """The limits of a micro-batch: none when Spark wants all there is (``Trigger.Once``),
        else the options' and Spark's."""
        if isinstance(limit, ReadAllAvailable):
            return StreamLimits()
        if isinstance(limit, ReadMaxFiles):
            return self.scan.limits.tighter(StreamLimits(files=limit.max_files))
        if isinstance(limit, ReadMaxRows):
            return self.scan.limits.tighter(StreamLimits(rows=limit.max_rows))
        if isinstance(limit, ReadMaxBytes):
            return self.scan.limits.tighter(StreamLimits(bytes=limit.max_bytes))
        return self.scan.limits

    def _record(self, position: StreamPosition) -> None:
        """Record the stream's next snapshot for its consumer (once per snapshot: Spark asks for the
        latest offset many times a second while no data comes)."""
        if position.snapshot != self.recorded:
            self.scan.record(position)
            self.recorded = position.snapshot
