"""Bucket routing for Spark writes: rows of one bucket meet in one task.

A primary-key bucket is an LSM tree whose rows are numbered in arrival order by the task that
writes it, so every bucket must be written by exactly one task. :func:`write` shuffles a DataFrame
before handing it to the ``paimon`` data source:

- fixed buckets (``bucket = N``): by (partition, bucket), the bucket computed as the engine does
  (``abs(hash(bucket key) % N)``), also for bucketed append tables (one writer per bucket, fewer
  files);
- dynamic buckets (``bucket = -1`` with a primary key): by assigner channel, the way Paimon's
  ``BucketAssigner.computeAssigner`` splits keys between assigner tasks (partition hash picks the
  first channel, key hash the offset among ``num_assigners``), so each assigner - and the buckets
  it owns - lives in one task. The engine's writer does not take its task's assigner yet (it runs
  all assigners itself), so the data source accepts such writes from one task only;
- bucket-unaware append tables: no shuffle.

The bucket or channel of a row is computed by an Arrow UDF over only the key columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import IntegerType

from lakehouse.bucket.channels import AssignerSplit, assigner_channel
from lakehouse.bucket.dynamic import ASSIGNER_PARALLELISM, INITIAL_BUCKETS, key_hashes
from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.manifest import binary_row
from lakehouse.schema import TableSchema
from lakehouse.spark.source import open_table, register
from lakehouse.table.table import Table

ROUTE = "__lakehouse_route"


def fixed_bucket_ids(schema: TableSchema, *columns: pa.Array) -> np.ndarray:
    """The fixed bucket of each row from its bucket-key columns (``schema.bucket_keys`` order)."""
    fields = schema.fields_named(schema.bucket_keys)
    arrays = [_as_column(c, schema, f.name) for c, f in zip(columns, fields, strict=True)]
    return fixed_buckets(arrays, [f.type for f in fields], schema.core_options.bucket)


def assigner_channels(schema: TableSchema, num_channels: int, *columns: pa.Array) -> np.ndarray:
    """The dynamic-bucket assigner task (0..num_channels-1) of each row, from its partition columns
    then its trimmed primary-key columns (the order of :func:`channel_columns`)."""
    parts, keys = schema.partition_keys, schema.trimmed_primary_keys
    named = {n: _as_column(c, schema, n) for n, c in zip([*parts, *keys], columns, strict=True)}
    rows = len(columns[0]) if columns else 0
    assigners = AssignerSplit.tasks(num_channels, initial_buckets(schema))[0].num_assigners
    key_types = [f.type for f in schema.fields_named(keys)]
    hashes = key_hashes(pa.table({k: named[k] for k in keys}), keys, key_types)
    partition_hashes = binary_row.encode_rows(
        [named[p] for p in parts], schema.partition_types(), rows
    ).hash_codes()
    distinct, inverse = np.unique(partition_hashes, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(distinct) + 1))
    channels = np.empty(rows, dtype=np.int64)
    for partition_hash, start, end in zip(distinct.tolist(), bounds[:-1], bounds[1:], strict=True):
        of = order[start:end]  # the rows of one partition
        channels[of] = assigner_channel(partition_hash, hashes[of], num_channels, assigners)
    return channels


def initial_buckets(schema: TableSchema) -> int | None:
    options = schema.core_options
    return None if options.get(INITIAL_BUCKETS) is None else options.get_int(INITIAL_BUCKETS)


def channel_columns(schema: TableSchema) -> list[str]:
    """The columns :func:`assigner_channels` reads, in its argument order."""
    return [*schema.partition_keys, *schema.trimmed_primary_keys]


def _as_column(array: pa.Array, schema: TableSchema, name: str) -> pa.Array:
    """A column as the table stores it (Spark may hand a wider or differently laid out type)."""
    target = schema.arrow_types()[name]
    return array if array.type == target else array.cast(target)


def _route_udf(route: Callable[..., np.ndarray]) -> Callable[..., Column]:
    """An Arrow UDF giving each row the int route ``route(*columns)`` computes."""

    def ids(*columns: pa.Array) -> pa.Array:
        return pa.array(route(*columns).astype(np.int32))

    return arrow_udf(ids, IntegerType())


def routed(df: DataFrame, table: Table, num_tasks: int) -> DataFrame:
    """``df`` shuffled so that each bucket (or dynamic-bucket assigner) is in one partition."""
    schema = table.schema
    if schema.core_options.bucket > 0:
        route = _route_udf(functools.partial(fixed_bucket_ids, schema))(*map(F.col, schema.bucket_keys))
        keys = [F.col(p) for p in schema.partition_keys]
    elif schema.primary_keys:
        channels = functools.partial(assigner_channels, schema, num_tasks)
        route = _route_udf(channels)(*map(F.col, channel_columns(schema)))
        keys = []
    else:
        return df
    return df.withColumn(ROUTE, route).repartition(num_tasks, *keys, F.col(ROUTE)).drop(ROUTE)


def write(
    df: DataFrame,
    table: str,
    *,
    mode: str = "append",
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    num_tasks: int | None = None,
) -> None:
    """Write ``df`` into ``table`` ("db.table" with ``warehouse``, or a table path) through the
    ``paimon`` data source, each bucket by one of ``num_tasks`` tasks (default: Spark's default
    parallelism; ``dynamic-bucket.assigner-parallelism`` for dynamic-bucket tables)."""
    spark = df.sparkSession
    register(spark)
    given = {**(options or {}), **({"warehouse": warehouse} if warehouse else {})}
    target = open_table({**given, "path": table})
    dynamic = target.schema.core_options.bucket == -1 and target.primary_keys
    assigners = target.options.get(ASSIGNER_PARALLELISM) if dynamic else None
    tasks = num_tasks or (int(assigners) if assigners else spark.sparkContext.defaultParallelism)
    routed(df, target, tasks).write.format("paimon").options(**given).mode(mode).save(table)
