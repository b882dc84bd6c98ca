"""The ``paimon`` data source with write tasks that die on purpose, for the Spark fault tests.

Registered as ``paimon_dying``; write options choose the death: ``fault.mode`` ``raise`` (an
exception), ``exit`` (``os._exit``: no clean-up runs) or ``kill`` (SIGKILL of the Python worker),
in task ``fault.partition`` once it received ``fault.after-batches`` batches; every other task
sleeps ``fault.slow-ms`` per batch, so that it is still writing when the job fails.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceWriter
from pyspark.sql.types import StructType

from lakehouse import CompactionJob
from lakehouse.paths import FileNamer
from lakehouse.spark.source import PaimonDataSource, open_table
from lakehouse.spark.writer import PaimonWriter, TaskCommit
from lakehouse.table.table import Table


class DyingWriter(PaimonWriter):
    def __init__(self, table: Table, schema: StructType, overwrite: bool, options: Mapping[str, str]) -> None:
        super().__init__(table, schema, overwrite, options)
        self.fault = {k: v for k, v in options.items() if k.startswith("fault.")}

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        return super().write(self._dying(iterator))

    def _dying(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        options = self.fault
        victim = TaskContext.get().partitionId() == int(options["fault.partition"])
        for i, batch in enumerate(batches):
            if victim and i == int(options["fault.after-batches"]):
                die(options["fault.mode"])
            if not victim:
                time.sleep(int(options.get("fault.slow-ms", "0")) / 1000)
            yield batch


def die(mode: str) -> None:
    if mode == "raise":
        raise RuntimeError("the task dies on purpose")
    if mode == "exit":
        os._exit(3)
    os.kill(os.getpid(), signal.SIGKILL)


class DyingSource(PaimonDataSource):
    @classmethod
    def name(cls) -> str:
        return "paimon_dying"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return DyingWriter(open_table(self.options), schema, overwrite, dict(self.options))


class CompactThenDie(CompactionJob):
    """A full compaction job whose run in Spark partition ``victim`` dies (``os._exit``) after
    compacting its buckets, before returning what it wrote."""

    def __init__(self, table: Table, victim: int) -> None:
        super().__init__(table.store, full=True)
        self.victim = victim

    def rewrite(self, units: list, names: FileNamer) -> list:
        messages = super().rewrite(units, names)
        if TaskContext.get().partitionId() == self.victim:
            os._exit(3)
        return messages


LEASES = {"write.heartbeat-interval": "100 ms", "write.heartbeat-timeout": "2 s"}


def table_files(root: str) -> list[str]:
    """Every file of the table but its schema files, relative to the table."""
    found = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
    return sorted(f for f in found if not f.startswith("schema"))


def orders_df(spark, n: int):
    return spark.range(0, n, numPartitions=2).selectExpr(
        "id AS order_id",
        "IF(id % 2 = 0, '2024-01-01', '2024-01-02') AS dt",
        "CAST(id % 7 AS INT) AS user_id",
        "CAST(id AS DOUBLE) AS price",
        "'PAID' AS status",
    )
