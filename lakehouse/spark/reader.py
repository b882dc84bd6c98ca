"""Distributed reads: the splits of the engine's plan in Spark input partitions, Arrow batches out.

Input partitions are sized for the session's default parallelism like Spark's own file sources
(few tasks: each one costs a Python worker round trip); a task reads its splits one after the
other, files of splits that need no key merge one by one.

Spark calls ``pushFilters`` then ``partitions`` on the driver and ``read`` in its tasks, on a
pickled copy of the reader made *before* ``partitions`` runs: everything a task needs travels in
the reader (table handle, filter, Spark schema) or in its :class:`SplitPartition`.

``incremental-between`` ("start,end") reads the changes of snapshots ``start+1 .. end`` instead,
as :func:`lakehouse.read.changes.read_changes` finds them, with their kinds under
``read.changelog``; ``streaming-read-overwrite`` adds the files OVERWRITE snapshots added.

Filter pushdown is opt-in per read (``option("filter-pushdown", "true")``). Spark 4.1 to 4.3 keep
the read plan of the last pushdown on the data source instance that every query of one DataFrame
shares, and a later query without pushable filters reuses it: with pushdown on, ``df.filter(c)``
followed by ``df.count()`` would count only the rows matching ``c``. Enable it for DataFrames
loaded for one query each (or one filter), e.g. ``spark.read...load(t).filter(c)``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StringType, StructType

from lakehouse.catalog import Catalog
from lakehouse.errors import InvalidArgumentError, InvalidOptionError, SnapshotNotFoundError
from lakehouse.io.fs import storage_options
from lakehouse.options import (
    INCREMENTAL_BETWEEN,
    READ_CHANGELOG,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
    SOURCE_SPLIT_OPEN_FILE_COST,
    SOURCE_SPLIT_TARGET_SIZE,
    STREAMING_READ_OVERWRITE,
    parse_bool,
)
from lakehouse.predicate import Predicate
from lakehouse.read.changes import read_changed, splits_between
from lakehouse.read.scan import Plan, Split, file_by_file, pack_ordered
from lakehouse.rowkind import ROW_KIND
from lakehouse.spark.filters import to_predicate
from lakehouse.spark.types import arrow_layout, spark_schema, to_spark_batches
from lakehouse.store.table_store import TableStore
from lakehouse.table.table import Table

FILTER_PUSHDOWN = "filter-pushdown"


@dataclass(frozen=True)
class ScanOptions:
    """The snapshot a read addresses (all None: the latest) or the snapshots whose changes it
    reads (``incremental``: start, end), whether filters are pushed, and whether rows come with
    their kind (``read.changelog``: a ``_row_kind`` column)."""

    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    tag: str | None = None
    filter_pushdown: bool = False
    changelog: bool = False
    incremental: tuple[int, int] | None = None
    overwrites: bool = False  # streaming-read-overwrite: incremental reads read overwrites' new files

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ScanOptions:
        """Paimon's scan options of a Spark read; at most one may be set."""

        def number(key: str) -> int | None:
            value = options.get(key)
            if value is None:
                return None
            try:
                return int(value)
            except ValueError:
                raise InvalidOptionError(f"read option {key}={value!r} must be an integer") from None

        pushdown = parse_bool(options.get(FILTER_PUSHDOWN, "false"), FILTER_PUSHDOWN)
        changelog = parse_bool(options.get(READ_CHANGELOG, "false"), READ_CHANGELOG)
        overwrites = parse_bool(options.get(STREAMING_READ_OVERWRITE, "false"), STREAMING_READ_OVERWRITE)
        scan = cls(
            number(SCAN_SNAPSHOT_ID),
            number(SCAN_TIMESTAMP_MILLIS),
            options.get(SCAN_TAG_NAME),
            pushdown,
            changelog,
            _snapshot_range(options.get(INCREMENTAL_BETWEEN)),
            overwrites,
        )
        addressed = (scan.snapshot_id, scan.timestamp_ms, scan.tag, scan.incremental)
        if len([v for v in addressed if v is not None]) > 1:
            raise InvalidOptionError(
                f"set at most one of {SCAN_SNAPSHOT_ID}, {SCAN_TIMESTAMP_MILLIS}, {SCAN_TAG_NAME} and "
                f"{INCREMENTAL_BETWEEN}"
            )
        return scan

    def view(self, table: Table) -> TableStore:
        """The table as a read of the addressed snapshot sees it (time travel reads its own
        schema); the current table when that snapshot does not exist (yet): a batch read of it
        fails when planned, a stream waits for it or starts at the earliest snapshot."""
        try:
            return table.store.travel(self.snapshot_id, self.timestamp_ms, self.tag)[1]
        except SnapshotNotFoundError:
            return table.store

    def spark_schema(self, table: Table) -> StructType:
        """The Spark schema of the read: the columns of :meth:`view`, then ``_row_kind`` with
        ``read.changelog``."""
        schema = spark_schema(self.view(table).schema.fields)
        return schema.add(ROW_KIND, StringType(), nullable=False) if self.changelog else schema

    def plan(self, table: Table, filter: Predicate | None) -> Plan:
        return table.plan(filter, self.snapshot_id, self.timestamp_ms, self.tag)

    def changed_splits(self, table: Table) -> list[Split]:
        """The changed files of an ``incremental`` read, one split each, in commit order."""
        assert self.incremental is not None
        start, end = self.incremental
        try:
            return splits_between(table.store, start, end, self.overwrites)[1]
        except (SnapshotNotFoundError, InvalidArgumentError) as e:
            raise type(e)(
                f"{INCREMENTAL_BETWEEN} {start},{end}: {e}; give start <= end <= the latest"
            ) from None


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


