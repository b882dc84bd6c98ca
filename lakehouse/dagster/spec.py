"""A Paimon table declared once: its schema, keys, options, upstream tables and the PySpark
transformation that fills it. :mod:`lakehouse.dagster.factory` turns specs into assets, checks and sensors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from dagster import AssetKey

from lakehouse import Catalog, Table
from lakehouse.dagster.publish import Publish
from lakehouse.schema import TableSchema, new_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PARTITION_COLUMN = "dt"  # daily partitions of the assets map to this table partition


@dataclass(frozen=True)
class Inputs:
    """What a transformation gets: the Spark session, the run's days (one, or the range of a
    backfill run; None when unpartitioned) and its upstream tables as DataFrames, read by
    :func:`lakehouse.spark.read`."""

    spark: SparkSession
    days: tuple[str, ...] | None
    warehouse: str
    storage: Mapping[str, str] = field(default_factory=dict)  # how to reach the warehouse's store

    def read(self, table: str, columns: Sequence[str] | None = None) -> DataFrame:
        """An upstream table - ``columns`` of it (default all), the only ones read - in the run's
        ``dt`` partitions when the run has days (pruned when the read is planned: the other
        partitions' files are not read)."""
        from lakehouse.spark import read
        from lakehouse.spark.kinds import functions_for

        where = None
        if self.days is not None:
            where = functions_for(self.spark).col(PARTITION_COLUMN).isin(list(self.days))
        return read(self.spark, table, columns=columns, where=where, warehouse=self.warehouse,
                    options=self.storage)  # fmt: skip


@dataclass(frozen=True)
class TableSpec:
    """One table of the lakehouse and how a materialization writes it.

    ``write``: ``"upsert"`` appends rows (upserts on primary-key tables), ``"overwrite"``
    replaces the run's partitions (dynamic partition overwrite), which makes reruns idempotent
    for tables whose merge engine accumulates (aggregation). ``publish=Publish.AUDITED`` writes
    to a branch of the run that only reaches ``main`` once the table's checks pass on it
    (:mod:`lakehouse.dagster.publish`; the checks are then blocking).
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

    @property
    def key(self) -> AssetKey:
        return asset_key(self.name)

    @property
    def daily(self) -> bool:
        return PARTITION_COLUMN in self.partition_keys

    @property
    def table_schema(self) -> TableSchema:
        """The Paimon schema the table is created with (validated: a bad spec fails at load)."""
        return new_schema(self.name, self.schema, list(self.primary_keys), list(self.partition_keys),
                          dict(self.options))  # fmt: skip

    def ensure(self, catalog: Catalog) -> Table:
        """The table, created as declared on first use."""
        database = self.name.split(".")[0]
        catalog.create_database(database, ignore_if_exists=True)
        return catalog.create_table(
            self.name,
            schema=self.schema,
            primary_keys=list(self.primary_keys),
            partition_keys=list(self.partition_keys),
            options=dict(self.options),
            ignore_if_exists=True,
        )


def asset_key(table: str) -> AssetKey:
    """``db.table`` -> the asset key ``["db", "table"]``."""
    return AssetKey(table.split("."))
