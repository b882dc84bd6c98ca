"""Streaming queries that stop inside the commit of one micro-batch, for the test to kill them there.

:func:`run` (in a process of its own) starts, side by side, one query per table: each streams the
Parquet files of a directory, one file per micro-batch, into its table through ``paimon_pausing``:
the ``paimon`` data source whose commit of batch ``pause.batch`` writes the file ``pause.marker``
and waits - ``before`` committing (the batch's files are written, not committed) or ``after``
(committed, but Spark has not logged the batch as done) - until the test kills the process and
its JVM. One process for every query: a JVM is started once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql.types import StructType

from lakehouse.spark.source import PaimonDataSource, open_table
from lakehouse.spark.stream_writer import PaimonStreamWriter
from lakehouse.spark.writer import TaskCommit
from lakehouse.table.table import Table

HOLD_S = 300  # how long a paused commit waits for its kill before it exits without committing


class PausingStreamWriter(PaimonStreamWriter):
    def __init__(self, table: Table, schema: StructType, overwrite: bool, options: Mapping[str, str]) -> None:
        super().__init__(table, schema, overwrite, options)
        self.batch, self.at, self.marker = (
            int(options["pause.batch"]),
            options["pause.at"],
            options["pause.marker"],
        )

    def commit(self, messages: list[TaskCommit | None], batchId: int) -> None:
        if batchId == self.batch and self.at == "before":
            self._hold()
        super().commit(messages, batchId)
        if batchId == self.batch and self.at == "after":
            self._hold()

    def _hold(self) -> None:
        Path(self.marker).write_text(str(os.getpid()))
        time.sleep(HOLD_S)
        os._exit(1)


class PausingSource(PaimonDataSource):
    @classmethod
    def name(cls) -> str:
        return "paimon_pausing"

    def streamWriter(self, schema: StructType, overwrite: bool) -> PausingStreamWriter:
        return PausingStreamWriter(open_table(self.options), schema, overwrite, dict(self.options))


def run(warehouse: str, batch: str, *queries: str) -> None:
    """Stream into tables of ``warehouse``, each query (``table,source,checkpoint,at,marker``)
    pausing in the commit of ``batch``; returns when every query has ended."""
    from lakehouse.spark import session

    spark = session(conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PausingSource)
    started = []
    for query in queries:
        table, source, checkpoint, at, marker = query.split(",")
        stream = spark.readStream.schema(spark.read.parquet(source).schema).option("maxFilesPerTrigger", 1)
        pause = {"pause.batch": batch, "pause.at": at, "pause.marker": marker}
        sink = stream.parquet(source).writeStream.format("paimon_pausing").option("warehouse", warehouse)
        sink = sink.options(**pause).option("checkpointLocation", checkpoint).trigger(availableNow=True)
        started.append(sink.start(table))
    for query in started:
        query.awaitTermination()
