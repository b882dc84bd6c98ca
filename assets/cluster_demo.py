"""``make cluster-demo``: the example on a real Spark cluster with its warehouse on S3, all on
loopback.

Starts an S3-compatible server and a Spark standalone cluster (a master and two workers, each
with its own working directory), then runs :mod:`assets.demo` for two days against them from an
empty directory: every table file goes through S3, every Spark task runs in an executor of a
worker; the snapshot files are created with conditional puts. Stops everything at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from assets.s3_server import S3Server
from lakehouse.spark.connect import SPARK_ENV
from lakehouse.spark.standalone import StandaloneCluster

DAYS = 2


@dataclass(frozen=True)
class DemoRun:
    """A finished demo whose S3 server still serves the warehouse."""

    exit_code: int
    warehouse: str  # s3://...
    s3: S3Server


@contextmanager
def demo_on_cluster(root: str | None = None) -> Iterator[DemoRun]:
    """Run the demo; ``root``: where the cluster's logs and working directories and the driver's
    empty working directory go (default: new temporary directories). Everything stops when the
    block ends."""
    with S3Server() as s3, StandaloneCluster(workers=2, cores=1, root=root) as cluster:
        warehouse = f"s3://{s3.bucket()}/warehouse"
        scratch = str(cluster.root / "driver")
        os.makedirs(scratch)
        env = {
            **os.environ,
            **s3.environment,
            "LAKEHOUSE_WAREHOUSE": warehouse,
            SPARK_ENV: cluster.url,
            "PYSPARK_PYTHON": sys.executable,  # the workers' interpreter (this machine's venv)
            "SPARK_LOCAL_IP": "127.0.0.1",
            "DAGSTER_HOME": os.path.join(scratch, "dagster_home"),
        }
        print(f"cluster {cluster.url} (logs in {cluster.root}), S3 at {s3.endpoint}", flush=True)
        command = [sys.executable, "-m", "assets.demo", "--days", str(DAYS)]
        yield DemoRun(subprocess.call(command, env=env, cwd=scratch), warehouse, s3)


def main(root: str | None = None) -> int:
    """Run the demo (see :func:`demo_on_cluster`); its exit code."""
    with demo_on_cluster(root) as run:
        return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
