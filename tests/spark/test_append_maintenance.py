"""Append-table compaction and clustering as Spark jobs: the engine's results, through tasks."""

from __future__ import annotations

import pytest

from lakehouse import col
from lakehouse import spark as lakespark
from lakehouse.snapshot import CommitKind

from ..conftest import ORDERS, orders, rows

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02"]


def twins(catalog, **options: str):
    """Two append tables with the same history of small files."""
    tables = []
    for name in ("db.engine", "db.spark"):
        t = catalog.create_table(name, ORDERS, partition_keys=["dt"], options=options)
        for i in range(6):
            prices = [float(v % 13) for v in range(40)]
            t.write(orders(range(i * 40, i * 40 + 40), dt=DAYS * 20, price=prices))
        tables.append(t)
    return tables


def layout(table) -> list[tuple]:
    return sorted((e.partition, e.bucket, e.file.row_count) for e in table.live_entries())


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "order_id"}])
def test_compaction_job_compacts_append_tables_as_the_engine_does(spark, catalog, warehouse, options):
    engine, distributed = twins(catalog, **options)
    expected = engine.compact()
    got = lakespark.compact(spark, "db.spark", warehouse=warehouse)
    assert (got.buckets, got.files_before, got.files_after) == (
        expected.buckets,
        expected.files_before,
        expected.files_after,
    )
    assert got.files_before > got.files_after > 0
    assert distributed.snapshot().commit_kind == CommitKind.COMPACT
    assert layout(distributed) == layout(engine)
    assert rows(distributed.read()) == rows(engine.read())


def test_sort_compaction_job_clusters_as_the_engine_does(spark, catalog, warehouse):
    engine, distributed = twins(catalog, **{"target-file-size": "2 kb"})
    expected = engine.sort_compact(["price", "order_id"], strategy="zorder", partitions=[{"dt": DAYS[0]}])
    got = lakespark.sort_compact(spark, "db.spark", ["price", "order_id"], "zorder", [{"dt": DAYS[0]}],
                                 warehouse=warehouse)  # fmt: skip
    assert (got.buckets, got.files_before, got.files_after) == (1, 6, expected.files_after)
    assert layout(distributed) == layout(engine)
    assert rows(distributed.read()) == rows(engine.read())
    point = (col("price") == 3.0) & (col("order_id") == 42)
    assert distributed.plan(filter=point).stats == engine.plan(filter=point).stats
