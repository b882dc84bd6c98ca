"""Threads for the engine: a long-lived pool for leaf work, per-call pools for bulk work.

The long-lived pool (one per process) runs blocking leaf work: file reads and Parquet encoding.
Its size is not a core count: its reads wait on latency (object stores), which more threads hide,
and what it holds is bounded by its callers - a file read whole, or the one table each Parquet
writer has in flight, whose writers are as many as the bulk work's jobs.

Planning fetches many small files (file indexes) whose latency, not CPU, dominates on object
stores, and writers encode Parquet (which releases the GIL) while they build stats and indexes;
starting threads for each would cost more than the work on a local disk. Tasks must never wait
on other tasks of the pool. Keyed by process id so a forked child (a Spark Python worker) never
inherits a pool whose threads did not survive the fork. Bulk work over many files or buckets
(:func:`map_parallel`), whose tasks may themselves use the leaf pool, gets threads of its own:
one per core the process may use (:func:`lakehouse.io.cores.usable_cores`), fewer for jobs that
hold memory than their budget affords (:mod:`lakehouse.io.memory`). Helper threads of a job
(reading ahead, encoding in the background) pay only while a core is left beside the bulk jobs
running (:func:`spare_core`): when the jobs keep every core busy, they only switch the cores
between threads and contend for the GIL (a full compaction of 16 buckets on 2 cores: 6% faster
without them); Arrow's threads decoding a file's columns side by side, only while the jobs do
not keep every core busy for a while yet (:func:`cores_stay_busy`: 5-7% more).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from lakehouse.io.cores import usable_cores
from lakehouse.io.memory import JOBS, JobMemory, release_freed

T = TypeVar("T")
R = TypeVar("R")

IO_THREADS = 16
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_lock = threading.Lock()


def process_pool(
    name: str, threads: int, initializer: Callable[[], object] | None = None
) -> ThreadPoolExecutor:
    """The long-lived pool ``name`` of this process, started with ``threads`` threads on first
    use (each running ``initializer`` first); a forked child (a Spark Python worker) starts its
    own, as its parent's threads did not survive the fork."""
    pid = os.getpid()
    found = _pools.get(name)
    if found is None or found[0] != pid:
        with _lock:
            found = _pools.get(name)
            if found is None or found[0] != pid:
                found = pid, ThreadPoolExecutor(threads, thread_name_prefix=name, initializer=initializer)
                _pools[name] = found
    return found[1]


def _pool() -> ThreadPoolExecutor:
    return process_pool("lakehouse-io", IO_THREADS)


class _Running:
    """How many :func:`map_parallel` jobs of this process run now, and how many of its calls'
    jobs wait to start, in all its calls."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """None: in a forked child, whose parent's jobs do not run there."""
        self._lock = threading.Lock()
        self.count = 0
        self.waiting = 0

    @contextmanager
    def calling(self, fn: Callable[[T], R], items: int) -> Iterator[Callable[[T], R]]:
        """``fn`` counted as a job of a call of ``items`` jobs, which wait until each starts."""
        started = 0
        with self._lock:
            self.waiting += items

        def job(item: T) -> R:
            nonlocal started
            with self._lock:
                self.waiting -= 1
                started += 1
                self.count += 1
            outer, _JOB.running = in_job(), True  # a job may run nested jobs on its own thread
            try:
                return fn(item)
            finally:
                _JOB.running = outer
                with self._lock:
                    self.count -= 1

        try:
            yield job
        finally:
            with self._lock:
                self.waiting -= items - started  # a failed call's jobs that never started


_RUNNING = _Running()
_JOB = threading.local()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_RUNNING.clear)


def spare_core() -> bool:
    """Whether a core is left beside the bulk jobs running now (a job's helper threads gain only then)."""
    return _RUNNING.count < usable_cores()


def in_job() -> bool:
    """Whether the calling thread runs a bulk job (of :func:`map_parallel`), whose memory its
    call reserved (:class:`~lakehouse.io.memory.JobMemory`), not a caller's own work."""
    return getattr(_JOB, "running", False)


def cores_stay_busy() -> bool:
    """Whether the bulk jobs keep every core busy and more wait to start: a job's work spread
    over more threads only contends with the others then, but the last jobs spread theirs over
    the cores that the jobs ending before them leave (a read of 4 files on 2 cores: 20% slower
    without)."""
    return _RUNNING.count >= usable_cores() and _RUNNING.waiting > 0


def map_reads(fn: Callable[[T], R], items: Iterable[T], parallel: bool = True) -> list[R]:
    """``[fn(x) for x in items]``, the calls run on the shared I/O pool when ``parallel``; order kept.

    Callers pass ``parallel=False`` for a local disk, where reads are cache hits that threads
    only slow down (they contend for the GIL); remote stores pay latency, which threads hide.
    When a call fails, the calls not started are cancelled and those running finish before the
    error is raised: nothing this started still runs (deletes, say) once it has returned.
    """
    items = list(items)
    if not parallel or len(items) <= 1:
        return [fn(x) for x in items]
    futures = [_pool().submit(fn, x) for x in items]
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        wait(futures)
        raise


def submit(fn: Callable[..., R], *args: object) -> Future:
    """Run ``fn(*args)`` on the shared pool."""
    return _pool().submit(fn, *args)


def parallel_workers(items: int, memory: JobMemory | None = None) -> int:
    """How many of ``items`` bulk jobs run side by side: one per usable core, as many as
    ``memory`` affords beside the jobs running now."""
    workers = min(items, usable_cores())
    return workers if memory is None else min(workers, memory.threads(JOBS.held))


