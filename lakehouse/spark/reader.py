"""Distributed reads: the splits of the engine's plan in Spark input partitions, Arrow batches out.

The read is the engine's (``table.new_read_builder()``), with the read's options as the table
handle's dynamic options: time travel (``scan.snapshot-id``, ``scan.timestamp-millis``,
``scan.tag-name``), ``incremental-between`` ("start,end": the changes of snapshots
``start+1 .. end``, with ``streaming-read-overwrite`` the files overwrites added), ``read.changelog``
(each row with its kind, a ``_row_kind`` column). Input partitions are sized for the session's
default parallelism like Spark's own file sources (``Plan.groups``: few tasks, since each costs a
Python worker round trip); a task reads its splits one after the other, files of splits that need
no key merge one by one.

Spark calls ``pushFilters`` then ``partitions`` on the driver and ``read`` in its tasks, on a
pickled copy of the reader made *before* ``partitions`` runs: everything a task needs travels in
the reader (the read builder, the pushed filter, Spark's schema) or in its :class:`SplitPartition`.

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

from lakehouse import ROW_KIND, Catalog, Plan, Predicate, ReadBuilder, Split, Table, storage_options
from lakehouse.spark.filters import to_predicate
from lakehouse.spark.options import FILTER_PUSHDOWN, flag
from lakehouse.spark.types import arrow_layout, spark_schema, to_spark_batches


def read_schema(table: Table) -> StructType:
    """The Spark schema of a read of ``table`` (its handle's options say which snapshot): the
    columns of that snapshot's schema, then ``_row_kind`` with ``read.changelog``."""
    builder = table.new_read_builder()
    schema = spark_schema(builder.schema.fields)
    return (
        schema.add(ROW_KIND, StringType(), nullable=False)
        if ROW_KIND in builder.read_schema.names
        else schema
    )


@dataclass(frozen=True)
class SplitPartition(InputPartition):
    """Splits one task reads one after the other."""

    splits: tuple[Split, ...]


class PaimonReader(DataSourceReader):
    """Plans a table scan with the pushed filters and reads its splits in Spark tasks.

    ``parallelism``: the session's default parallelism, which the input partitions are sized for
    (None: one input partition per split).
    """

    def __init__(
        self, table: Table, options: Mapping[str, str], schema: StructType, parallelism: int | None = None
    ) -> None:
        self.builder = table.new_read_builder()  # resolves the snapshot read: tasks get this one
        self.pushdown = flag(options, FILTER_PUSHDOWN) and self.builder.incremental is None
        self.layout = arrow_layout(schema)
        self.parallelism = parallelism
        self.filter: Predicate | None = None

    def _builder(self) -> ReadBuilder:
        return self.builder.with_filter(self.filter)

    def plan(self) -> Plan:
        """The engine's plan of this read (its ``stats`` show what the pushed filters pruned)."""
        return self._builder().new_scan().plan()

    def partitions(self) -> Sequence[InputPartition]:
        return [SplitPartition(tuple(group)) for group in self.plan().groups(self.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SplitPartition):
            return  # an empty table: Spark reads one placeholder partition
        yield from read_splits(self._builder(), partition.splits, self.layout)


def read_splits(builder: ReadBuilder, splits: Sequence[Split], layout: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of ``splits`` as ``builder`` reads them, as Arrow batches of Spark's ``layout``,
    split after split, a batch at a time (the next split opened while one is read)."""
    for batch in builder.new_read().stream(splits):
        yield from to_spark_batches(batch, layout)


class PushdownReader(PaimonReader):
    """A :class:`PaimonReader` Spark hands its filters (sessions with Python filter pushdown on,
    as :func:`lakehouse.spark.register` sets: Spark refuses a reader with ``pushFilters`` in
    sessions without it)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        """Keep the filters the engine evaluates exactly; hand the others back to Spark."""
        if not self.pushdown:
            return iter(filters)  # changed files are read whole: Spark filters their rows
        self.filter, rejected = to_predicate(filters, self.builder.schema.arrow_schema)
        return iter(rejected)


def read_system_table(options: Mapping[str, str]) -> pa.Table:
    """The system table a read names (``db.t$snapshots``, ``sys.all_table_options``...) as the
    engine's catalog serves it, with the read's options (``scan.snapshot-id``, ``scan.tag-name``)."""
    storage = storage_options(options, options.get("warehouse"))
    scan = {k: v for k, v in options.items() if k not in ("path", "warehouse") and k not in storage}
    return Catalog(options["warehouse"], options=storage).get_table(options["path"], options=scan).read()


class SystemTableReader(DataSourceReader):
    """Reads a (small) system table in one task."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = dict(options)
        self.layout = arrow_layout(schema)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from to_spark_batches(read_system_table(self.options), self.layout)
