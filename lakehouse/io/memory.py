"""The memory of parallel jobs: one budget for the process, shared by its threads.

A table's buffers (``write-buffer-size``, ``sort-spill-buffer-size``, the target file size) say
what one job - a bucket's flush, merge or compaction - holds. Jobs that run side by side each
hold their own, and more: every thread that allocates keeps memory it freed in a heap of its own
(Arrow's allocator, glibc's arenas for numpy). So the number of threads, not only the number of
jobs running, sets the peak: a 10M-row primary-key write on 16 threads held 0.7 GiB of live Arrow
data and peaked at 2.1 GiB RSS; on 16 threads that ran only 2 jobs at a time, at 1.7 GiB; on 2
threads, at 0.75 GiB.

A call that runs jobs in parallel states what one job may hold and the budget the process's jobs
may hold together (:class:`JobMemory`); it gets as many threads as that budget, less what other
calls' jobs hold at its start, affords, and each job reserves its share of the process-wide
:class:`JobBudget` before it starts. A job waits only for other jobs to end, never for memory
that is not a job's (a write buffer), so it cannot deadlock; when no job runs, one always may,
whatever its size. Jobs must not start memory-bounded jobs of their own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class JobMemory:
    """``job``: the bytes one job holds at most; ``budget``: what all jobs may hold together."""

    job: int
    budget: int

    def threads(self, held: int = 0) -> int:
        """Threads the budget affords for such jobs while ``held`` bytes are reserved (at least 1)."""
        return max(1, (self.budget - held) // max(1, self.job))


class JobBudget:
    """Bytes reserved by running jobs, granted first come, first served."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every reservation: in a forked child, whose parent's jobs do not run there."""
        self._changed = threading.Condition()
        self._waiting: deque[object] = deque()
        self.held = 0  # bytes reserved by the jobs running now

    @contextmanager
    def reserve(self, nbytes: int, budget: int) -> Iterator[None]:
        """Hold ``nbytes`` while the block runs: once they fit in ``budget`` beside what the
        running jobs hold, or at once when no job runs."""
        ticket = object()
        with self._changed:
            self._waiting.append(ticket)
            while self._waiting[0] is not ticket or (self.held and self.held + nbytes > budget):
                self._changed.wait()
            self._waiting.popleft()
            self.held += nbytes
            self._changed.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._changed:
                self.held -= nbytes
                self._changed.notify_all()


JOBS = JobBudget()  # the process's
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=JOBS.clear)


TRIM_ABOVE = 32 << 20  # freed bytes glibc may keep: trimming less costs more than it frees


class _MallInfo(ctypes.Structure):
    """glibc's ``struct mallinfo2``: ``fordblks`` is the free bytes its arenas hold."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


@dataclass(frozen=True)
class _Glibc:
    """glibc's ``malloc_trim``, ``mallinfo2`` (None: a glibc before 2.33, which has no
    ``mallinfo2``: every release trims) and ``mallopt`` (None where the C library has none)."""

    trim: Callable[[int], int]
    info: Callable[[], _MallInfo] | None
    option: Callable[[int, int], int] | None = None

    @classmethod
    def load(cls) -> _Glibc | None:
        """None where the C library has no ``malloc_trim`` (musl, macOS, Windows)."""
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"))
            trim = libc.malloc_trim
        except (OSError, AttributeError, TypeError):
            return None
        info = getattr(libc, "mallinfo2", None)
        if info is not None:
            info.restype = _MallInfo
        return cls(trim, info, getattr(libc, "mallopt", None))

    def holds_freed(self) -> bool:
        """Whether the arenas hold more than ``TRIM_ABOVE`` freed bytes (or cannot tell)."""
        return self.info is None or self.info().fordblks > TRIM_ABOVE


_GLIBC = _Glibc.load()


@dataclass(frozen=True)
class HeapSettings:
    """glibc malloc parameters the engine sets on import (``mallopt``), as one group: the
    environment variables and ``GLIBC_TUNABLES`` names by which a user sets them instead."""

    options: tuple[tuple[int, int], ...]  # (mallopt parameter, value)
    variables: tuple[str, ...]
    tunables: tuple[str, ...]

    def set_by(self, environ: Mapping[str, str]) -> bool:
        """Whether ``environ`` sets any of them: the user's then stand."""
        tunables = environ.get("GLIBC_TUNABLES", "")
        return any(v in environ for v in self.variables) or any(t in tunables for t in self.tunables)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