def map_parallel(fn: Callable[[T], R], items: Iterable[T], memory: JobMemory | None = None) -> list[R]:
    """``[fn(x) for x in items]`` on up to one thread per usable core, for work that spends its
    time in Arrow and numpy (which release the GIL); order kept. Its threads live for this call
    only, so tasks may use the shared pool.

    ``memory``: what each call of ``fn`` holds and the budget of all such jobs of the process: as
    many threads as the budget affords beside the jobs running now, each call reserving its share
    before it starts (waiting for other jobs to end if need be) and handing the memory its thread
    freed back to the system when it ends.
    """
    items = list(items)
    workers = parallel_workers(len(items), memory)
    if memory is not None:
        fn = _reserving(fn, memory)
    with _RUNNING.calling(fn, len(items)) as job:
        if workers <= 1:
            return [job(x) for x in items]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(job, items))


def map_streams(
    fn: Callable[[T], Iterable[R]],
    items: Sequence[T],
    memory: JobMemory,
    workers: int,
    size: Callable[[R], int],
    ahead: int,
) -> Iterator[R]:
    """The elements of ``fn(x)`` for each of ``items``, item after item, as ``itertools.chain``
    would give them, with up to ``workers`` of the items' iterators run side by side as bulk
    jobs (:func:`parallel_workers`), each on a thread of its own: the splits of a read, each
    merged or decoded by one job, while the caller takes the first one's rows. A job waits
    while what it made and the caller has not taken is ``ahead`` bytes (``size`` of each
    element) or more, so ``memory.job`` is to include them; the call holds ``workers`` such
    jobs of its ``memory`` while it runs. The next item starts as the first one ahead ends.
    Closing the iterator stops the jobs after the element each is making; an error is raised
    where its item's elements were due."""
    channels = [_Channel(size, ahead) for _ in items]

    def produce(index: int) -> None:
        channel = channels[index]
        elements: Iterator[R] | None = None
        try:
            elements = iter(fn(items[index]))
            for element in elements:
                if not channel.put(element):
                    break
            channel.put(_END)
        except BaseException as error:  # the caller raises it where this item's elements were due
            channel.fail(error)
        finally:
            close = getattr(elements, "close", None)
            if close is not None:
                close()

    with JOBS.reserve(workers * memory.job, memory.budget), _RUNNING.calling(produce, len(items)) as job:
        pool = ThreadPoolExecutor(workers)
        futures = [pool.submit(job, index) for index in range(len(items))]
        try:
            for channel in channels:
                while (element := channel.take()) is not _END:
                    yield cast(R, element)
        finally:
            for future in futures:
                future.cancel()
            for channel in channels:
                channel.close()
            pool.shutdown(wait=True)
            release_freed()


_END = object()


class _Channel:
    """Hands one producer's elements to the consumer in order: ``put`` waits while those
    waiting to be taken are ``ahead`` bytes or more."""

    def __init__(self, size: Callable[[Any], int], ahead: int) -> None:
        self._size = size
        self._ahead = ahead
        self._changed = threading.Condition()
        self._waiting: deque[tuple[object, int]] = deque()
        self._bytes = 0  # of the elements waiting
        self._error: BaseException | None = None
        self._closed = False

    def put(self, element: object) -> bool:
        """Hand ``element`` on once there is room (the end at once: its job is done); False once
        the consumer is gone."""
        end = element is _END
        nbytes = 0 if end else self._size(element)
        with self._changed:
            while not end and self._bytes >= self._ahead and not self._closed:
                self._changed.wait()
            if self._closed:
                return False
            self._waiting.append((element, nbytes))
            self._bytes += nbytes
            self._changed.notify_all()
            return True

    def fail(self, error: BaseException) -> None:
        with self._changed:
            self._error = error
            self._changed.notify_all()

    def take(self) -> object:
        """The next element (``_END`` after the last), raising the producer's error in its place."""
        with self._changed:
            while not self._waiting and self._error is None:
                self._changed.wait()
            if self._waiting:
                element, nbytes = self._waiting.popleft()
                self._bytes -= nbytes
                self._changed.notify_all()
                return element
            error = self._error
            assert error is not None  # the loop ends on an element or an error
            raise error

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()


MIN_SLICE_ROWS = 1 << 16  # fewer rows per thread cost more to hand over than they take


def map_slices(fn: Callable[[int, int], R], rows: int, at_once: int) -> list[R]:
    """``[fn(start, stop) ...]`` over consecutive slices of ``rows`` rows, in order, side by side
    on the usable cores: per-row Arrow and numpy work (encoding, hashing, grouping) that would
    otherwise run on one. The slices a call has in flight hold ``at_once`` rows together at
    most, whatever the number of cores. No rows: one call ``fn(0, 0)``. Called by a bulk job
    while the jobs keep every core busy (:func:`spare_core`), the slices run on its thread."""
    step = max(MIN_SLICE_ROWS, -(-at_once // usable_cores()))

    def sliced(start: int) -> R:
        return fn(start, min(rows, start + step))

    starts = range(0, max(rows, 1), step)
    return map_parallel(sliced, starts) if spare_core() else [sliced(start) for start in starts]


def _reserving(fn: Callable[[T], R], memory: JobMemory) -> Callable[[T], R]:
    def job(item: T) -> R:
        with JOBS.reserve(memory.job, memory.budget):
            try:
                return fn(item)
            finally:
                # the allocators keep what a thread freed for that thread: give it back
                # before the next job, which may run on another thread, allocates its own
                release_freed()

    return job
