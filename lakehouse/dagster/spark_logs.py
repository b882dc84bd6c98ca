"""Spark's log in the step's logs: what this process's Spark driver logged (warnings and errors,
see ``lakehouse/spark/log4j2.properties``) while a step ran, forwarded to the step's Dagster log.
Steps of a run execute one at a time in its process, so every line belongs to the step. A Spark
Connect server logs to its own file instead (``lakehouse.spark.connect``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterLogManager

from lakehouse.spark.session import DRIVER_LOG

MAX_FORWARDED = 1 << 20  # bytes of one step's Spark log shown; the rest stays in the file


@contextmanager
def spark_logs(log: DagsterLogManager, path: Path = DRIVER_LOG) -> Iterator[None]:
    """Forward the lines the driver log gains during the block to ``log``."""
    start = path.stat().st_size if path.exists() else 0
    try:
        yield
    finally:
        if path.exists() and path.stat().st_size > start:
            with path.open("rb") as f:
                f.seek(start)
                text = f.read(MAX_FORWARDED).decode(errors="replace")
            for line in text.splitlines():
                (log.error if line.startswith("ERROR") else log.warning)(f"Spark: {line}")
