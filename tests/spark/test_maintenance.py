"""Maintenance as Spark jobs: the same result as the engine's single-process calls."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from lakehouse import col
from lakehouse import spark as lakespark
from lakehouse.ops.expire import Expiration, plan_expiration
from lakehouse.ops.orphans import candidate_files, referenced_files
from lakehouse.ops.partition_expire import PartitionExpiration
from lakehouse.snapshot import CommitKind

from ..conftest import ORDERS, orders, rows

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02"]
FUTURE = 2**62  # an older_than_ms every snapshot is older than


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
def test_compaction_job_matches_table_compact(any_spark, catalog, warehouse, full):
    engine, distributed = twins(catalog)
    expected = engine.compact(full=full, partitions={"dt": DAYS[0]})
    got = lakespark.compact(any_spark, "db.spark", full=full, partitions={"dt": DAYS[0]}, warehouse=warehouse)
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
        lakespark.compact(any_spark, "db.spark", full=True, warehouse=warehouse),
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


def file_kinds(table) -> dict[str, int]:
    """How many files each kind of directory of the table holds."""
    counts: dict[str, int] = {}
    for st in candidate_files(table):
        kind = st.name.split("-")[0]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def test_expiration_job_matches_table_expire_snapshots(any_spark, catalog, warehouse):
    engine, distributed = twins(catalog, bucket="-1")  # dynamic buckets: new keys replace HASH files
    for t in (engine, distributed):
        t.create_tag("kept", snapshot_id=2)
        t.compact(full=True)
        for first in (100, 105):
            t.write(orders(range(first, first + 5), dt=DAYS[0], price=7.0))
    expected = engine.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    got = lakespark.expire_snapshots(
        any_spark, "db.spark", retain_min=2, older_than_ms=FUTURE, warehouse=warehouse
    )
    assert got == expected and got.snapshots_expired == 6
    assert got.deleted.data_files > 0 and got.deleted.index_files > 0 and got.deleted.metadata_files > 0
    assert distributed.snapshots.snapshot_ids() == engine.snapshots.snapshot_ids() == [7, 8]
    assert distributed.snapshots.read_hint("EARLIEST") == 7
    assert file_kinds(distributed) == file_kinds(engine)
    assert {st.path for st in candidate_files(distributed)} == referenced_files(distributed).all()
    assert rows(distributed.read(tag="kept")) == rows(engine.read(tag="kept"))
    assert rows(distributed.read()) == rows(engine.read())
    again = lakespark.expire_snapshots(
        any_spark, "db.spark", retain_min=2, older_than_ms=FUTURE, warehouse=warehouse
    )
    assert again == engine.expire_snapshots(retain_min=2, older_than_ms=FUTURE) == Expiration(0, 7)


def test_orphan_file_job_deletes_what_table_remove_orphan_files_would(any_spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(10), dt=DAYS[0]))
    bucket = os.path.dirname(t.paths.data_file(t.bucket_path(t.live_entries()[0].partition, 0), "x"))
    orphans = [os.path.join(bucket, f"data-crashed-{i}.parquet") for i in range(5)]
    for path in orphans:
        Path(path).write_bytes(b"junk")
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    hour_ago = int(time.time() * 1000) - 3_600_000
    dry = lakespark.remove_orphan_files(
        any_spark, "db.t", older_than_ms=hour_ago, dry_run=True, warehouse=warehouse
    )
    assert dry == t.remove_orphan_files(older_than_ms=hour_ago, dry_run=True)
    assert dry.paths == tuple(sorted(orphans)) and all(os.path.exists(p) for p in orphans)
    done = lakespark.remove_orphan_files(any_spark, "db.t", older_than_ms=hour_ago, warehouse=warehouse)
    assert done.files == 5 and not done.dry_run and not any(os.path.exists(p) for p in orphans)
    assert t.read().num_rows == 10


def test_an_expiration_job_whose_tasks_fail_leaves_only_orphans(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "2"})
    for price in range(5):
        t.write(orders(range(10), price=price), overwrite=True)
    # a data file the expiration deletes, made undeletable: the task deleting it fails
    doomed = plan_expiration(t, retain_min=2, older_than_ms=FUTURE).files.data
    blocker = sorted(doomed)[0]
    os.remove(blocker)
    os.makedirs(os.path.join(blocker, "in-the-way"))
    with pytest.raises(Exception, match="in-the-way|directory|Directory"):
        lakespark.expire_snapshots(spark, "db.t", retain_min=2, older_than_ms=FUTURE, warehouse=warehouse)
    assert t.snapshots.snapshot_ids() == [4, 5] and t.snapshots.read_hint("EARLIEST") == 4
    assert rows(t.read(snapshot_id=4)) == rows(orders(range(10), price=3))
    shutil.rmtree(blocker)
    with open(blocker, "wb") as f:  # the file the failed task could not delete
        f.write(b"PAR1")
    two_days_ago = time.time() - 2 * 86400
    for st in candidate_files(t):
        os.utime(st.path, (two_days_ago, two_days_ago))
    assert t.remove_orphan_files().files > 0
    assert {st.path for st in candidate_files(t)} == referenced_files(t).all()
    assert rows(t.read()) == rows(orders(range(10), price=4))


def test_partition_expiration_runs_on_the_driver_and_after_spark_writes(spark, catalog, warehouse):
    t = catalog.create_table("db.p", ORDERS, partition_keys=["dt"])
    t.write(orders(range(4), dt=["2000-01-01", "2999-01-01"] * 2))
    kw = {"expiration_time": "7 d", "warehouse": warehouse}
    dry = lakespark.expire_partitions(spark, "db.p", dry_run=True, **kw)
    assert dry.partitions == ({"dt": "2000-01-01"},) and t.latest_snapshot_id() == 1
    done = lakespark.expire_partitions(spark, "db.p", commit_user="job", **kw)
    assert done == PartitionExpiration(2, dry.partitions, 1, 2)
    assert t.snapshot().commit_kind == CommitKind.OVERWRITE and t.snapshot().commit_user == "job"
    t.set_options({"partition.expiration-time": "7 d", "end-input.check-partition-expire": "true"})
    df = spark.createDataFrame(orders(range(4, 6), dt="2000-01-02"))
    df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.p")
    assert t.latest_snapshot_id() == 4 and t.snapshot().commit_kind == CommitKind.OVERWRITE
    assert sorted(t.read().column("dt").to_pylist()) == ["2999-01-01"] * 2
