"""``dagster-webserver`` and ``dagster-daemon`` as ``make dev`` runs them (or ``dg dev``, which
runs both for the ``dg`` project), on a free loopback port over a temporary ``DAGSTER_HOME`` and
warehouse, for the end-to-end tests: started from this interpreter's environment, ready once the
code location has loaded, and stopped with every process they started (code servers, runs, Spark
JVMs and their Python workers), whatever happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml
from dagster import DagsterInstance

from lakehouse.spark.loopback import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin, where the dagster entry points live
LOCATION = "assets.definitions"  # workspace.yaml's python_module names the code location
REPOSITORY = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
INSTANCE = ROOT / "dagster.yaml"  # the instance make dev runs
READY_TIMEOUT = 240.0

T = TypeVar("T")


class GraphQLError(AssertionError):
    """The webserver answered a GraphQL request with errors."""


@dataclass(frozen=True)
class DagsterServer:
    """A running webserver and daemon: the UI's address, the warehouse their runs write, and
    where they log."""

    url: str
    warehouse: str
    logs: tuple[Path, ...]

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 60.0) -> dict:
        """The ``data`` of a GraphQL request; errors raise with the server's messages."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.load(response)
        if answer.get("errors"):
            raise GraphQLError(f"GraphQL errors: {[e.get('message') for e in answer['errors']]}")
        return answer["data"]

    def log_tail(self, lines: int = 40) -> str:
        """The end of each process's log, for failure messages."""
        return "\n".join(
            f"--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in self.logs
        )

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float, every: float = 3.0) -> T:
        """Poll ``probe`` until it returns something other than None; fail after ``timeout``
        seconds naming ``what`` and showing the servers' logs."""
        deadline = time.monotonic() + timeout
        while True:
            found = probe()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.log_tail()}")
            time.sleep(every)


def workspace_commands(port: int) -> dict[str, list]:
    """The webserver and the daemon over the repository's ``workspace.yaml``, as ``make dev``."""
    return {
        "webserver": [BIN / "dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        "daemon": [BIN / "dagster-daemon", "run", "-w", "workspace.yaml"],
    }


def dg_dev_commands(port: int) -> dict[str, list]:
    """``dg dev`` in the project (``[tool.dg]`` in pyproject.toml): both, over its ``defs/``."""
    return {"dg-dev": [BIN / "dg", "dev", "--use-active-venv", "--host", "127.0.0.1", "--port", str(port)]}


@contextmanager
def dagster_server(
    tmp: Path, commands: Callable[[int], dict[str, list]] = workspace_commands
) -> Iterator[DagsterServer]:
    """Start the webserver and the daemon (``commands`` for a port) under ``tmp`` (home,
    warehouse, logs), wait until the UI serves the code location, and stop them and everything
    they started on exit."""
    home, warehouse = tmp / "dagster_home", tmp / "warehouse"
    home.mkdir(parents=True)
    settings = yaml.safe_load(INSTANCE.read_text())
    settings["nux"] = {"enabled": False}
    settings["run_queue"]["max_concurrent_runs"] = 1  # a run and a sensor's run never share the 2 cores
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    with DagsterInstance.from_config(str(home)):
        pass  # creates the SQLite storages once: the two processes would race to create them
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_WAREHOUSE": str(warehouse)}
    port = free_port()
    started = commands(port)
    processes: list[subprocess.Popen] = []
    with ExitStack() as stack:
        stack.callback(stop, processes)
        for name, command in started.items():
            log = stack.enter_context((tmp / f"{name}.log").open("w"))
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )  # fmt: skip
            )
        logs = tuple(tmp / f"{name}.log" for name in started)
        server = DagsterServer(f"http://127.0.0.1:{port}", str(warehouse), logs)
        server.wait_for("the webserver to serve the code location", lambda: _loaded(server, processes),
                        READY_TIMEOUT)  # fmt: skip
        yield server


def _loaded(server: DagsterServer, processes: list[subprocess.Popen]) -> bool | None:
    """True once the code location loaded (``dg dev`` names it after the project's folder, the
    workspace file ``LOCATION``); raises if a process died or the location failed."""
    for process in processes:
        if process.poll() is not None:
            raise AssertionError(f"{process.args[0]} exited with {process.returncode}\n{server.log_tail()}")
    try:
        data = server.graphql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus"
            " locationOrLoadError { __typename ... on PythonError { message } } } } } }",
            timeout=10,
        )
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None  # not listening yet
    entries = data["workspaceOrError"].get("locationEntries", [])
    if len(entries) != 1 or entries[0]["loadStatus"] != "LOADED":
        return None
    error = entries[0]["locationOrLoadError"]
    if error["__typename"] == "PythonError":
        raise AssertionError(f"{entries[0]['name']} failed to load: {error['message']}")
    return True


def stop(processes: list[subprocess.Popen], grace: float = 20.0) -> None:
    """SIGTERM the process group of each process and of everything it started (runs and Spark
    start their own groups), then SIGKILL what is left after ``grace`` seconds."""
    groups = _groups_under({p.pid for p in processes})
    _signal(groups, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while groups and time.monotonic() < deadline:
        for process in processes:
            process.poll()  # reap, so an exited child does not linger as a zombie of its group
        groups = {g for g in groups if _alive(g)}
        time.sleep(0.5)
    _signal(groups, signal.SIGKILL)
    for process in processes:
        process.wait()


def _groups_under(roots: set[int]) -> set[int]:
    """The process groups of ``roots`` and of all their descendants (read from /proc)."""
    parent, group = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp
        except OSError:
            continue  # exited meanwhile
        pid = int(stat.parent.name)
        parent[pid], group[pid] = int(fields[1]), int(fields[2])
    tree, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - tree
        tree |= frontier
    return {group[pid] for pid in tree if pid in group} - {os.getpgrp()}


def _signal(groups: set[int], sig: signal.Signals) -> None:
    for g in groups:
        with suppress(ProcessLookupError):
            os.killpg(g, sig)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
