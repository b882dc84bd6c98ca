"""A REST catalog server in a process of its own, as ``lakehouse rest-catalog`` starts it, on a
free loopback port: for the tests that kill and restart it, and for clients in other processes."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from lakehouse.spark.loopback import LOOPBACK, accepts, free_port, stop_groups, wait_until


class ServerProcess:
    """``lakehouse rest-catalog`` serving ``warehouse`` with the grants ``tokens`` (token ->
    database -> ``read``/``write``); :attr:`uri` to connect, :attr:`admin` writes everything."""

    def __init__(self, warehouse: str, root: Path, tokens: dict[str, dict[str, str]] | None = None) -> None:
        self.warehouse = warehouse
        self.root = root
        self.admin = secrets.token_hex(16)
        self.grants = root / "grants.json"
        self.grants.write_text(json.dumps({"tokens": {self.admin: {"*": "write"}, **(tokens or {})}}))
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout_s: float = 60) -> ServerProcess:
        command = [sys.executable, "-m", "lakehouse.cli", "rest-catalog", "--warehouse", self.warehouse,
                   "--port", str(self.port), "--grants", str(self.grants)]  # fmt: skip
        with (self.root / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        failure = f"the REST catalog server did not start; see {self.root / 'server.log'}"
        wait_until(lambda: accepts(self.port), [self.process], timeout_s, failure)
        return self

    def kill(self) -> None:
        """SIGKILL: no answer, no clean-up, whatever it was doing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_groups([self.process], grace_s=10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
