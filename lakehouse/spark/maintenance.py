"""Table maintenance as Spark jobs: the engine's maintenance jobs with their units in Spark tasks.

Each function opens the table, makes the engine's job (:class:`~lakehouse.MaintenanceJob`: the
same steps ``table.compact`` and the others run in one process), starts it on the driver, runs its
units spread over Spark tasks (each task one run, named by its task attempt id) and finishes it on
the driver; when the Spark job fails, the engine's job is aborted before the error surfaces:

- compaction, clustering and index rewrite: tasks write new files as one leased write and return
  what they wrote; the driver commits one COMPACT snapshot, then deletes the files of attempts that
  were not committed (a failed task deletes its own; a failed job or commit, every file of it);
- snapshot expiration: the driver retires the expired snapshots (their files, ``EARLIEST``, their
  metadata files), then tasks delete the data, changelog and index files in chunks: a failed job
  leaves only orphans; orphan files: found on the driver, deleted by tasks;
- partition expiration: all on the driver (one commit of metadata, no per-file work: the dropped
  partitions' files go with the snapshots that list them).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession

from lakehouse import (
    Compaction,
    Expiration,
    IndexRewrite,
    MaintenanceJob,
    OrphanFiles,
    PartitionExpiration,
    SortStrategy,
    Table,
)
from lakehouse.spark.parallelism import default_parallelism
from lakehouse.spark.source import open_table

Partitions = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None
Report = TypeVar("Report")
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
    return run_job(
        spark, target.new_compaction_job(full=full, partitions=partitions, commit_user=commit_user)
    )


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
    job = target.new_sort_compaction_job(
        list(order_by), strategy, partitions=partitions, commit_user=commit_user
    )
    return run_job(spark, job)


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
    return run_job(spark, target.new_index_rewrite_job(partitions=partitions, commit_user=commit_user))


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
    job = target.new_expiration_job(
        retain_min=retain_min, retain_max=retain_max, older_than_ms=older_than_ms, max_deletes=max_deletes
    )
    return run_job(spark, job)


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
    return run_job(spark, target.new_orphan_cleanup_job(older_than_ms=older_than_ms, dry_run=dry_run))


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
        expiration_time=expiration_time,
        dry_run=dry_run,
        strategy=strategy,
        timestamp_formatter=timestamp_formatter,
        timestamp_pattern=timestamp_pattern,
        max_expires=max_expires,
        commit_user=commit_user,
    )


def run_job(spark: SparkSession, job: MaintenanceJob[Any, Any, Report]) -> Report:
    """Start ``job`` here, run its units in at most default-parallelism Spark tasks, finish it
    here; if the Spark job fails, abort the engine's job before the error surfaces."""
    units = job.start()
    try:
        results = _run(spark, units, job)
    except BaseException:
        job.abort()
        raise
    return job.finish(results)


def _table(table: str, warehouse: str | None, options: Mapping[str, str] | None) -> Table:
    """The table a job maintains; ``options``: how to reach its store (``s3.endpoint``, ...)."""
    return open_table({**(options or {}), "path": table, **({"warehouse": warehouse} if warehouse else {})})


def _run(spark: SparkSession, units: list[Any], job: MaintenanceJob[Any, Any, Any]) -> list[Any]:
    """``job.run`` over ``units`` split into at most default-parallelism Spark tasks, in order: a
    DataFrame of unit numbers whose partitions each run the job on their units and hand back the
    pickled result (DataFrame operations only, so it runs over Spark Connect too)."""
    if not units:
        return []
    slices = min(len(units), default_parallelism(spark))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        share = [units[i] for batch in batches for i in batch.column(0).to_pylist()]
        if share:
            context = TaskContext.get()
            assert context is not None  # mapInArrow runs this in a task
            result = job.run(share, str(context.taskAttemptId()))
            yield pa.record_batch([pa.array([pickle.dumps(result)], pa.binary())], names=[RESULT])

    done = spark.range(0, len(units), 1, slices).mapInArrow(run, f"{RESULT} binary").collect()
    return [pickle.loads(row[RESULT]) for row in done]
