"""A Paimon table declared once: its schema, keys, options, upstream tables and the PySpark
transformation that fills it. :mod:`dagster_lakehouse.factory` turns specs into assets, checks and sensors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from dagster import AssetKey

from dagster_lakehouse.incremental import Increment, snapshot_frame, spark_changes
from dagster_lakehouse.metadata import PARTITION_ROW_COUNT, ROW_COUNT
from dagster_lakehouse.publish import Publish
from lakehouse import Catalog, IcebergStorage, Predicate, Table, TableSchema, col, define_table
from lakehouse.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PARTITION_COLUMN = "dt"  # daily partitions of the assets map to this table partition


@dataclass(frozen=True)
class Inputs:
    """What a transformation gets: the Spark session, the run's days (one, or the range of a
    backfill run; None when unpartitioned) and its upstream tables as DataFrames, read by
    :func:`lakehouse.spark.read`; for an incremental table (``increment``) also what they changed
    since its last materialization (:mod:`dagster_lakehouse.incremental`)."""

    spark: SparkSession
    days: tuple[str, ...] | None
    warehouse: str
    storage: Mapping[str, str] = field(default_factory=dict)  # how to reach the warehouse's store
    table: str | None = None  # the table being materialized
    increment: Increment | None = None
    reads: list[tuple[str, DataFrame]] = field(default_factory=list)  # every table read, as read

    def read(
        self, table: str, columns: Sequence[str] | None = None, where: Predicate | None = None
    ) -> DataFrame:
        """An upstream table - ``columns`` of it (default all), the only ones read - in the run's
        ``dt`` partitions when the run has days, its rows matching ``where`` (an engine predicate
        such as ``col("status") == "PAID"``; both pruned when the read is planned: the other
        partitions' files, and files the filter rules out, are not read). An incremental run
        reads all of it, as of the snapshot its changes end at."""
        if self.increment is None:
            return self._read(table, columns, self.days, where=where)
        return self._read(table, columns, None, self.increment.position(table).end, where)

    def changes(self, table: str) -> DataFrame:
        """What an upstream table changed since this table's last materialization, with a
        ``_row_kind`` column (``+I``, ``-U``, ``+U``, ``-D``): its changes, but the rows of days
        it replaced (and in a full run, :attr:`full`, all of its rows) whole, as ``+I``."""
        if self.increment is None:
            raise InvalidArgumentError(
                f"table {self.table}: Inputs.changes({table!r}) reads changes since the last "
                f"materialization, which only incremental tables have; declare the spec incremental=True"
            )
        position = self.increment.position(table)
        frame = spark_changes(self.spark, table, position, self.warehouse, self.storage, PARTITION_COLUMN)
        self.reads.append((table, frame))
        return frame

    @property
    def full(self) -> bool:
        """Whether this incremental run reads its upstream tables whole and replaces its table."""
        return self.increment is not None and self.increment.full

    def previous(self) -> DataFrame:
        """This table's rows before the run, but none of the days the run replaces (none at all in
        a full run): for transformations that fold changes into the current state."""
        if self.table is None:
            raise InvalidArgumentError(
                "Inputs.previous() reads the table being materialized, and these inputs name none (table=)"
            )
        if self.full:
            return self._read(self.table, None, None).limit(0)
        replaced = self.increment.replaced if self.increment is not None else ()
        return self._read(
            self.table, None, None, where=~col(PARTITION_COLUMN).isin(replaced) if replaced else None
        )

    def _read(
        self,
        table: str,
        columns: Sequence[str] | None,
        days: Sequence[str] | None,
        snapshot: int | None = None,
        where: Predicate | None = None,
    ) -> DataFrame:
        """``columns`` of ``table`` matching ``where`` in ``days`` (None: all) as of ``snapshot``
        (None: the latest)."""
        if days is not None:
            in_days = col(PARTITION_COLUMN).isin(days)
            where = in_days if where is None else in_days & where
        frame = snapshot_frame(self.spark, table, snapshot, self.warehouse, self.storage, columns, where)
        self.reads.append((table, frame))
        return frame


@dataclass(frozen=True)
class Bounds:
    """Inclusive bounds of a number every materialization reports under a metadata key (None: no
    bound on that side): ``Bounds(min=1)`` on ``dagster/partition_row_count`` fails an empty day."""

    min: float | None = None
    max: float | None = None


ICEBERG_STORAGE = "metadata.iceberg.storage"


@dataclass(frozen=True)
class TableSpec:
    """One table of the lakehouse and how a materialization writes it.

    ``write``: ``"upsert"`` appends rows (upserts on primary-key tables), ``"overwrite"``
    replaces the run's partitions (dynamic partition overwrite), which makes reruns idempotent
    for tables whose merge engine accumulates (aggregation). ``publish=Publish.AUDITED`` writes
    to a branch of the run that only reaches ``main`` once the table's checks pass on it
    (:mod:`dagster_lakehouse.publish`; the checks are then blocking). ``incremental=True``: the
    transformation reads :meth:`Inputs.changes` of its upstream tables and its rows are upserted
    exactly once, or replace the table in a full run (:mod:`dagster_lakehouse.incremental`);
    ``write`` does not apply.

    Dagster's ready-made checks run after every materialization, with WARN severity:
    ``schema_changes`` fails when the table's columns changed since the previous one, ``bounds``
    when a number it reports (a metadata key) leaves its bounds; by default a day without rows
    (a table without daily partitions: a table without rows) fails.
    """

    name: str  # "db.table"
    schema: pa.Schema
    transform: Callable[[Inputs], DataFrame]
    primary_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = (PARTITION_COLUMN,)
    options: Mapping[str, str] = field(default_factory=dict)
    upstream: tuple[str, ...] = ()
    write: Literal["upsert", "overwrite"] = "upsert"
    description: str = ""
    owners: tuple[str, ...] = ()  # Dagster owners: "team:name" or an email
    fresh_by: str | None = None  # cron by which the table must have been materialized (freshness)
    index_checks: bool = False  # verify file indexes, deletion vectors, hash index after writes
    blocking_checks: bool = False  # a failed check stops downstream materializations
    publish: Publish = Publish.DIRECT  # AUDITED: write-audit-publish through a run branch
    incremental: bool = False  # fed by the upstream changes since its last materialization
    pipes: bool = False  # its Spark step runs on a cluster through Dagster Pipes (the pipes resource)
    schema_changes: bool = True  # a check that its columns did not change since the last run
    bounds: Mapping[str, Bounds] | None = None  # metadata key -> bounds (None: rows in the run's day)
    iceberg: bool = False  # Iceberg-compatible metadata in <table>/metadata, unless the options say where

    @property
    def key(self) -> AssetKey:
        return asset_key(self.name)

    @property
    def daily(self) -> bool:
        return PARTITION_COLUMN in self.partition_keys

    @property
    def metadata_bounds(self) -> Mapping[str, Bounds]:
        """The bounds its checks hold it to: ``bounds``, else rows in the day (in the table)."""
        if self.bounds is not None:
            return self.bounds
        return {PARTITION_ROW_COUNT if self.daily else ROW_COUNT: Bounds(min=1)}

    @property
    def table_options(self) -> dict[str, str]:
        """The options the table is created with: ``options``, and with ``iceberg`` Iceberg
        metadata next to the table unless they say where."""
        iceberg = {ICEBERG_STORAGE: IcebergStorage.TABLE_LOCATION.value} if self.iceberg else {}
        return {**iceberg, **self.options}

    @property
    def table_schema(self) -> TableSchema:
        """The Paimon schema the table is created with (validated: a bad spec fails at load)."""
        return define_table(self.name, self.schema, primary_keys=list(self.primary_keys),
                            partition_keys=list(self.partition_keys), options=self.table_options)  # fmt: skip

    def ensure(self, catalog: Catalog) -> Table:
        """The table, created as declared on first use."""
        database = self.name.split(".")[0]
        catalog.create_database(database, ignore_if_exists=True)
        return catalog.create_table(
            self.name,
            schema=self.schema,
            primary_keys=list(self.primary_keys),
            partition_keys=list(self.partition_keys),
            options=self.table_options,
            ignore_if_exists=True,
        )


def asset_key(table: str) -> AssetKey:
    """``db.table`` -> the asset key ``["db", "table"]``."""
    return AssetKey(table.split("."))
