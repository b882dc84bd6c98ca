"""WarmRunLauncher: runs forked from its warm process succeed, fail and are terminated as runs
of the code server are; the first run (while the warm process imports), and a run after the warm
process died, go through the code server, and the next runs fork from a new warm process."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, instance_for_test
from dagster._core.test_utils import poll_for_finished_run, poll_for_step_start
from dagster._core.workspace.context import BaseWorkspaceRequestContext, WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget

from dagster_lakehouse.launcher import PID_TAG, WarmRunLauncher, same_python
from tests.dagster import launched_jobs

ROOT = Path(__file__).resolve().parents[2]
LOCATION = "launched"
READY_S = 300.0  # the warm process imports Dagster, the engine and PySpark on a loaded machine


@contextmanager
def launched(
    tmp_path: Path, **config: object
) -> Iterator[tuple[DagsterInstance, BaseWorkspaceRequestContext]]:
    """An instance whose runs a WarmRunLauncher (of ``config``) launches, and a workspace of the
    code location :mod:`tests.dagster.launched_jobs`."""
    launcher = {"module": "dagster_lakehouse.launcher", "class": "WarmRunLauncher", "config": config}
    target = ModuleTarget("tests.dagster.launched_jobs", None, str(ROOT), LOCATION)
    with (
        instance_for_test(overrides={"run_launcher": launcher}, temp_dir=str(tmp_path)) as instance,
        WorkspaceProcessContext(instance, target) as context,
    ):
        yield instance, context.create_request_context()


def launch(instance: DagsterInstance, workspace: BaseWorkspaceRequestContext, job: str,
           record: Path | None = None) -> DagsterRun:  # fmt: skip
    """Launch ``job`` as the daemon does (``record``: where the record job writes its process)."""
    run_config = {"ops": {"record_process": {"config": {"path": str(record)}}}} if record else None
    remote = workspace.get_code_location(LOCATION).get_repositories()["__repository__"].get_full_job(job)
    run = instance.create_run_for_job(
        job_def=launched_jobs.defs.resolve_job_def(job),
        run_config=run_config,
        remote_job_origin=remote.get_remote_origin(),
        job_code_origin=remote.get_python_origin(),
    )
    instance.launch_run(run.run_id, workspace)
    return run


def messages(instance: DagsterInstance, run: DagsterRun) -> list[str]:
    """The messages of the run's events, engine events included."""
    return [
        (r.dagster_event and r.dagster_event.message) or r.user_message for r in instance.all_logs(run.run_id)
    ]


def finished(instance: DagsterInstance, run: DagsterRun) -> DagsterRunStatus:
    return poll_for_finished_run(instance, run.run_id, timeout=READY_S).status


def launcher_of(instance: DagsterInstance) -> WarmRunLauncher:
    launcher = instance.run_launcher
    assert isinstance(launcher, WarmRunLauncher)
    return launcher


def test_runs_fork_from_the_warm_process_once_it_has_imported(tmp_path):
    with launched(tmp_path) as (instance, context):
        first = launch(instance, context, "record", tmp_path / "1")
        launcher = launcher_of(instance)
        assert launcher.warm_process.ready(READY_S)
        second = launch(instance, context, "record", tmp_path / "2")
        for run in (first, second):
            assert finished(instance, run) == DagsterRunStatus.SUCCESS

        # the first launch started the warm process, which was still importing: the code server ran it
        assert PID_TAG not in instance.get_run_by_id(first.run_id).tags
        assert any("Launching the run through its code server: the warm process is still importing" in m
                   for m in messages(instance, first))  # fmt: skip
        # the second was forked from it, and reported the process it ran in
        process = json.loads((tmp_path / "2").read_text())
        assert process["parent"] == launcher.warm_process.pid
        assert instance.get_run_by_id(second.run_id).tags[PID_TAG] == str(process["pid"])
        assert f"Started process for run (pid: {process['pid']})." in messages(instance, second)
        assert json.loads((tmp_path / "1").read_text())["parent"] != launcher.warm_process.pid


def test_a_forked_run_runs_its_steps_in_subprocesses_as_dagsters_default_executor_does(tmp_path):
    with launched(tmp_path) as (instance, context):
        assert launcher_of(instance).warm_process.ready(READY_S)
        run = launch(instance, context, "record_in_subprocess", tmp_path / "1")
        assert finished(instance, run) == DagsterRunStatus.SUCCESS
        step = json.loads((tmp_path / "1").read_text())
        assert str(step["parent"]) == instance.get_run_by_id(run.run_id).tags[PID_TAG]


def test_a_forked_run_fails_and_is_terminated_as_a_run_of_the_code_server(tmp_path):
    with launched(tmp_path) as (instance, context):
        launcher = launcher_of(instance)
        assert launcher.warm_process.ready(READY_S)
        failing = launch(instance, context, "fails")
        waiting = launch(instance, context, "waits")
        assert PID_TAG in instance.get_run_by_id(failing.run_id).tags
        assert finished(instance, failing) == DagsterRunStatus.FAILURE
        assert 'Execution of step "fail" failed.' in messages(instance, failing)

        poll_for_step_start(instance, waiting.run_id, timeout=READY_S)
        assert launcher.terminate(waiting.run_id)
        assert finished(instance, waiting) == DagsterRunStatus.CANCELED
        assert not launcher.terminate(waiting.run_id)  # finished: nothing to terminate


def test_runs_go_through_the_code_server_while_the_warm_process_is_dead_and_fork_from_a_new_one(tmp_path):
    with launched(tmp_path, preload=["tests.dagster.no_such_module", "dagster._cli"]) as (instance, context):
        launcher = launcher_of(instance)
        dead = launcher.warm_process
        assert dead.ready(READY_S)  # a module it cannot import is left to the runs
        os.kill(dead.pid, signal.SIGKILL)  # as the kernel's OOM killer would
        run = launch(instance, context, "record", tmp_path / "1")
        assert PID_TAG not in instance.get_run_by_id(run.run_id).tags
        assert any("Launching the run through its code server: the warm process exited with -9" in m
                   for m in messages(instance, run))  # fmt: skip

        assert launcher.warm_process.ready(READY_S)  # the next launch started a new one
        forked = launch(instance, context, "record", tmp_path / "2")
        for each in (run, forked):
            assert finished(instance, each) == DagsterRunStatus.SUCCESS
        assert json.loads((tmp_path / "2").read_text())["parent"] == launcher.warm_process.pid != dead.pid


def test_only_runs_of_this_python_environment_fork():
    assert same_python(sys.executable)
    assert not same_python(str(Path(sys.executable).parent / "elsewhere" / "python"))