MMAP_ABOVE = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where glibc's own adaptation ends
TRIM_TOP_ABOVE = 2 * MMAP_ABOVE
ARENAS = 4
HEAP_THRESHOLDS = HeapSettings(
    ((_M_MMAP_THRESHOLD, MMAP_ABOVE), (_M_TRIM_THRESHOLD, TRIM_TOP_ABOVE)),
    ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"),
    ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold", "glibc.malloc.top_pad"),
)
HEAP_ARENAS = HeapSettings(((_M_ARENA_MAX, ARENAS),), ("MALLOC_ARENA_MAX",), ("glibc.malloc.arena_max",))


def settle_heap(glibc: _Glibc | None, environ: Mapping[str, str]) -> list[HeapSettings]:
    """Set glibc's heap parameters that ``environ`` does not set; the groups that were set.

    Thresholds: glibc starts its mmap and trim thresholds at 128 KiB and raises them only when
    a program frees an mmapped block, so a process that merely reads - merge steps of many
    arrays below 128 KiB, freed together - grows its heap by brk and hands the top back after
    every step: 115-125k page faults per merged read of a 10M-row table, 15% of its time on one
    core. They are set where glibc's own adaptation ends (32 MiB, 64 MiB): a trim threshold of
    16 MiB made assigning 10M keys to dynamic buckets 20% slower on 2 threads.

    Arenas: glibc gives threads up to 8 arenas per core, each keeping up to the trim threshold
    and more of what its threads freed, so its freed memory grows with the cores; 4 bound it
    (as Hadoop's containers do): a 24M-row primary-key write into 4 buckets on 16 threads
    peaked at 797-847 MB with the 16 arenas glibc allows on 2 cores, at 748-791 MB with 4, as
    fast. Set on import, before the engine's threads allocate: arenas made before it stay."""
    if glibc is None or glibc.option is None:
        return []
    settled = [group for group in (HEAP_THRESHOLDS, HEAP_ARENAS) if not group.set_by(environ)]
    for group in settled:
        for option, value in group.options:
            glibc.option(option, value)
    return settled


settle_heap(_GLIBC, os.environ)


ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def settle_arrow_pool(environ: Mapping[str, str]) -> str | None:
    """Make jemalloc Arrow's default allocator, unless ``environ`` names one
    (``ARROW_DEFAULT_MEMORY_POOL``) or this pyarrow has none; the backend set, or None.

    pyarrow's default, mimalloc, gives the pages of a block back only when the thread that
    allocated it allocates or collects again: what Arrow's decoding and the engine's read-ahead
    and encoding threads allocate and a job frees stays with the thread, idle or not, so freed
    memory grows with the threads. jemalloc's arenas give it back by decay and when released. A
    24M-row primary-key write into 4 buckets on 16 threads peaked at 842-844 MB under mimalloc,
    748-791 MB under jemalloc, in 23-24 s instead of 26 s; 10M-row compactions and upserts ran
    10-14% faster on one core. Arrays allocated before stay with their pool."""
    if ARROW_POOL_VARIABLE in environ:
        return None
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        return None
    pa.set_memory_pool(pool)
    return pool.backend_name


settle_arrow_pool(os.environ)


def release_arrow_freed() -> None:
    """Hand back the pages Arrow's allocator keeps freed (jemalloc until they decay; mimalloc,
    where a user chose it, for the thread that allocated them): cheap, so a long job calls it
    between its steps. Under mimalloc, a 12M-row primary-key write into 4 buckets on 16 threads
    peaked at 807-848 MB merging its spilled runs (Arrow held 140-270 MB of it live), and at
    777-782 MB releasing after each merge step; 24M rows: 931-965 MB, and 830-867 MB."""
    pa.default_memory_pool().release_unused()


def release_freed() -> None:
    """Hand what this process's allocators hold freed back to the system: Arrow's, and glibc's,
    whose per-thread arenas keep the freed numpy arrays of merges and sorts (a 24M-row
    primary-key write on 16 threads peaked 0.1 GiB higher without it). Called when a job or a
    flush ends, before the next allocates. glibc is trimmed only when its arenas hold more than
    ``TRIM_ABOVE`` freed: a trim hands back every free page, which the next job then faults in
    again (a merged read of 16 small buckets on 2 threads: 10% slower trimming after each)."""
    release_arrow_freed()
    if _GLIBC is not None and _GLIBC.holds_freed():
        _GLIBC.trim(0)
