"""How many cores this process may use: the one number every pool of the engine is sized from.

``os.cpu_count()`` counts the host's cores, also where the process may run on fewer: under
``taskset`` (its CPU affinity), in a cgroup with a CPU quota (Kubernetes CPU limits, ``docker
--cpus``: they show up only in ``cpu.max`` of the cgroup v2 hierarchy). A pool sized from it
starts one thread per host core, and each thread holds its own working memory. The count is the
affinity's (``os.process_cpu_count()`` on Python 3.13+), lowered to the quota of the process's
cgroup and its ancestors (quota / period, rounded up), as the JVM and Go runtimes size theirs.
``LAKEHOUSE_THREADS`` overrides it for the process: the engine then behaves as on that many cores.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from pathlib import Path

from lakehouse.errors import InvalidOptionError

THREADS_ENV = "LAKEHOUSE_THREADS"
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


@functools.cache
def usable_cores() -> int:
    """The cores this process may use (``LAKEHOUSE_THREADS`` if set), determined once."""
    return count_cores(os.environ)


def count_cores(
    environ: Mapping[str, str], cgroup_root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP
) -> int:
    """The override in ``environ``, else the scheduler's cores lowered to the cgroup's CPU quota."""
    override = threads_override(environ.get(THREADS_ENV))
    if override is not None:
        return override
    quota = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    cores = scheduler_cores()
    return cores if quota is None else max(1, min(cores, quota))


def threads_override(value: str | None) -> int | None:
    """``LAKEHOUSE_THREADS``: a positive integer, or None when unset or blank."""
    if value is None or not value.strip():
        return None
    try:
        threads = int(value.strip())
    except ValueError:
        threads = 0
    if threads < 1:
        raise InvalidOptionError(
            f"environment variable {THREADS_ENV}={value!r} is not a positive integer; set it to the "
            f"number of cores the engine should use (e.g. {THREADS_ENV}=4) or unset it"
        )
    return threads


def scheduler_cores() -> int:
    """The cores the scheduler lets this process run on (its affinity where the platform has one)."""
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return counted() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def cgroup_cpu_limit(root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP) -> int | None:
    """The tightest CPU quota (cgroup v2 ``cpu.max``) of this process's cgroup and its ancestors,
    in whole cores rounded up; None where there is none (no cgroup v2, ``max``, unreadable)."""
    limits = [c for c in map(_cpu_max, _cgroup_dirs(Path(root), proc_cgroup)) if c is not None]
    return min(limits, default=None)


def _cgroup_dirs(root: Path, proc_cgroup: str) -> list[Path]:
    """The directories of this process's cgroup and of its ancestors up to ``root``. Inside a
    container with its own cgroup namespace the process's cgroup is ``/``: ``root`` alone."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return [root]
    path = next((line[3:] for line in lines if line.startswith("0::")), "/")
    parts = [p for p in path.split("/") if p and p != ".."]
    return [root.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _cpu_max(directory: Path) -> int | None:
    """Cores allowed by ``<directory>/cpu.max`` (``"<quota> <period>"`` or ``"max <period>"``)."""
    try:
        fields = (directory / "cpu.max").read_text().split()
    except OSError:
        return None
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))
