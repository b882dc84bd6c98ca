"""The Python worker daemon of Spark sessions that run the ``paimon`` data source.

Spark starts one daemon per Python environment (per session over Spark Connect) and forks a worker
from it for every task that finds no idle one: the first tasks of a session, and every task after
one whose worker Spark did not keep (a task that stops reading early, as ``limit`` does, loses
its worker). A worker forked from PySpark's own daemon imports pyarrow and the engine when it
unpickles its first function, over a second on a small machine; forked from this one, which
imports them before it forks, it starts at once. Spark runs it with
``spark.python.daemon.module=lakehouse.spark.daemon``, which :func:`lakehouse.spark.session`
(:data:`lakehouse.spark.session.DAEMON`) and the servers of :mod:`lakehouse.spark.connect` set.

Spark puts its ``pyspark.zip`` first on the workers' ``PYTHONPATH``, so they import PySpark from
that archive, whose modules Python compiles in every process that imports them (it keeps no
bytecode for an archive). PySpark's daemon imports the worker's module (``pyspark.worker``, some
4,000 lines) after each fork, compiling it again for every worker; this one imports it once,
before it forks (:func:`preload`).
"""

import importlib
import sys

from pyspark.daemon import manager

import lakehouse.spark.source  # noqa: F401 (the engine and the data source, imported once for every worker)


def preload(argv: list[str]) -> None:
    """Import the worker module that a daemon started with ``argv`` runs in each fork (as
    PySpark's daemon names it: its first argument, when that is a ``pyspark`` module)."""
    if len(argv) > 1 and argv[1].startswith("pyspark"):
        importlib.import_module(argv[1])


if __name__ == "__main__":
    preload(sys.argv)
    manager()
