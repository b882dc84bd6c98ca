"""A code location of its own for tests/dagster/test_launcher.py: jobs that record the process
of their step (in the run's process, or in a subprocess of it), wait to be terminated, or fail."""

import json
import os
import time
from pathlib import Path

import dagster as dg


class Record(dg.Config):
    path: str


@dg.op
def record_process(config: Record) -> None:
    Path(config.path).write_text(json.dumps({"pid": os.getpid(), "parent": os.getppid()}))


@dg.op
def wait_to_be_terminated() -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.05)
    raise RuntimeError("the run was not terminated")


@dg.op
def fail() -> None:
    raise RuntimeError("this run fails")


@dg.job
def record() -> None:
    record_process()


@dg.job(executor_def=dg.multiprocess_executor)
def record_in_subprocess() -> None:
    record_process()


@dg.job
def waits() -> None:
    wait_to_be_terminated()


@dg.job
def fails() -> None:
    fail()


defs = dg.Definitions(jobs=[record, record_in_subprocess, waits, fails], executor=dg.in_process_executor)
