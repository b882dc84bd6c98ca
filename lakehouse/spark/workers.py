"""Whether a session's Python workers can run the engine, asked once when the data source is
registered.

Spark starts its Python workers with ``spark.pyspark.python`` (else ``PYSPARK_PYTHON``, else the
machine's ``python3``), not with the interpreter of the process that built the session: a venv's
``python`` run without activating the venv gets workers without the engine, and every read or
write would fail deep inside Spark with ``No module named 'pyarrow'``. :func:`check_workers` runs
one tiny task that imports the engine and turns that failure into a
:class:`~lakehouse.errors.WorkerEnvironmentError` that says what to set.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from lakehouse.errors import WorkerEnvironmentError

# how a worker reports a missing package: Python's import error, or PySpark's own check for pyarrow
_MISSING = re.compile(r"No module named '([^']+)'|PACKAGE_NOT_INSTALLED\] (\w+)")


def check_workers(spark: SparkSession) -> None:
    """Raise :class:`WorkerEnvironmentError` when ``spark``'s Python workers cannot import the
    engine (one task of one row; the data source's first reads warm the same workers)."""
    try:
        spark.range(1, numPartitions=1).mapInArrow(_import_engine, "ok boolean").collect()
    except Exception as e:
        missing = _MISSING.search(str(e))
        if missing is None:
            raise
        package = missing[1] or missing[2]
        raise WorkerEnvironmentError(
            f"Spark's Python workers cannot import {package!r}: they run another Python than this "
            f"process ({sys.executable}), one without the lakehouse engine. Set spark.pyspark.python "
            f"(or the PYSPARK_PYTHON environment variable) to an interpreter that has the engine "
            f"installed with its 'spark' extra - here {sys.executable} - before the session starts; "
            f"on a cluster, install it into the workers' Python"
        ) from None


def _import_engine(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Nothing: unpickled in a worker, it imports this package - the engine and the data source,
    what every task of the data source imports."""
    for _ in batches:
        pass
    yield pa.record_batch([pa.array([True])], names=["ok"])
