"""Maintenance as jobs that other engines spread over their workers: plan, units of work, finish.

Every job has the same shape, whatever it maintains::

    job = table.new_compaction_job(full=True)      # on the driver
    units = job.start()                            # the driver plans (and does its own part)
    results = [job.run(share, writer) for ...]     # any process, any share of the units
    report = job.finish(results)                   # on the driver: commit, or sum up

``start`` lists picklable units; ``run`` does the work of some of them in any process (``writer``:
a token unique among the job's runs, letters and digits, e.g. a task attempt id) and returns a
picklable result; ``finish`` takes the results of the runs the driver chose, one per unit share,
and returns the report ``Table``'s own method would (``Table.compact`` and the others run the
same steps in one process). When a run fails beyond retrying, ``abort`` undoes what the job did.

Jobs that write files (compaction, clustering, index rewrite) write as one leased write: each run
holds a lease, a failed run deletes its files, ``finish`` commits one COMPACT snapshot and then
deletes the files of runs it was not given (a crashed attempt that was retried), ``abort`` deletes
every file of the job once no run can still create one (:mod:`lakehouse.write.scope`). Snapshot
expiration retires the snapshots in ``start`` and deletes their files in the runs, in the engine's
order, so a failed job leaves only orphans; orphan cleanup finds the orphans in ``start`` and
deletes them in the runs.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from lakehouse.append.sort_keys import SortStrategy
from lakehouse.manifest.entries import ManifestEntry
from lakehouse.ops.clustering import sort_buckets, sort_order
from lakehouse.ops.compaction import Compaction, commit_compaction, compact_buckets, compaction_buckets
from lakehouse.ops.expire import Expiration, ExpirationPlan, plan_expiration, retire_snapshots
from lakehouse.ops.file_index import (
    IndexChanges,
    IndexRewrite,
    commit_index_rewrite,
    index_rewrite_entries,
    rewrite_indexes,
)
from lakehouse.ops.orphans import OrphanFiles, find_orphan_files
from lakehouse.paths import FileNamer
from lakehouse.store.references import Deleted, FileRefs, delete_files, delete_paths
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import LeasedWrite

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

Unit = TypeVar("Unit")
Result = TypeVar("Result")
Report = TypeVar("Report")
Partitions = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None
DELETE_CHUNK = 1000  # files per unit of a deletion job


class MaintenanceJob(ABC, Generic[Unit, Result, Report]):
    """A maintenance operation as units of work (see the module's documentation)."""

    @abstractmethod
    def start(self) -> list[Unit]:
        """Plan the job (on the driver) and return its units."""

    @abstractmethod
    def run(self, units: list[Unit], writer: str) -> Result:
        """Do the work of ``units`` (in any process)."""

    @abstractmethod
    def finish(self, results: Sequence[Result]) -> Report:
        """End the job with the results of its runs (on the driver)."""

    def abort(self) -> None:
        """Undo what the job did, after a run failed for good (on the driver)."""


@dataclass(frozen=True)
class Rewritten(Generic[Result]):
    """What one run of a :class:`RewriteJob` wrote, and which writer it was."""

    writer: str
    result: Result


class RewriteJob(MaintenanceJob[Unit, Rewritten[Result], Report]):
    """A job whose runs write files, as one leased write committed by :meth:`finish`."""

    def __init__(self, table: TableStore) -> None:
        self.table = table
        self.write = LeasedWrite.start(table)

    def run(self, units: list[Unit], writer: str) -> Rewritten[Result]:
        lease = self.write.lease(writer)
        try:
            result = self.rewrite(units, self.write.names(writer, lease))
        except BaseException:
            lease.release()  # the rewrite deleted its files
            raise
        lease.finish()
        return Rewritten(writer, result)

    def finish(self, results: Sequence[Rewritten[Result]]) -> Report:
        try:
            report = self.commit([r.result for r in results])
        except BaseException:
            self.abort()
            raise
        self.write.finish({r.writer for r in results})
        return report

    def abort(self) -> None:
        self.write.abort()

    @abstractmethod
    def rewrite(self, units: list[Unit], names: FileNamer) -> Result:
        """Write the new files of ``units`` named by ``names``; on failure delete them."""

    @abstractmethod
    def commit(self, results: list[Result]) -> Report:
        """Commit what the runs wrote as one COMPACT snapshot."""


class CompactionJob(RewriteJob[tuple[bytes, int], list[CommitMessage], Compaction]):
    """``Table.compact`` as a job: one unit per bucket; ``order``, when given, sorts
    (``Table.sort_compact``)."""

    def __init__(
        self,
        table: TableStore,
        *,
        full: bool = False,
        partitions: Partitions = None,
        order_by: Sequence[str] | None = None,
        strategy: str | SortStrategy = SortStrategy.ORDER,
        commit_user: str | None = None,
    ) -> None:
        super().__init__(table)
        self.full = full
        self.partitions = partitions
        self.order = sort_order(table, order_by, strategy) if order_by is not None else None
        self.commit_user = commit_user

    def start(self) -> list[tuple[bytes, int]]:
        return compaction_buckets(self.table, self.partitions)

    def rewrite(self, units: list[tuple[bytes, int]], names: FileNamer) -> list[CommitMessage]:
        if self.order is not None:
            return sort_buckets(self.table, units, self.order, names)
        return compact_buckets(self.table, units, self.full, names)

    def commit(self, results: list[list[CommitMessage]]) -> Compaction:
        return commit_compaction(self.table, [m for share in results for m in share], self.commit_user)


class IndexRewriteJob(RewriteJob[ManifestEntry, IndexChanges, IndexRewrite]):
    """``Table.rewrite_file_index`` as a job: one unit per data file."""

    def __init__(
        self, table: TableStore, *, partitions: Partitions = None, commit_user: str | None = None
    ) -> None:
        super().__init__(table)
        self.partitions = partitions
        self.commit_user = commit_user
        self.files = 0

    def start(self) -> list[ManifestEntry]:
        entries = index_rewrite_entries(self.table, self.partitions)
        self.files = len(entries)
        return entries

    def rewrite(self, units: list[ManifestEntry], names: FileNamer) -> IndexChanges:
        return rewrite_indexes(self.table, units, names)

    def commit(self, results: list[IndexChanges]) -> IndexRewrite:
        return commit_index_rewrite(self.table, results, self.files, self.commit_user)


class ExpirationJob(MaintenanceJob[FileRefs, Deleted, Expiration]):
    """``Table.expire_snapshots`` as a job: :meth:`start` retires the expired snapshots (their
    snapshot files, the ``EARLIEST`` hint, their metadata files); the units are chunks of the
    data, changelog and index files only they referenced."""

    def __init__(
        self,
        table: TableStore,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than_ms: int | None = None,
        max_deletes: int | None = None,
    ) -> None:
        self.table = table
        self.arguments = (retain_min, retain_max, older_than_ms, max_deletes)
        self.plan: ExpirationPlan | None = None
        self.retired = Deleted()

    def start(self) -> list[FileRefs]:
        self.plan = plan_expiration(self.table, *self.arguments)
        self.retired = retire_snapshots(self.table, self.plan)
        return self.plan.files.content().chunks(DELETE_CHUNK)

    def run(self, units: list[FileRefs], writer: str) -> Deleted:
        return delete_files(self.table.io, functools.reduce(FileRefs.update, units, FileRefs()))

    def finish(self, results: Sequence[Deleted]) -> Expiration:
        assert self.plan is not None, "start the job first"
        return self.plan.report(sum(results, self.retired))


class OrphanCleanupJob(MaintenanceJob[str, int, OrphanFiles]):
    """``Table.remove_orphan_files`` as a job: :meth:`start` finds the orphans (all a dry run
    does: it has no units), the units are their paths."""

    def __init__(self, table: TableStore, *, older_than_ms: int | None = None, dry_run: bool = False) -> None:
        self.table = table
        self.older_than_ms = older_than_ms
        self.dry_run = dry_run
        self.found: OrphanFiles | None = None

    def start(self) -> list[str]:
        self.found = find_orphan_files(self.table, self.older_than_ms, deleting=not self.dry_run)
        return [] if self.dry_run else list(self.found.paths)

    def run(self, units: list[str], writer: str) -> int:
        return delete_paths(self.table.io, units)

    def finish(self, results: Sequence[int]) -> OrphanFiles:
        assert self.found is not None, "start the job first"
        return self.found if self.dry_run else replace(self.found, dry_run=False)
