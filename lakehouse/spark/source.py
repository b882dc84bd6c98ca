"""The Python data source ``paimon``: which table a read or write addresses, and its schema.

Spark instantiates :class:`PaimonDataSource` from the options of ``spark.read``/``df.write``:
``load("db.table")`` with ``option("warehouse", ...)`` names a catalog table (``db.t$snapshots``,
``sys.all_table_options`` a system table, read in one task with the read's ``scan.snapshot-id``
or ``scan.tag-name``), a path without a warehouse names the table stored there. Time travel takes
Paimon's scan options ``scan.snapshot-id``, ``scan.timestamp-millis`` or ``scan.tag-name``. A
branch: ``load("db.t$branch_b")`` / ``save("db.t$branch_b")``, or the option ``branch``.
``spark.readStream`` streams a table (:mod:`lakehouse.spark.stream`); ``read.changelog=true``
adds each row's kind as a ``_row_kind`` column to batch reads and streams alike.
``df.writeStream.format("paimon")`` writes a streaming query into a table, one snapshot per
micro-batch (:mod:`lakehouse.spark.stream_writer`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from lakehouse import Catalog, Table, is_system_name, storage_options, table_at
from lakehouse.errors import InvalidOptionError
from lakehouse.spark.options import SPARK_OPTIONS
from lakehouse.spark.parallelism import default_parallelism
from lakehouse.spark.reader import (
    PaimonReader,
    PushdownReader,
    SystemTableReader,
    read_schema,
    read_system_table,
)
from lakehouse.spark.stream import PaimonStreamReader
from lakehouse.spark.stream_writer import PaimonStreamWriter
from lakehouse.spark.types import spark_schema_of_arrow
from lakehouse.spark.workers import check_workers
from lakehouse.spark.writer import PaimonWriter

NAME = "paimon"
FILTER_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
REGISTERED = "spark.lakehouse.paimon.registered"  # session setting: the parallelism registered with


def register(spark: SparkSession) -> None:
    """Register the ``paimon`` data source with ``spark`` (once per session: the session's
    settings remember it) and enable filter pushdown for it.

    The registered class carries the session's default parallelism (Python data sources are
    planned in worker processes that cannot ask the session), which sizes the input partitions,
    and reads with filter pushdown.
    """
    parallelism = default_parallelism(spark)
    if spark.conf.get(REGISTERED, None) == str(parallelism):
        return  # registered already: registering again would replace it, with a warning per write
    check_workers(spark)
    spark.conf.set(FILTER_PUSHDOWN, "true")
    settings = {"parallelism": parallelism, "pushdown": True}
    spark.dataSource.register(type(PaimonDataSource.__name__, (PaimonDataSource,), settings))
    spark.conf.set(REGISTERED, str(parallelism))


def open_table(options: Mapping[str, str]) -> Table:
    """The table named by the ``path`` (and ``warehouse``) options of a read or write, with the
    other options as the handle's dynamic options (time travel, buffers, ``branch``...) but those
    of the data source itself and how to reach the store."""
    path = options.get("path")
    if not path:
        raise InvalidOptionError(
            'name the table: load("db.table") / save("db.table") with option("warehouse", ...), '
            "or the table's path"
        )
    warehouse = options.get("warehouse")
    storage = storage_options(options, warehouse)
    dynamic = {k: v for k, v in options.items() if k not in SPARK_OPTIONS and k not in storage}
    if not warehouse:
        return table_at(path, options={**storage, **dynamic})
    if is_system_name(path):
        raise InvalidOptionError(f"{path} is a system table: it can be read, not written or maintained")
    return Catalog(warehouse, options=storage).load_table(path, options=dynamic)


class PaimonDataSource(DataSource):
    """Paimon tables for Spark: reads planned on the driver and run in tasks, batch and streaming
    writes written in tasks and committed by the driver."""

    # set on the class :func:`register` registers (Spark's own lookup of installed data sources
    # takes this one as it is: one input partition per split, no filter pushdown)
    parallelism: int | None = None
    pushdown: bool = False

    @classmethod
    def name(cls) -> str:
        return NAME

    @property
    def _system_table(self) -> bool:
        return bool(self.options.get("warehouse")) and is_system_name(self.options.get("path", ""))

    def schema(self) -> StructType:
        if self._system_table:
            return spark_schema_of_arrow(read_system_table(self.options).schema)
        return read_schema(open_table(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        if self._system_table:
            return SystemTableReader(self.options, schema)
        reader = PushdownReader if self.pushdown else PaimonReader
        return reader(open_table(self.options), self.options, schema, self.parallelism)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        if self._system_table:
            raise InvalidOptionError(
                f"{self.options['path']} is a system table: it can be read, not streamed; stream its table"
            )
        return PaimonStreamReader(open_table(self.options).new_stream_scan(), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PaimonWriter(open_table(self.options), schema, overwrite, dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return PaimonStreamWriter(open_table(self.options), schema, overwrite, dict(self.options))
