"""Read-ahead: the next item of an iterator (or the next step of a computation over one)
produced on another thread while the caller uses the current one.

A merge reads each sorted run a batch at a time and merges the batches it has; decoding a
Parquet batch (Arrow, which releases the GIL) and merging the previous ones (Arrow and numpy
kernels) can then run on two cores instead of taking turns on one. Each wrapped iterator has
exactly one item in flight beyond the one its caller holds, so what it adds to a merge's memory
is one more batch per run: bounded by the merge's buffer, never by the data. The producing
threads belong to a pool of their own whose tasks never wait on anything, so a caller that is
itself a task of another pool cannot deadlock it. On a single core there is nothing to overlap:
the iterator is used as it is.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from lakehouse.io.cores import usable_cores
from lakehouse.io.memory import release_arrow_freed
from lakehouse.io.pool import process_pool

T = TypeVar("T")
R = TypeVar("R")

_END = object()


_THREAD = threading.local()


def _reads_ahead() -> None:
    _THREAD.ahead = True


def reading_ahead() -> bool:
    """Whether the calling thread is one of the read-ahead threads: its work already runs beside
    other work of the same read (the other runs of a merge, the merge), so spreading it over
    more threads (Arrow's, decoding a file's columns side by side) would only contend with
    them (a 10M-row table merged on read on 2 cores: 7% faster without)."""
    return getattr(_THREAD, "ahead", False)


def _pool() -> ThreadPoolExecutor:
    """The process's read-ahead threads, one per usable core."""
    return process_pool("lakehouse-ahead", usable_cores(), _reads_ahead)


def _next(it: Iterator[T]) -> object:
    """The next item of ``it`` (``_END`` after the last), produced on a read-ahead thread, which
    then hands back what it freed meanwhile: each of these threads would otherwise keep the
    pages of its own decoding (Arrow's allocator keeps them for the thread that freed them)."""
    try:
        return next(it, _END)
    finally:
        release_arrow_freed()


def _settle(future: Future) -> None:
    """Cancel ``future``, or wait for it if it already runs (its error is the caller's no more)."""
    if not future.cancel():
        future.exception()


def map_ahead(fn: Callable[[T], R], items: Iterable[T], ahead: bool = True) -> Iterator[R]:
    """``fn(x)`` for each of ``items``, in order, each call made on a read-ahead thread while
    the caller waits for the previous one's result: independent steps (the merges of a split's
    consecutive keys) run two at a time. The caller's thread pulls ``items``; at most two calls
    are in flight, whatever the number of cores. A caller that stops early waits for them.
    ``ahead=False`` (work too small to gain from another thread): ``map(fn, items)``."""
    if not ahead or usable_cores() <= 1:
        yield from map(fn, items)
        return
    pending: deque[Future] = deque()
    try:
        for item in items:
            pending.append(_pool().submit(fn, item))
            if len(pending) > 1:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            _settle(future)


def read_ahead(items: Iterable[T], ahead: bool = True) -> Iterator[T]:
    """The items of ``items`` in order, each next one produced on a read-ahead thread while the
    caller holds the current one. Errors are raised where the caller asks for the item that
    failed; a caller that stops early waits for the item in flight, and ``items`` is closed.
    ``ahead=False``: the items as they come."""
    it = iter(items)
    if not ahead or usable_cores() <= 1:
        yield from it
        return
    pending: Future = _pool().submit(_next, it)
    try:
        while True:
            item = pending.result()
            if item is _END:
                return
            pending = _pool().submit(_next, it)
            yield item
    finally:
        _settle(pending)  # the iterator is not to be closed while it runs
        close = getattr(it, "close", None)
        if close is not None:
            close()
