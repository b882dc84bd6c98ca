"""Bucket routing for Spark writes: rows of one bucket meet in one task.

A primary-key bucket is an LSM tree whose rows are numbered in arrival order by the task that
writes it, so every bucket must be written by exactly one task. :func:`write` shuffles a DataFrame
before handing it to the ``paimon`` data source:

- fixed buckets (``bucket = N``): by (partition, bucket), the bucket computed as the engine does
  (``abs(hash(bucket key) % N)``), also for bucketed append tables (one writer per bucket, fewer
  files);
- dynamic buckets (``bucket = -1`` with a primary key): by assigner channel, the way Paimon's
  ``BucketAssigner.computeAssigner`` splits keys between assigner tasks (partition hash picks the
  first channel, key hash the offset among ``num_assigners``); channel ``c`` goes to Spark
  partition ``c`` exactly, whose task writes as assigner ``c`` (it creates and writes only the
  buckets that assigner owns);
- bucket-unaware append tables: no shuffle.

:func:`write_stream` routes a streaming DataFrame the same way, each micro-batch's rows.

The bucket or channel of a row is computed by Spark from integer key columns
(:mod:`lakehouse.spark.row_hash`), else by the engine in an Arrow UDF over only the key columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import IntegerType

from lakehouse import BucketMode, Overwrite, Table, murmur_hash
from lakehouse.spark.kinds import arrow_udf_for, functions_for
from lakehouse.spark.options import write_options
from lakehouse.spark.parallelism import default_parallelism
from lakehouse.spark.row_hash import with_route
from lakehouse.spark.source import open_table, register

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

ROUTE = "__lakehouse_route"
DYNAMIC_BUCKET_ASSIGNER_PARALLELISM = "dynamic-bucket.assigner-parallelism"


def hash_partition_keys(num_partitions: int) -> np.ndarray:
    """For each Spark partition ``p``, an int that ``repartition(num_partitions, column)`` sends to
    ``p``: Spark puts a row into ``pmod(murmur3(value), num_partitions)``, where an int's murmur3 is
    Paimon's MurmurHash (seed 42) of its 4 little-endian bytes."""
    keys = np.full(num_partitions, -1, dtype=np.int64)
    start, batch = 0, 64 * num_partitions
    while (keys < 0).any():
        candidates = np.arange(start, start + batch, dtype="<i4")
        hashes = murmur_hash(candidates.view(np.uint8), np.arange(0, 4 * batch + 1, 4))
        partitions, first = np.unique(np.mod(hashes.astype(np.int64), num_partitions), return_index=True)
        missing = keys[partitions] < 0
        keys[partitions[missing]] = candidates[first[missing]]
        start += batch
    return keys.astype(np.int32)


def _route_udf(route: Callable[..., np.ndarray], df: DataFrame) -> Callable[..., Column]:
    """An Arrow UDF giving each row of ``df`` the int route ``route(*columns)`` computes."""

    def ids(*columns: pa.Array) -> pa.Array:
        return pa.array(route(*columns).astype(np.int32))

    return arrow_udf_for(df, ids, IntegerType())


def routed(df: DataFrame, table: Table, num_tasks: int) -> DataFrame:
    """``df`` shuffled so that each bucket (or dynamic-bucket assigner) is in one partition."""
    router = table.new_row_router(num_tasks)
    if router.mode == BucketMode.KEY_DYNAMIC:
        return df.repartition(1)  # one writer knows where every key lives
    formula = router.formula
    if formula is None:
        return df
    out = with_route(df, formula, ROUTE)  # in Spark's JVM, else by the engine in a Python worker
    if out is None:
        out = df.withColumn(ROUTE, _route_udf(router.route, df)(*(df[c] for c in router.columns)))
    if router.mode == BucketMode.HASH_FIXED:
        return out.repartition(num_tasks, *table.partition_keys, ROUTE).drop(ROUTE)
    F = functions_for(df)  # channel c -> a value that Spark's hash partitioning sends to partition c
    partition_keys = F.array(*(F.lit(int(k)) for k in hash_partition_keys(router.writers)))
    out = out.withColumn(ROUTE, F.element_at(partition_keys, F.col(ROUTE) + 1))
    return out.repartition(num_tasks, ROUTE).drop(ROUTE)


def write(
    df: DataFrame,
    table: str,
    *,
    mode: str = "append",
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    num_tasks: int | None = None,
    overwrite: Overwrite = None,
    commit_user: str | None = None,
    commit_identifier: int | None = None,
    commit_properties: Mapping[str, str] | None = None,
) -> None:
    """Write ``df`` into ``table`` ("db.table" with ``warehouse``, or a table path) through the
    ``paimon`` data source, each bucket by one of ``num_tasks`` tasks.

    ``overwrite`` (as ``Table.write``'s): ``True`` replaces the whole table, ``"dynamic"`` the
    partitions ``df`` writes to, a partition dict or a list of them those partitions (even the
    ones ``df`` has no rows for); ``mode="overwrite"`` without it replaces what the table's
    ``dynamic-partition-overwrite`` says. ``commit_user``, ``commit_identifier`` and
    ``commit_properties``: the snapshot's (see :mod:`lakehouse.spark.options`).

    ``num_tasks`` defaults to Spark's default parallelism; for dynamic-bucket tables to the
    table's ``dynamic-bucket.assigner-parallelism`` (default 1, as the engine's own writer), so
    that every writer of the table spreads keys over the same assigners. A dynamic-bucket write
    with another number of tasks than the table was written with is refused when it updates a
    key living in a bucket another task's assigner owns. Cross-partition upsert tables are
    written from one task.
    """
    extra = write_options(overwrite, commit_user, commit_identifier, commit_properties)
    data, given = _routed_write(df, table, warehouse, {**(options or {}), **extra}, num_tasks)
    mode = mode if overwrite in (None, False) else "overwrite"
    data.write.format("paimon").options(**given).mode(mode).save(table)


def write_stream(
    df: DataFrame,
    table: str,
    *,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    num_tasks: int | None = None,
) -> DataStreamWriter:
    """The ``writeStream`` of the streaming DataFrame ``df`` into ``table``, routed as :func:`write`
    routes (each bucket of a micro-batch by one of ``num_tasks`` tasks): set its checkpoint
    location, trigger and output mode, then ``start()`` it. One snapshot per micro-batch, exactly
    once across restarts from the checkpoint (:mod:`lakehouse.spark.stream_writer`)."""
    data, given = _routed_write(df, table, warehouse, options, num_tasks)
    return data.writeStream.format("paimon").options(**given).option("path", table)


def _routed_write(
    df: DataFrame,
    table: str,
    warehouse: str | None,
    options: Mapping[str, str] | None,
    num_tasks: int | None,
) -> tuple[DataFrame, dict[str, str]]:
    """``df`` routed for writing ``table`` (see :func:`write`), and the data source's write options."""
    spark = df.sparkSession
    register(spark)
    given = {**(options or {}), **({"warehouse": warehouse} if warehouse else {})}
    target = open_table({**given, "path": table})
    if target.bucket_mode == BucketMode.HASH_DYNAMIC:
        tasks = num_tasks or target.assigner_parallelism
        given[DYNAMIC_BUCKET_ASSIGNER_PARALLELISM] = str(tasks)  # the writers write as as many assigners
    elif target.bucket_mode == BucketMode.KEY_DYNAMIC:
        tasks = 1
    else:
        tasks = num_tasks or default_parallelism(spark)
    return routed(df, target, tasks), given
