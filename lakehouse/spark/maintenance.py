"""Table maintenance as Spark jobs: per-bucket or per-file work in tasks, one commit on the driver.

Each job lists its units of work on the driver, spreads them over Spark tasks that run the
engine's own per-unit functions and return commit messages, and commits them with the engine's
committer: results are those of ``table.compact`` / ``table.rewrite_file_index``. A failed task
deletes what it wrote; a failed commit deletes what every task wrote.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from lakehouse.fileindex.maintenance import (
    IndexRewrite,
    commit_index_rewrite,
    index_rewrite_entries,
    rewrite_indexes,
)
from lakehouse.spark.source import open_table
from lakehouse.table.compaction import Compaction, commit_compaction, compact_buckets, compaction_buckets
from lakehouse.table.table import Table

Partitions = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None
Unit = TypeVar("Unit")
Result = TypeVar("Result")


def compact(
    spark: SparkSession,
    table: str,
    *,
    full: bool = False,
    partitions: Partitions = None,
    warehouse: str | None = None,
) -> Compaction:
    """``Table.compact`` with the buckets compacted by Spark tasks."""
    target = _table(table, warehouse)
    buckets = compaction_buckets(target, partitions)
    messages = _run(spark, buckets, functools.partial(compact_buckets, target, full=full))
    return commit_compaction(target, [m for found in messages for m in found])


def rewrite_file_index(
    spark: SparkSession, table: str, *, partitions: Partitions = None, warehouse: str | None = None
) -> IndexRewrite:
    """``Table.rewrite_file_index`` with the data files' indexes built by Spark tasks."""
    target = _table(table, warehouse)
    entries = index_rewrite_entries(target, partitions)
    changes = _run(spark, entries, functools.partial(rewrite_indexes, target))
    return commit_index_rewrite(target, changes, len(entries))


def _table(table: str, warehouse: str | None) -> Table:
    return open_table({"path": table, **({"warehouse": warehouse} if warehouse else {})})


def _run(spark: SparkSession, units: Sequence[Unit], task: Callable[[list[Unit]], Result]) -> list[Result]:
    """``task`` over ``units`` split into at most ``defaultParallelism`` Spark tasks."""
    if not units:
        return []
    slices = min(len(units), spark.sparkContext.defaultParallelism)

    def run(part: Iterator[Unit]) -> Iterator[Result]:
        share = list(part)
        if share:
            yield task(share)

    return spark.sparkContext.parallelize(list(units), slices).mapPartitions(run).collect()
