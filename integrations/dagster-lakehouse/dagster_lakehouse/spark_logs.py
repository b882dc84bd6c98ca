"""Spark's log in the step's logs: what this process's Spark driver logged (warnings and errors,
see ``lakehouse/spark/log4j2.properties``) and what the session's Python workers printed or
logged (Spark's worker logging, ``spark.tvf.python_worker_logs()``; the data source's tasks, UDFs,
``mapInArrow``) while a step ran, forwarded to the step's Dagster log.

Steps of a run execute one at a time in its process, so every driver line belongs to the step. A
Spark Connect server logs to its own file instead (``lakehouse.spark.connect``), and its shared
session collects the workers of every run connected to it: there the step's log also shows the
worker lines of runs that ran Spark tasks at the same time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dagster import DagsterLogManager

from lakehouse.spark import DRIVER_LOG

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_FORWARDED = 1 << 20  # bytes of one step's Spark driver log shown; the rest stays in the file
MAX_WORKER_LINES = 1000  # worker lines of one step shown; the rest stay in python_worker_logs()
WORKER_LOGGING = "spark.sql.pyspark.worker.logging.enabled"


@contextmanager
def spark_logs(
    log: DagsterLogManager, spark: SparkSession | None = None, path: Path = DRIVER_LOG
) -> Iterator[None]:
    """Forward the lines the driver log gains during the block, and the Python worker output of
    ``spark`` (when its worker logging is on) logged meanwhile, to ``log``."""
    start = path.stat().st_size if path.exists() else 0
    began = datetime.now(UTC)
    try:
        yield
    finally:
        if path.exists() and path.stat().st_size > start:
            with path.open("rb") as f:
                f.seek(start)
                text = f.read(MAX_FORWARDED).decode(errors="replace")
            for line in text.splitlines():
                (log.error if line.startswith("ERROR") else log.warning)(f"Spark: {line}")
        if spark is not None and spark.conf.get(WORKER_LOGGING, "false") == "true":
            _forward_worker_logs(log, spark, began)


def _forward_worker_logs(log: DagsterLogManager, spark: SparkSession, since: datetime) -> None:
    """The worker log records of ``spark`` stamped at or after ``since``, oldest first, each at
    its own level."""
    logs = spark.tvf.python_worker_logs()
    rows = (
        logs.where(logs["ts"] >= since)
        .orderBy("ts")
        .select("level", "logger", "msg", logs["exception.class"].alias("error"))
        .limit(MAX_WORKER_LINES + 1)
        .collect()
    )
    for row in rows[:MAX_WORKER_LINES]:
        emit = {"DEBUG": log.debug, "INFO": log.info, "WARNING": log.warning}.get(row.level, log.error)
        error = f" ({row.error})" if row.error else ""
        emit(f"Python worker [{row.logger}]: {row.msg}{error}")
    if len(rows) > MAX_WORKER_LINES:
        log.warning(
            f"Python worker: more than {MAX_WORKER_LINES} lines in this step; the rest are in the "
            f"session's spark.tvf.python_worker_logs()"
        )
