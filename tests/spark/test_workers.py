"""A session whose Python workers cannot run the engine is refused with a typed error when the data
source is registered, not deep inside Spark at the first read."""

from __future__ import annotations

import subprocess
import sys
import venv

import pytest

pytestmark = pytest.mark.spark

SESSIONS = """\
import os, sys
from pyspark.sql import SparkSession
from lakehouse.errors import WorkerEnvironmentError
from lakehouse.spark import register
for python in sys.argv[1:]:  # one session after another in one JVM, each with workers of its python
    os.environ["PYSPARK_PYTHON"] = python
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    try:
        register(spark)
        print("registered")
    except WorkerEnvironmentError as e:
        print("refused:", str(e).replace(chr(10), " "))
    spark.stop()
"""


def registrations(*pythons: str) -> list[str]:
    """What registering the data source prints in fresh local sessions whose workers run each of
    ``pythons`` (one process: a JVM is started once)."""
    done = subprocess.run(
        [sys.executable, "-c", SESSIONS, *pythons], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_registration_refuses_workers_without_the_engine_saying_what_to_set(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a Python without the engine, as the machine's python3 is
    refused, registered = registrations(str(bare / "bin" / "python"), sys.executable)
    assert refused.startswith("refused:"), refused
    assert "spark.pyspark.python" in refused and "PYSPARK_PYTHON" in refused and sys.executable in refused
    assert registered == "registered"
