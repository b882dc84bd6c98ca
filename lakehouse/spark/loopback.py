"""Servers this project starts on loopback (a Spark Connect server, a standalone cluster, a test
S3 server): a free port, waiting until one is ready, stopping one with what it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on at the moment."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports nothing listens on at the moment: all are held while they are
    picked, so a server still starting on one cannot be handed another's."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def accepts(port: int) -> bool:
    """Whether something accepts TCP connections on ``port`` of loopback."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0


def wait_until(
    ready: Callable[[], bool], processes: Sequence[subprocess.Popen], timeout_s: float, failure: str
) -> None:
    """Poll ``ready`` until it holds; ``RuntimeError(failure)`` once a process exits or the time is up."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.2)


def stop_groups(processes: Sequence[subprocess.Popen], grace_s: float = 30) -> None:
    """SIGTERM the process group each process leads (started with ``start_new_session``), in the
    order given; SIGKILL the groups still there after ``grace_s`` seconds."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
