"""Spark for Paimon tables: the ``paimon`` Python data source, column-pruned native reads, routed
batch and streaming writes, maintenance jobs.

Needs the ``spark`` extra (``pip install 'lakehouse[spark]'``): without PySpark, importing this
package raises :class:`~lakehouse.errors.MissingExtraError`.
"""

from lakehouse.errors import MissingExtraError

try:
    import pyspark  # noqa: F401 (what the extra installs)
except ImportError as e:
    raise MissingExtraError("lakehouse.spark", "spark", e) from e

from lakehouse.spark.connect import SPARK_ENV
from lakehouse.spark.kinds import functions_for
from lakehouse.spark.maintenance import (
    compact,
    expire_partitions,
    expire_snapshots,
    remove_orphan_files,
    rewrite_file_index,
    sort_compact,
)
from lakehouse.spark.native_read import read, read_changes
from lakehouse.spark.routing import write, write_stream
from lakehouse.spark.session import CONNECT, DRIVER_LOG, session
from lakehouse.spark.source import register
from lakehouse.spark.types import arrow_layout, spark_schema, spark_schema_of_arrow, spark_type

__all__ = [
    "CONNECT",
    "DRIVER_LOG",
    "SPARK_ENV",
    "arrow_layout",
    "compact",
    "expire_partitions",
    "expire_snapshots",
    "functions_for",
    "read",
    "read_changes",
    "register",
    "remove_orphan_files",
    "rewrite_file_index",
    "session",
    "sort_compact",
    "spark_schema",
    "spark_schema_of_arrow",
    "spark_type",
    "write",
    "write_stream",
]
