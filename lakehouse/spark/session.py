"""A local SparkSession ready for the ``paimon`` data source.

Spark starts Python workers with ``$PYSPARK_PYTHON`` (default: the machine's ``python3``) and its
own ``PYTHONPATH``; both are pinned here to the current interpreter and to the directory this
package is imported from, so workers run the same code with the same libraries as the driver.
A local session listens on the loopback interface only (``spark.driver.bindAddress`` and
``spark.driver.host`` 127.0.0.1, and ``SPARK_LOCAL_IP`` unless set) unless ``conf`` says otherwise:
nothing on the network reaches it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

import lakehouse
from lakehouse.spark.source import register

LOOPBACK = "127.0.0.1"
PROJECT_ROOT = str(Path(lakehouse.__file__).resolve().parent.parent)


def worker_pythonpath() -> str:
    """This package's root first, then the driver's ``PYTHONPATH``."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != PROJECT_ROOT]
    return os.pathsep.join([PROJECT_ROOT, *inherited])


def session(
    master: str = "local[2]", app_name: str = "lakehouse", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create a SparkSession whose Python workers use this interpreter and this code,
    with the ``paimon`` data source registered.

    Sets ``PYSPARK_PYTHON`` in this process's environment (PySpark reads it when the session
    starts; ``spark.pyspark.python`` alone only reaches spark-submit launches).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", worker_pythonpath())
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
    )
    if master.startswith("local"):
        # Spark resolves its own address before reading the conf: without this it warns that it
        # uses the machine's network address (it then binds where the conf says).
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config("spark.driver.host", LOOPBACK)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
