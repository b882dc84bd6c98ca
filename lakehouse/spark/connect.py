"""A Spark Connect server on this machine, for the runs, tests and benchmarks that share one Spark.

Started from pyspark's own distribution (``bin/spark-submit`` with the Spark Connect server class,
which pyspark ships), listening on loopback; its Python workers run this interpreter, which has
this package installed. ``python -m lakehouse.spark.connect [--port N] [--master local[n]] [-- CMD]``
runs one in the foreground until interrupted, or for as long as ``CMD`` runs with
``$LAKEHOUSE_SPARK`` pointing at it (``make dev`` runs the Dagster UI so).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pyspark

from lakehouse.spark.loopback import LOOPBACK, accepts, stop_groups, wait_until
from lakehouse.spark.session import DAEMON, driver_logging

DEFAULT_PORT = 15002
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_ENV = "LAKEHOUSE_SPARK"  # the Spark the example's runs use: sc://..., spark://... or local[n]


class ConnectServer:
    """One Spark Connect server process: :meth:`start` it, connect to :attr:`url`, :meth:`stop` it."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        master: str = "local[2]",
        conf: Mapping[str, str] | None = None,
        log: str | None = None,
        driver_memory: str = "2g",
    ) -> None:
        self.port = port
        self.master = master
        self.driver_memory = driver_memory  # in local mode the executors' heap too
        self.conf = dict(conf or {})
        self.log = log or os.path.join(tempfile.gettempdir(), f"lakehouse-connect-{port}.log")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://{LOOPBACK}:{self.port}"

    def command(self) -> list[str]:
        settings = {
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.pyspark.python": sys.executable,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.driver.host": LOOPBACK,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            **DAEMON,
            **driver_logging(),
            **self.conf,
        }
        confs = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
        submit = str(SPARK_HOME / "bin" / "spark-submit")
        launch = ["--class", SERVER_CLASS, "--master", self.master, "--driver-memory", self.driver_memory]
        return [submit, *launch, "--name", "lakehouse", *confs, "spark-internal"]

    def start(self, timeout_s: float = 180) -> ConnectServer:
        """Start the server and wait until it accepts connections (its output goes to :attr:`log`)."""
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": LOOPBACK,
        }
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            failure = f"the Spark Connect server did not start; see {self.log}"
            wait_until(lambda: accepts(self.port), [self.process], timeout_s, failure)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server and every process it started."""
        if self.process is not None:
            stop_groups([self.process])

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Run a Spark Connect server on loopback, alone until interrupted, or for as long as "
        f"COMMAND runs, with ${SPARK_ENV} set to its URL. With ${SPARK_ENV} already set, only run COMMAND."
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # stop the server too
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if os.environ.get(SPARK_ENV):
        print(f"using the Spark at ${SPARK_ENV}={os.environ[SPARK_ENV]}", flush=True)
        sys.exit(subprocess.call(command) if command else 0)
    with ConnectServer(args.port, args.master, driver_memory=args.driver_memory) as server:
        print(f"Spark Connect server at {server.url} (log: {server.log})", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            if command:
                sys.exit(subprocess.call(command, env={**os.environ, SPARK_ENV: server.url}))
            assert server.process is not None  # started by the with statement
            server.process.wait()


if __name__ == "__main__":
    main()
