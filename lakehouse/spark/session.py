"""A SparkSession ready for the ``paimon`` data source: local, on a cluster, or over Spark Connect.

``master`` picks the kind:

- ``sc://host:port``: a Spark Connect server (:mod:`lakehouse.spark.connect` starts one). The
  session is a thin client; the server's Python workers must have this package installed.
- ``local[n]``: Spark in this process's JVM. Its Python workers are pinned to this interpreter
  and to the directory this package is imported from, so they run the same code as the driver,
  and it listens on the loopback interface only (``spark.driver.bindAddress``/``host`` and
  ``SPARK_LOCAL_IP`` 127.0.0.1) unless ``conf`` says otherwise.
- ``spark://host:port`` (or any other master URL): a cluster. Nothing is pinned: the workers run
  the interpreter ``spark.pyspark.python`` names in ``conf`` (else their ``PYSPARK_PYTHON``),
  which must have this package installed; no path of this machine is handed to them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

import lakehouse
from lakehouse.spark.source import register

LOOPBACK = "127.0.0.1"
PROJECT_ROOT = str(Path(lakehouse.__file__).resolve().parent.parent)
CONNECT = "sc://"
UTC = {"spark.sql.session.timeZone": "UTC"}


def worker_pythonpath() -> str:
    """This package's root first, then the driver's ``PYTHONPATH``."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != PROJECT_ROOT]
    return os.pathsep.join([PROJECT_ROOT, *inherited])


def session(
    master: str = "local[2]", app_name: str = "lakehouse", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create a SparkSession on ``master`` (a master URL or a Spark Connect URL) with the
    ``paimon`` data source registered; ``conf``: Spark settings (over Spark Connect, the runtime
    ones: the server's own are fixed when it starts)."""
    if master.startswith(CONNECT):
        spark = _connect(master)
        for key, value in {**UTC, **(conf or {})}.items():
            spark.conf.set(key, value)
    else:
        builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.enabled", "false")
        settings = {**UTC, **(_local_settings() if master.startswith("local") else {}), **(conf or {})}
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    register(spark)
    return spark


def _connect(url: str) -> SparkSession:
    """A Spark Connect session. PySpark's builder also switches the process to Connect mode
    (``pyspark.sql.functions`` then build Connect columns); in a process already running a
    local session it refuses, and the Connect client's own builder connects instead (see
    :mod:`lakehouse.spark.kinds` for building columns there)."""
    try:
        return SparkSession.builder.remote(url).getOrCreate()
    except PySparkRuntimeError as e:
        if e.getCondition() != "SESSION_ALREADY_EXIST":
            raise
        return RemoteSparkSession.builder.remote(url).getOrCreate()


def _local_settings() -> dict[str, str]:
    """Python workers on this interpreter and code, the driver on loopback.

    Sets ``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` in this process's environment (PySpark reads
    the first when the session starts, ``spark.pyspark.python`` alone only reaches spark-submit
    launches; Spark resolves its own address before reading the conf and would warn that it uses
    the machine's network address)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": worker_pythonpath(),
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
    }
