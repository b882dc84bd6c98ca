"""Table maintenance as Spark jobs: per-bucket or per-file work in tasks, the last step on the driver.

Each job lists its units of work on the driver, spreads them over Spark tasks that run the
engine's own per-unit functions, and finishes on the driver with the engine's last step:

- compaction, clustering and index rewrite: tasks return commit messages, the driver commits them
  with the engine's committer (results are those of ``table.compact`` / ``table.sort_compact`` /
  ``table.rewrite_file_index``). They
  write as one leased write scope (:mod:`lakehouse.write.scope`), as data source writes do:
  a failed task deletes what it wrote; when the job or its commit fails, the driver deletes every
  file of the job once no task can still create one, and after a commit the files of attempts
  that were not committed;
- snapshot expiration: the driver plans it, deletes the expired snapshot files, moves ``EARLIEST``
  and deletes the metadata files, then tasks delete the changelog, index and data files in
  chunks: the engine's order (``table.expire_snapshots``), so a failed job leaves only orphans;
  orphan files: found on the driver, deleted by tasks;
- partition expiration: all on the driver (one commit of metadata, no per-file work: the dropped
  partitions' files go with the snapshots that list them).
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession

from lakehouse.append.sort_keys import SortStrategy
from lakehouse.io.fs import FileIO
from lakehouse.ops.clustering import sort_buckets, sort_order
from lakehouse.ops.compaction import Compaction, commit_compaction, compact_buckets, compaction_buckets
from lakehouse.ops.expire import Expiration, plan_expiration, retire_snapshots
from lakehouse.ops.file_index import (
    IndexRewrite,
    commit_index_rewrite,
    index_rewrite_entries,
    rewrite_indexes,
)
from lakehouse.ops.orphans import OrphanFiles, find_orphan_files
from lakehouse.ops.partition_expire import PartitionExpiration
from lakehouse.paths import FileNamer
from lakehouse.spark.parallelism import default_parallelism
from lakehouse.spark.source import open_table
from lakehouse.store.references import Deleted, FileRefs, delete_files, delete_paths
from lakehouse.table.table import Table
from lakehouse.write.scope import Lease, WriteScope, abort_write, committed_since, finish_write

Partitions = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None
Unit = TypeVar("Unit")
Result = TypeVar("Result")
DELETE_CHUNK = 1000  # files per unit of a deletion job
RESULT = "result"


def compact(
    spark: SparkSession,
    table: str,
    *,
    full: bool = False,
    partitions: Partitions = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    commit_user: str | None = None,
) -> Compaction:
    """``Table.compact`` with the buckets compacted by Spark tasks."""
    target = _table(table, warehouse, options)

    def rewrite(share: list, names: FileNamer) -> list:
        return compact_buckets(target, share, full, names)

    return _rewrite(spark, target, partitions, rewrite, commit_user)


def sort_compact(
    spark: SparkSession,
    table: str,
    order_by: Sequence[str],
    strategy: str | SortStrategy = SortStrategy.ORDER,
    partitions: Partitions = None,
    *,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    commit_user: str | None = None,
) -> Compaction:
    """``Table.sort_compact`` with each partition sorted and rewritten by a Spark task."""
    target = _table(table, warehouse, options)
    order = sort_order(target.store, order_by, strategy)

    def rewrite(share: list, names: FileNamer) -> list:
        return sort_buckets(target, share, order, names)

    return _rewrite(spark, target, partitions, rewrite, commit_user)


def _rewrite(
    spark: SparkSession,
    target: Table,
    partitions: Partitions,
    rewrite: Callable[[list, FileNamer], list],
    commit_user: str | None,
) -> Compaction:
    """Rewrite the buckets of ``partitions`` by Spark tasks (``rewrite`` a task's share of them)
    and commit their files as one COMPACT snapshot on the driver."""
    buckets = compaction_buckets(target, partitions)
    written = WriteJob(target)
    messages = written.run(spark, buckets, rewrite)
    found = [m for share in messages for m in share]
    return written.commit(lambda: commit_compaction(target, found, commit_user))


def rewrite_file_index(
    spark: SparkSession,
    table: str,
    *,
    partitions: Partitions = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    commit_user: str | None = None,
) -> IndexRewrite:
    """``Table.rewrite_file_index`` with the data files' indexes built by Spark tasks."""
    target = _table(table, warehouse, options)
    entries = index_rewrite_entries(target, partitions)
    written = WriteJob(target)
    changes = written.run(spark, entries, functools.partial(rewrite_indexes, target))
    return written.commit(lambda: commit_index_rewrite(target, changes, len(entries), commit_user))


def expire_snapshots(
    spark: SparkSession,
    table: str,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    max_deletes: int | None = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
) -> Expiration:
    """``Table.expire_snapshots`` with the expired snapshots' data files deleted by Spark tasks."""
    target = _table(table, warehouse, options)
    plan = plan_expiration(target.store, retain_min, retain_max, older_than_ms, max_deletes)
    retired = retire_snapshots(target.store, plan)
    pieces = plan.files.content().chunks(DELETE_CHUNK)
    deleted = _run(spark, pieces, functools.partial(_delete_pieces, target.io))
    return plan.report(sum(deleted, retired))


def remove_orphan_files(
    spark: SparkSession,
    table: str,
    *,
    older_than_ms: int | None = None,
    dry_run: bool = False,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
) -> OrphanFiles:
    """``Table.remove_orphan_files`` with the orphans deleted by Spark tasks."""
    target = _table(table, warehouse, options)
    found = find_orphan_files(target.store, older_than_ms)
    if dry_run:
        return found
    _run(spark, found.paths, functools.partial(delete_paths, target.io))
    return replace(found, dry_run=False)


def expire_partitions(
    spark: SparkSession,
    table: str,
    *,
    expiration_time: str | timedelta | None = None,
    dry_run: bool = False,
    strategy: str | None = None,
    timestamp_formatter: str | None = None,
    timestamp_pattern: str | None = None,
    max_expires: int | None = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    commit_user: str | None = None,
) -> PartitionExpiration:
    """``Table.expire_partitions`` on the driver, taking the job's arguments as the others do."""
    return _table(table, warehouse, options).expire_partitions(
        expiration_time,
        dry_run,
        strategy=strategy,
        timestamp_formatter=timestamp_formatter,
        timestamp_pattern=timestamp_pattern,
        max_expires=max_expires,
        commit_user=commit_user,
    )


class WriteJob:
    """A maintenance job whose tasks write files: one leased write scope, ended by the driver."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.scope = WriteScope.leased_from(table.options)
        self.base_snapshot = table.latest_snapshot_id()
        self.writers: set[str] = set()

    def run(
        self, spark: SparkSession, units: Sequence[Unit], task: Callable[[list[Unit], FileNamer], Result]
    ) -> list[Result]:
        """``task`` over ``units`` in Spark tasks, each holding a lease and naming its files in the
        scope; if the job fails, every file of it is deleted before the error surfaces."""
        table, scope = self.table, self.scope

        def leased(share: list[Unit]) -> tuple[str, Result]:
            token = str(TaskContext.get().taskAttemptId())
            lease = Lease(table, scope, token).acquire()
            try:
                result = task(share, scope.namer(token, lease))
            except BaseException:
                lease.release()
                raise
            lease.finish()
            return token, result

        try:
            done = _run(spark, units, leased)
        except BaseException:
            abort_write(table, scope, committed_since(table, self.base_snapshot))
            raise
        self.writers = {token for token, _ in done}
        return [result for _, result in done]

    def commit(self, commit: Callable[[], Result]) -> Result:
        """Run the driver's commit; on failure delete every file of the job, else those of the
        attempts that were not committed."""
        try:
            result = commit()
        except BaseException:
            abort_write(self.table, self.scope, committed_since(self.table, self.base_snapshot))
            raise
        finish_write(self.table, self.scope, self.writers)
        return result


def _delete_pieces(io: FileIO, pieces: list[FileRefs]) -> Deleted:
    return delete_files(io, functools.reduce(FileRefs.update, pieces, FileRefs()))


def _table(table: str, warehouse: str | None, options: Mapping[str, str] | None) -> Table:
    """The table a job maintains; ``options``: how to reach its store (``s3.endpoint``, ...)."""
    return open_table({**(options or {}), "path": table, **({"warehouse": warehouse} if warehouse else {})})


def _run(spark: SparkSession, units: Sequence[Unit], task: Callable[[list[Unit]], Result]) -> list[Result]:
    """``task`` over ``units`` split into at most default-parallelism Spark tasks, in order: a
    DataFrame of unit numbers whose partitions each run ``task`` on their units and hand back
    its pickled result (DataFrame operations only, so it runs over Spark Connect too)."""
    if not units:
        return []
    units = list(units)
    slices = min(len(units), default_parallelism(spark))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        share = [units[i] for batch in batches for i in batch.column(0).to_pylist()]
        if share:
            yield pa.record_batch([pa.array([pickle.dumps(task(share))], pa.binary())], names=[RESULT])

    done = spark.range(0, len(units), 1, slices).mapInArrow(run, f"{RESULT} binary").collect()
    return [pickle.loads(row[RESULT]) for row in done]
