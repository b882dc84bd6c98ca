"""A Spark standalone cluster on loopback: one master and workers, each a JVM of its own started
with pyspark's ``bin/spark-class``, each worker with its own working directory. For trying the
engine on a real cluster on one machine (``make cluster-demo``, the cluster test): executors run
in the workers' directories, not the driver's, and their Python workers run this interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from lakehouse.spark.connect import SPARK_HOME
from lakehouse.spark.loopback import LOOPBACK, free_ports, stop_groups, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores each; :attr:`url` is the master URL."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", root: str | None = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.root = Path(root or tempfile.mkdtemp(prefix="lakehouse-cluster-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def start(self, timeout_s: float = 180) -> StandaloneCluster:
        """Start the master, then the workers, and wait until every worker has registered."""
        self._launch("master", MASTER_CLASS, "--host", LOOPBACK, "--port", str(self.port),
                     "--webui-port", str(self.ui_port))  # fmt: skip
        for i, ui_port in enumerate(self.worker_ui_ports):
            work = self.root / f"worker-{i}"
            work.mkdir(parents=True, exist_ok=True)
            resources = ["--cores", str(self.cores), "--memory", self.memory]
            where = ["--host", LOOPBACK, "--work-dir", str(work), "--webui-port", str(ui_port)]
            self._launch(f"worker-{i}", WORKER_CLASS, self.url, *resources, *where, cwd=work)
        try:
            failure = f"the Spark cluster did not come up; see the logs in {self.root}"
            wait_until(lambda: self.alive_workers() == self.workers, self.processes, timeout_s, failure)
        except BaseException:
            self.stop()
            raise
        return self

    def alive_workers(self) -> int:
        """How many workers the master counts alive (0 while it is starting: its web UI may then
        answer ``/json/`` with its HTML page, before the JSON handler is attached)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def _launch(self, name: str, main_class: str, *args: str, cwd: Path | None = None) -> None:
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": LOOPBACK}  # fmt: skip
        with open(self.root / f"{name}.log", "ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args],
                    cwd=cwd or self.root,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            )

    def stop(self) -> None:
        """Stop the workers, then the master."""
        stop_groups(self.processes[::-1])
        self.processes.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
