"""The memory of parallel jobs: one budget for the process, shared by its threads.

A table's buffers (``write-buffer-size``, ``sort-spill-buffer-size``, the target file size) say
what one job - a bucket's flush, merge or compaction - holds. Jobs that run side by side each
hold their own, and more: every thread that allocates keeps memory it freed in a heap of its own
(Arrow's mimalloc, glibc's arenas for numpy). So the number of threads, not only the number of
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

# glibc's mallopt parameters, and the thresholds where its own adaptation of them stops
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_ABOVE = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_TOP_ABOVE = 2 * MMAP_ABOVE
# how a user sets glibc's heap thresholds themselves: variables, and tunables in GLIBC_TUNABLES
_HEAP_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
_HEAP_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold", "glibc.malloc.top_pad")


def settle_heap(glibc: _Glibc | None, environ: Mapping[str, str]) -> bool:
    """Set glibc's mmap and trim thresholds where its own adaptation of them ends (32 MiB and
    64 MiB), unless ``environ`` sets them; whether they were set.

    glibc starts both at 128 KiB and raises them only when a program frees an mmapped block, so
    a process that merely reads - merge steps of many arrays below 128 KiB, freed together -
    grows its heap by brk and hands the top back after every step: 115-125k page faults per
    merged read of a 10M-row table, 15% of its time on one core (a process that wrote first
    had raised them and read without faults). Set once: what a process that freed a large
    block holds anyway."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    if any(name in environ for name in _HEAP_VARIABLES) or any(t in tunables for t in _HEAP_TUNABLES):
        return False
    if glibc is None or glibc.option is None:
        return False
    glibc.option(_M_MMAP_THRESHOLD, MMAP_ABOVE)
    glibc.option(_M_TRIM_THRESHOLD, TRIM_TOP_ABOVE)
    return True


settle_heap(_GLIBC, os.environ)


def release_arrow_freed() -> None:
    """Hand back the pages Arrow's allocator keeps of what this thread freed (mimalloc holds
    them for the thread that freed them): cheap, so a long job calls it between its steps. A
    12M-row primary-key write into 4 buckets on 16 threads peaked at 807-848 MB merging its
    spilled runs (Arrow held 140-270 MB of it live), and at 777-782 MB releasing after each
    merge step; 24M rows: 931-965 MB, and 830-867 MB."""
    pa.default_memory_pool().release_unused()


def release_freed() -> None:
    """Hand what this process's allocators hold freed back to the system: Arrow's (mimalloc
    keeps what a thread freed for that thread) and glibc's, whose per-thread arenas keep the
    freed numpy arrays of merges and sorts (a 24M-row primary-key write on 16 threads peaked
    0.1 GiB higher without it). Called when a job or a flush ends, before the next allocates.
    glibc is trimmed only when its arenas hold more than ``TRIM_ABOVE`` freed: a trim hands
    back every free page, which the next job then faults in again (a merged read of 16 small
    buckets on 2 threads: 10% slower trimming after each)."""
    release_arrow_freed()
    if _GLIBC is not None and _GLIBC.holds_freed():
        _GLIBC.trim(0)
