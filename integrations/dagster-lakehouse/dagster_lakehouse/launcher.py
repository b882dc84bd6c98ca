"""A run launcher that forks each run from a warm process instead of starting a new interpreter.

Dagster's :class:`~dagster.DefaultRunLauncher` asks the code server to start a run, and the
server spawns a new interpreter for it, which imports Dagster, the engine, this integration and
PySpark before the run's first step: about 2.4 s on 2 cores, a third of the example's day. This
launcher keeps one *warm process* beside the process that launches runs (the daemon, or the
webserver when it launches them itself): it imports those libraries once, while no run waits,
and forks every run. The fork then does what ``dagster api execute_run`` does: it loads the run's
code location (so a reloaded location runs its new code), reports the run's process and runs it.
A forked run stays in the launcher's process group, as a run of the code server does, so that
stopping ``make dev`` with Ctrl-C interrupts it too.

Set it in ``dagster.yaml`` (``preload`` names the modules the warm process imports; one it
cannot import is left to the runs, with a warning in the launcher's log)::

    run_launcher:
      module: dagster_lakehouse.launcher
      class: WarmRunLauncher

The warm process starts with the first launch, and that run (any run while the warm process
imports, or after it died, when the next launch starts a new one) is launched through its code
server, as by the DefaultRunLauncher; so is every run of a code location served by another
Python environment.
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from dagster import DefaultRunLauncher, Field, serialize_value
from dagster._grpc.types import ExecuteRunArgs

if TYPE_CHECKING:
    from dagster._core.launcher import LaunchRunContext
    from dagster._serdes.config_class import ConfigurableClassData

# What a run imports before its first step: Dagster's CLI (the run's entry point), the SQLite
# storages of its instance (SQLAlchemy, Alembic), the default IO manager (universal-pathlib), this
# integration (the engine, dagster-pyspark, Dagster's components) and the Spark Connect client
PRELOAD = (
    "dagster._cli",
    "dagster._core.storage.sqlite_storage",
    "dagster._core.storage.fs_io_manager",
    "dagster_lakehouse",
    "pyspark.sql.connect.session",
)
PID_TAG = "dagster_lakehouse/run_pid"  # the forked run's pid, which terminate signals
READY = "ready"


class WarmProcessError(Exception):
    """The warm process could not fork a run (it failed to start, or exited)."""


class WarmProcessStarting(WarmProcessError):
    """The warm process has not finished importing yet."""


class WarmProcess:
    """The launcher's side of a warm process: start it, have it fork runs, stop it."""

    def __init__(self, modules: Sequence[str]):
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno()), *modules],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._socket = ours
        self._replies = ours.makefile("r", encoding="utf-8")
        self._ready = False
        self._lock = threading.Lock()  # the daemon may launch runs from several threads

    def fork(self, request: str) -> int:
        """Fork a run that executes ``request`` (serialized ExecuteRunArgs); its pid. Raises
        :class:`WarmProcessStarting` while the process still imports."""
        with self._lock:
            if not self._imported(0):
                raise WarmProcessStarting("the warm process is still importing")
            try:
                self._socket.sendall(request.encode() + b"\n")
                reply = self._reply()
            except OSError:
                reply = ""
            if not reply:
                raise WarmProcessError(f"the warm process exited with {self._process.wait()}")
        if not reply.isdigit():
            raise WarmProcessError(reply)
        return int(reply)

    @property
    def pid(self) -> int:
        return self._process.pid

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether it has imported its modules (waiting up to ``timeout`` seconds); raises
        :class:`WarmProcessError` if it failed to."""
        with self._lock:
            return self._imported(timeout)

    def stop(self) -> None:
        """Stop it (forked runs go on: they are processes of their own)."""
        self._replies.close()
        self._socket.close()
        self._process.terminate()
        self._process.wait()

    def _imported(self, timeout: float) -> bool:
        if not self._ready and select.select([self._socket], [], [], timeout)[0]:
            if self._reply() != READY:
                raise WarmProcessError(f"the warm process exited with {self._process.wait()}")
            self._ready = True
        return self._ready

    def _reply(self) -> str:
        return self._replies.readline().strip()


class WarmRunLauncher(DefaultRunLauncher):
    """Launch runs forked from a warm process that has imported ``preload``; see the module."""

    def __init__(self, inst_data: ConfigurableClassData | None = None, preload: Sequence[str] = PRELOAD):
        super().__init__(inst_data)
        self._preload = tuple(preload)
        self._warm: WarmProcess | None = None
        self._lock = threading.Lock()

    @classmethod
    def config_type(cls) -> dict[str, Field]:
        return {
            "preload": Field(
                [str],
                is_required=False,
                default_value=list(PRELOAD),
                description="Modules the warm process imports once for every run it forks.",
            )
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> WarmRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = run.job_code_origin
        if origin is None or not same_python(origin.executable_path):
            return super().launch_run(context)
        request = serialize_value(
            ExecuteRunArgs(job_origin=origin, run_id=run.run_id, instance_ref=self._instance.get_ref())
        )
        warm = self.warm_process
        try:
            pid = warm.fork(request)
        except WarmProcessError as error:  # this run goes through the code server
            if not isinstance(error, WarmProcessStarting):
                self._retire(warm)  # the next run starts a new warm process
            self._instance.report_engine_event(
                f"Launching the run through its code server: {error}.", run, cls=type(self)
            )
            return super().launch_run(context)
        self._instance.add_run_tags(run.run_id, {PID_TAG: str(pid)})
        self._run_ids.add(run.run_id)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished or PID_TAG not in run.tags:
            return super().terminate(run_id)
        self._instance.report_run_canceling(run)
        try:  # the run turns SIGTERM into Dagster's interruption and reports itself canceled
            os.kill(int(run.tags[PID_TAG]), signal.SIGTERM)
        except ProcessLookupError:
            self._instance.report_engine_event("The run's process had already exited.", run, cls=type(self))
            return False
        return True

    def dispose(self) -> None:
        self._retire(None)

    def _retire(self, warm: WarmProcess | None) -> None:
        """Stop the warm process, if it is still ``warm`` (whichever it is, for None): a launch
        that found its process dead must not stop the one another launch has started since."""
        with self._lock:
            current = self._warm
            if current is None or warm not in (None, current):
                return
            self._warm = None
        current.stop()  # outside the lock: launches need not wait for it

    @property
    def warm_process(self) -> WarmProcess:
        """The warm process, started on first use (the first launch, whose run it cannot serve)."""
        with self._lock:
            if self._warm is None:
                self._warm = WarmProcess(self._preload)
            return self._warm


def same_python(executable: str) -> bool:
    """Whether ``executable`` is this process's interpreter in this environment (its bin folder)."""
    theirs, ours = Path(executable), Path(sys.executable)
    return theirs.parent.resolve() == ours.parent.resolve() and theirs.resolve() == ours.resolve()


def serve(channel: socket.socket, modules: Sequence[str]) -> None:
    """The warm process: import ``modules``, then fork a run for each request on ``channel``
    and answer its pid, until the launcher closes the channel."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:  # a run that needs it imports it itself
            print(f"The warm run launcher does not preload {module}: {error}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the runs: nothing here waits on them
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the launcher, whose exit ends the requests
    with channel.makefile("r", encoding="utf-8") as requests:
        channel.sendall(f"{READY}\n".encode())
        for request in requests:
            try:
                pid = os.fork()
            except OSError as error:
                channel.sendall(f"could not fork the run: {error}\n".encode())
                continue
            if pid == 0:
                requests.close()
                channel.close()
                execute_run(request.strip())
            channel.sendall(f"{pid}\n".encode())


def execute_run(request: str) -> NoReturn:
    """In a forked run: run ``dagster api execute_run`` with the signals of a new process, exit."""
    from dagster._cli.api import api_cli

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the run waits on what it starts
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 1
    try:
        api_cli.main(["execute_run", request], prog_name="dagster api")  # exits
    except SystemExit as exit_:
        code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # never back into the warm process's loop


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
