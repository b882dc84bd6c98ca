"""Threads for the engine: a long-lived pool for leaf work, per-call pools for bulk work.

The long-lived pool (one per process) runs blocking leaf work: file reads and Parquet encoding.

Planning fetches many small files (file indexes) whose latency, not CPU, dominates on object
stores, and writers encode Parquet (which releases the GIL) while they build stats and indexes;
starting threads for each would cost more than the work on a local disk. Tasks must never wait
on other tasks of the pool. Keyed by process id so a forked child (a Spark Python worker) never
inherits a pool whose threads did not survive the fork. Bulk work over many files or buckets
(:func:`map_parallel`), whose tasks may themselves use the leaf pool, gets threads of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

IO_THREADS = 16
_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    pool = _pools.get(pid)
    if pool is None:
        with _lock:
            pool = _pools.get(pid) or ThreadPoolExecutor(IO_THREADS, thread_name_prefix="lakehouse-io")
            _pools.clear()  # a parent's pool is unusable in this process
            _pools[pid] = pool
    return pool


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


def map_parallel(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]`` on up to one thread per core, for work that spends its time in
    Arrow and numpy (which release the GIL); order kept. Its threads live for this call only, so
    tasks may use the shared pool."""
    items = list(items)
    workers = min(len(items), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))
