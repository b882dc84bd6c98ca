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

from lakehouse.spark.maintenance import (
    compact,
    expire_partitions,
    expire_snapshots,
    remove_orphan_files,
    rewrite_file_index,
    sort_compact,
)
from lakehouse.spark.native_read import read
from lakehouse.spark.routing import write, write_stream
from lakehouse.spark.session import session
from lakehouse.spark.source import register

__all__ = [
    "compact",
    "expire_partitions",
    "expire_snapshots",
    "read",
    "register",
    "remove_orphan_files",
    "rewrite_file_index",
    "session",
    "sort_compact",
    "write",
    "write_stream",
]