@dataclass(frozen=True)
class SplitPartition(InputPartition):
    """Splits one task reads one after the other, and the schema version their plan was made with;
    ``changes``: the splits are changed files, read as written (:func:`read_changed`)."""

    splits: tuple[Split, ...]
    schema_id: int
    changes: bool = False


class PaimonReader(DataSourceReader):
    """Plans a table scan with the pushed filters and reads its splits in Spark tasks.

    ``parallelism``: the session's default parallelism, which the input partitions are sized for
    (None: one input partition per split).
    """

    def __init__(self, table: Table, scan: ScanOptions, schema: StructType, parallelism: int | None = None):
        self.table = table
        self.scan = scan
        self.layout = arrow_layout(schema)
        self.row_kinds = ROW_KIND in schema.fieldNames()
        self.parallelism = parallelism
        self.filter: Predicate | None = None

    def plan(self) -> Plan:
        """The engine's plan of this read (its ``stats`` show what the filters pruned)."""
        return self.scan.plan(self.table, self.filter)

    def partitions(self) -> Sequence[InputPartition]:
        if self.scan.incremental is not None:
            splits = self.scan.changed_splits(self.table)
            schema_id = self.table.schema.id
            groups = (
                packed(self.table, splits, self.parallelism) if self.parallelism else [[s] for s in splits]
            )
            return [SplitPartition(tuple(g), schema_id, changes=True) for g in groups]
        plan = self.plan()
        return input_partitions(self.table, plan.splits, plan.schema_id, self.parallelism)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SplitPartition):
            return  # an empty table: Spark reads one placeholder partition
        if partition.changes:
            names = self.layout.names
            for split in partition.splits:
                yield from to_spark_batches(read_changed(self.table.store, split).select(names), self.layout)
            return
        yield from read_partition(self.table, partition, self.layout, self.filter, row_kinds=self.row_kinds)


def input_partitions(
    table: Table, splits: list[Split], schema_id: int, parallelism: int | None
) -> list[SplitPartition]:
    """The input partitions of ``splits``: sized for ``parallelism`` (see :func:`packed`), or one
    per split (None), the files of a split that needs no key merge read one by one."""
    if parallelism is None:
        return [SplitPartition(tuple(file_by_file(split)), schema_id) for split in splits]
    return [SplitPartition(tuple(group), schema_id) for group in packed(table, splits, parallelism)]


def packed(table: Table, splits: list[Split], parallelism: int) -> list[list[Split]]:
    """The splits of each input partition, as Spark's file sources and Paimon's connector size
    them: the files of raw-convertible splits packed in order into partitions of at most
    ``min(source.split.target-size, max(open cost, total / parallelism))`` bytes (each file
    weighing at least the open cost), every split that merges keys in a partition of its own."""
    options = table.schema.core_options
    target = options.memory(SOURCE_SPLIT_TARGET_SIZE)
    open_cost = options.memory(SOURCE_SPLIT_OPEN_FILE_COST)
    files = [part for split in splits if split.raw_convertible for part in file_by_file(split)]
    weights = [max(part.files[0].file_size, open_cost) for part in files]
    size = min(target, max(open_cost, sum(weights) // max(parallelism, 1)))
    merging = [[split] for split in splits if not split.raw_convertible]
    return pack_ordered(files, weights, size) + merging


def read_partition(
    table: Table,
    partition: SplitPartition,
    layout: pa.Schema,
    filter: Predicate | None = None,
    columns: list[str] | None = None,
    row_kinds: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The rows of one input partition's splits (``columns`` of them, default all, with
    ``_row_kind`` if ``row_kinds``) as Arrow batches of Spark's ``layout``, split after split,
    a batch at a time."""
    reader = table.new_read(columns, filter, schema_id=partition.schema_id, row_kinds=row_kinds)
    for split in partition.splits:
        for batch in reader.batches(split):
            yield from to_spark_batches(batch, layout)


class PushdownReader(PaimonReader):
    """A :class:`PaimonReader` Spark hands its filters (sessions with Python filter pushdown on,
    as :func:`lakehouse.spark.register` sets: Spark refuses a reader with ``pushFilters`` in
    sessions without it)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        """Keep the filters the engine evaluates exactly; hand the others back to Spark."""
        if not self.scan.filter_pushdown or self.scan.incremental is not None:
            return iter(filters)  # changed files are read whole: Spark filters their rows
        types = self.scan.view(self.table).schema.arrow_types()
        self.filter, rejected = to_predicate(filters, types, self.table.name)
        return iter(rejected)


def read_system_table(options: Mapping[str, str]) -> pa.Table:
    """The system table a read names (``db.t$snapshots``, ``sys.all_table_options``...) as the
    engine's catalog serves it, with the read's options (``scan.snapshot-id``, ``scan.tag-name``)."""
    storage = storage_options(options)
    scan = {k: v for k, v in options.items() if k not in ("path", "warehouse") and k not in storage}
    return Catalog(options["warehouse"], storage).get_table(options["path"], scan).read()


class SystemTableReader(DataSourceReader):
    """Reads a (small) system table in one task."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = dict(options)
        self.layout = arrow_layout(schema)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from to_spark_batches(read_system_table(self.options), self.layout)
