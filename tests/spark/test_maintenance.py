"""Maintenance as Spark jobs: the same result as the engine's single-process calls."""

from __future__ import annotations

import pytest

from lakehouse import col
from lakehouse import spark as lakespark
from lakehouse.snapshot import CommitKind

from ..conftest import ORDERS, orders, rows

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02"]


def twins(catalog, **options: str):
    """Two primary-key tables with the same history of several sorted runs per bucket."""
    tables = []
    for name in ("db.engine", "db.spark"):
        t = catalog.create_table(
            name,
            ORDERS,
            primary_keys=["order_id", "dt"],
            partition_keys=["dt"],
            options={"bucket": "2", "write-only": "true", **options},
        )
        for step in (1, 2, 4, 5, 10):  # five sorted runs per bucket: universal compaction triggers
            t.write(orders(range(0, 40, step), dt=DAYS * (20 // step), price=step))
        tables.append(t)
    return tables


def layout(table) -> list[tuple]:
    """Each live file's place and shape, independent of its random name."""
    return sorted(
        (e.partition, e.bucket, e.file.level, e.file.row_count, e.file.min_sequence_number)
        for e in table.live_entries()
    )


@pytest.mark.parametrize("full", [False, True])
def test_compaction_job_matches_table_compact(spark, catalog, warehouse, full):
    engine, distributed = twins(catalog)
    expected = engine.compact(full=full, partitions={"dt": DAYS[0]})
    got = lakespark.compact(spark, "db.spark", full=full, partitions={"dt": DAYS[0]}, warehouse=warehouse)
    assert got.snapshot_id == expected.snapshot_id == 6
    assert (got.buckets, got.files_before, got.files_after) == (
        expected.buckets,
        expected.files_before,
        expected.files_after,
    )
    assert distributed.snapshot(6).commit_kind == CommitKind.COMPACT
    assert layout(distributed) == layout(engine)
    assert rows(distributed.read()) == rows(engine.read())
    expected, got = (
        engine.compact(full=True),
        lakespark.compact(spark, "db.spark", full=True, warehouse=warehouse),
    )
    assert (got.buckets, got.files_after) == (expected.buckets, expected.files_after) and got.buckets >= 2
    assert layout(distributed) == layout(engine) and rows(distributed.read()) == rows(engine.read())


def test_index_rewrite_job_matches_table_rewrite_file_index(spark, catalog, warehouse):
    engine, distributed = twins(catalog)
    for t in (engine, distributed):
        t.set_options({"file-index.bloom-filter.columns": "order_id", "file-index.bitmap.columns": "status"})
    expected = engine.rewrite_file_index()
    got = lakespark.rewrite_file_index(spark, "db.spark", warehouse=warehouse)
    assert (got.files_checked, got.files_rewritten, got.index_bytes_written, got.snapshot_id) == (
        expected.files_checked,
        expected.files_rewritten,
        expected.index_bytes_written,
        expected.snapshot_id,
    )
    assert got.files_rewritten == 20 and distributed.verify_file_indexes().ok
    flt = col("order_id") == 39
    assert distributed.plan(filter=flt).stats == engine.plan(filter=flt).stats
    assert lakespark.rewrite_file_index(spark, "db.spark", warehouse=warehouse).snapshot_id is None
