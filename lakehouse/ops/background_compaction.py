"""Compaction off the commit's critical path: ``compaction.async`` (this engine's option).

Paimon's streaming writers compact asynchronously: a commit carries the new sorted runs at once,
and compaction catches up in the background, bounded by ``num-sorted-run.stop-trigger`` - a
writer that would leave a bucket with more runs waits for it. ``Table.write`` does the same when
the option is on: it commits its rows without compacting, then hands the buckets it wrote to the
table's background compactor, a thread of the writing process that compacts them (universal
compaction, as a synchronous write would) and commits each round as its own COMPACT snapshot.
Rounds run one at a time; buckets written meanwhile join the next round. Readers see every row as
soon as its write commits: compaction only reorganizes files.

A background round that loses to another compaction (the same files compacted first) leaves the
table as the winner made it; any failure deletes what the round wrote and is raised by the next
:meth:`BackgroundCompaction.wait` (``Table.wait_compaction``). The thread finishes its round
before the interpreter exits; a killed process leaves orphan files at most.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from lakehouse.errors import CommitConflictError, InvalidOptionError
from lakehouse.ops.compaction import commit_compaction, compact_buckets
from lakehouse.options import (
    COMPACTION_ASYNC,
    DELETION_VECTORS_ENABLED,
    FULL_COMPACTION_DELTA_COMMITS,
    WRITE_ONLY,
    ChangelogProducerKind,
    MergeEngineKind,
)

if TYPE_CHECKING:
    from lakehouse.schema import TableSchema
    from lakehouse.store.table_store import TableStore

log = logging.getLogger(__name__)
_live: weakref.WeakSet[BackgroundCompaction] = weakref.WeakSet()
_hooked = threading.Event()  # the exit hook is registered


def _finish_rounds() -> None:
    """At interpreter exit, before thread pools refuse new work: let every round finish."""
    for compactor in list(_live):
        compactor.wait(raise_failure=False)


def compacts_in_background(schema: TableSchema, table: str) -> bool:
    """Whether writes of the table leave compaction to the background compactor; refuses the
    option on tables whose compaction must happen in the write's own commit."""
    options = schema.core_options
    if not options.get_bool(COMPACTION_ASYNC):
        return False
    why = None
    if not schema.primary_keys:
        why = "it has no primary key (append tables are compacted by compaction jobs)"
    elif options.bucket <= 0:
        why = "its buckets are dynamic (the bucket index and compaction commit together)"
    elif options.get_bool(DELETION_VECTORS_ENABLED):
        why = "it has deletion vectors (a write computes them against the files compaction replaces)"
    elif options.changelog_producer in (ChangelogProducerKind.LOOKUP, ChangelogProducerKind.FULL_COMPACTION):
        why = f"its changelog producer {options.changelog_producer} makes the changelog by compacting"
    elif options.merge_engine == MergeEngineKind.FIRST_ROW:
        why = "merge-engine first-row shows rows only once they are compacted"
    elif options.get(FULL_COMPACTION_DELTA_COMMITS) is not None:
        why = f"{FULL_COMPACTION_DELTA_COMMITS} counts the commits between full compactions"
    elif options.get_bool(WRITE_ONLY):
        why = f"{WRITE_ONLY} leaves compaction to compaction jobs"
    if why:
        raise InvalidOptionError(
            f"table {table}: {COMPACTION_ASYNC} cannot be used because {why}; remove the option"
        )
    return True


class BackgroundCompaction:
    """The background compactor of one table in this process."""

    def __init__(self, table: TableStore) -> None:
        self.table = table
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: set[tuple[bytes, int]] = set()
        self._commit_user: str | None = None
        self._running = False
        self._failure: BaseException | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"lakehouse-compaction-{table.name}")
        if not _hooked.is_set():
            # threading's exit hooks run newest first: this one before concurrent.futures' own,
            # which stops every pool - a round's file reads and writes included - from taking work
            threading._register_atexit(_finish_rounds)  # type: ignore[attr-defined]  # private: not in typeshed
            _hooked.set()
        _live.add(self)

    def request(self, buckets: Iterable[tuple[bytes, int]], commit_user: str) -> None:
        """Compact these (partition, bucket) pairs as soon as the round running (if any) ends,
        for a write by ``commit_user``. The round commits as ``<commit_user>-compaction``: a
        user's newest snapshot must stay its newest write, whose identifier and properties tell
        a replayed or resumed writer what it committed."""
        with self._lock:
            self._pending.update(buckets)
            self._commit_user = f"{commit_user}-compaction"
            if self._pending and not self._running:
                self._running = True
                self._thread.submit(self._rounds)

    def wait(self, raise_failure: bool = True) -> None:
        """Block until no round runs or waits; raise the first failure since the last wait
        (``raise_failure``: else keep it for the next)."""
        with self._lock:
            while self._running:
                self._idle.wait()
            failure = self._failure
            if raise_failure:
                self._failure = None
        if failure is not None and raise_failure:
            raise failure

    def _rounds(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._running = False
                    self._idle.notify_all()
                    return
                buckets, self._pending = sorted(self._pending), set()
                commit_user = self._commit_user
            try:
                messages = compact_buckets(self.table, buckets, beside_buffer=True)
                commit_compaction(self.table, messages, commit_user)
            except CommitConflictError as e:  # another compaction got there first: nothing to do
                log.info("background compaction of %s yielded to a concurrent one: %s", self.table.name, e)
            except BaseException as e:
                log.warning("background compaction of %s failed: %s", self.table.name, e)
                with self._lock:
                    self._failure = self._failure or e
