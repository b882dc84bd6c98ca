"""A session whose Python workers cannot run the engine is refused with a typed error when the data
source is registered, not deep inside Spark at the first read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import venv

import pytest

pytestmark = pytest.mark.spark

SESSION = """\
import os
os.environ["PYSPARK_PYTHON"] = {python!r}
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("OFF")
from lakehouse.errors import WorkerEnvironmentError
from lakehouse.spark import register
try:
    register(spark)
    print("registered")
except WorkerEnvironmentError as e:
    print("refused:", e)
"""


def registration(python: str) -> str:
    """What registering the data source prints in a fresh local session whose workers run ``python``."""
    script = textwrap.dedent(SESSION.format(python=python))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_workers_without_the_engine_are_a_typed_error_that_says_what_to_set(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a Python without the engine, as the machine's python3 is
    out = registration(str(bare / "bin" / "python"))
    assert out.startswith("refused:"), out
    assert "spark.pyspark.python" in out and "PYSPARK_PYTHON" in out and sys.executable in out


def test_workers_with_the_engine_register(tmp_path):
    assert registration(sys.executable).strip() == "registered"
