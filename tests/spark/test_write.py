"""Writing through the ``paimon`` data source: one snapshot per write, routing, overwrite, failures."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lakehouse import Catalog, RowRouter
from lakehouse import spark as lakespark
from lakehouse.bucket.channels import AssignerSplit
from lakehouse.bucket.dynamic import key_hashes
from lakehouse.manifest import binary_row
from lakehouse.schema import new_schema
from lakehouse.snapshot import CommitKind
from lakehouse.spark import write
from lakehouse.spark.routing import hash_partition_keys
from lakehouse.write.scope import ENDED, SCOPES_DIR

from ..conftest import ORDERS, orders, pk_orders_table, rows, stored_hashes
from ..interop import oracle

pytestmark = pytest.mark.spark

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def data_files(root: str) -> list[str]:
    return [f for _, _, files in os.walk(root) for f in files if f.startswith("data-")]


@pytest.mark.interop
def test_append_is_one_snapshot_and_pypaimon_reads_it(any_spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    data = orders(range(30), dt=DAYS * 10)
    df = any_spark.createDataFrame(data).repartition(3)
    df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    assert t.latest_snapshot_id() == 1 and t.snapshot(1).commit_kind == CommitKind.APPEND
    assert rows(t.read()) == rows(data) == rows(oracle.read(warehouse, "db.t"))


@pytest.mark.interop
def test_primary_key_writes_routed_by_bucket(any_spark, catalog, warehouse):
    t = pk_orders_table(catalog, **{"bucket": "3"})
    write(
        any_spark.createDataFrame(orders(range(40), dt=DAYS[:2] * 20)),
        "db.t",
        warehouse=warehouse,
        num_tasks=4,
    )
    updates = orders(range(0, 40, 3), dt=DAYS[:2] * 7, price=9.0)
    write(any_spark.createDataFrame(updates).repartition(5), "db.t", warehouse=warehouse, num_tasks=4)
    expected = {r["order_id"]: r for r in orders(range(40), dt=DAYS[:2] * 20).to_pylist()}
    expected.update({r["order_id"]: r for r in updates.to_pylist()})
    assert rows(t.read()) == sorted(expected.values(), key=lambda r: r["order_id"])
    assert rows(oracle.read(warehouse, "db.t")) == rows(t.read())
    assert [t.snapshot(i).commit_kind for i in (1, 2)] == [CommitKind.APPEND] * 2


def test_unrouted_primary_key_write_is_refused_without_a_trace(spark, catalog, warehouse):
    t = pk_orders_table(catalog)
    df = spark.createDataFrame(orders(range(50))).repartition(3)
    with pytest.raises(Exception, match=r"lakehouse\.spark\.write\(df, 'db\.t'"):
        df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    assert t.latest_snapshot_id() is None and data_files(t.paths.root) == []
    df.coalesce(1).write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    assert t.read().num_rows == 50


def test_overwrite_replaces_written_partitions_or_everything(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(6), dt=DAYS[:2] * 3))
    save = spark.createDataFrame(orders([100, 101], dt=DAYS[0])).write.format("paimon")
    save.option("warehouse", warehouse).mode("overwrite").save("db.t")
    assert sorted(r["order_id"] for r in t.read().to_pylist()) == [1, 3, 5, 100, 101]
    assert t.snapshot(2).commit_kind == CommitKind.OVERWRITE
    save.option("warehouse", warehouse).option("dynamic-partition-overwrite", "false").mode("overwrite").save(
        "db.t"
    )
    assert sorted(r["order_id"] for r in t.read().to_pylist()) == [100, 101]


def test_failed_task_leaves_no_trace(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    # the second task gets a null order_id (NOT NULL): it fails, the first one's files are aborted
    df = spark.range(0, 200, numPartitions=2).selectExpr(
        "IF(id = 150, NULL, id) AS order_id",
        "'2024-01-01' AS dt",
        "CAST(id % 7 AS INT) AS user_id",
        "1.0D AS price",
        "'PAID' AS status",
    )
    with pytest.raises(Exception, match="NOT NULL column 'order_id' of table db.t received 1 null"):
        df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    # the abort waited for the other task (finished, or cancelled by Spark) before it listed:
    # of the write, only its ENDED marker is left
    left = [
        os.path.relpath(os.path.join(d, f), t.paths.root) for d, _, fs in os.walk(t.paths.root) for f in fs
    ]
    [marker] = [f for f in left if not f.startswith("schema")]
    assert t.latest_snapshot_id() is None
    assert marker.startswith(SCOPES_DIR + os.sep) and marker.endswith(os.sep + ENDED)


def dynamic_orders(catalog, **options: str):
    return catalog.create_table(
        "db.t",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "20", **options},
    )


@pytest.mark.interop
def test_dynamic_bucket_table_written_by_several_tasks(spark, catalog, warehouse):
    t = dynamic_orders(catalog, **{"dynamic-bucket.assigner-parallelism": "3"})
    expected: dict[tuple[int, str], dict] = {}
    for ids, price in ((range(120), 1.0), (range(0, 180, 4), 2.0), (range(5, 240, 7), 3.0)):
        ids = list(ids)
        data = orders(ids, dt=[DAYS[i % 2] for i in ids], price=price)
        write(spark.createDataFrame(data).repartition(4), "db.t", warehouse=warehouse)
        expected.update({(r["order_id"], r["dt"]): r for r in data.to_pylist()})
    got = rows(t.read(), ["order_id", "dt"])
    assert got == [expected[k] for k in sorted(expected)]  # every key once, at its latest version
    assert rows(oracle.read(warehouse, "db.t"), ["order_id", "dt"]) == got
    assert [t.snapshot(i).commit_kind for i in (1, 2, 3)] == [CommitKind.APPEND] * 3
    owners = {e.bucket % 3 for e in t.live_entries()}
    assert owners == {0, 1, 2}  # all three tasks created buckets
    hashes = stored_hashes(t)
    assert set(hashes) == {(e.partition, e.bucket) for e in t.live_entries()}
    assert sum(len(h) for h in hashes.values()) == len(expected)
    # overwriting a partition: its keys are assigned afresh, again by three tasks
    day = orders(range(300, 390), dt=DAYS[0], price=4.0)
    write(spark.createDataFrame(day), "db.t", mode="overwrite", warehouse=warehouse)
    kept = [r for r in got if r["dt"] != DAYS[0]]
    now = rows(pa.Table.from_pylist(kept + day.to_pylist(), schema=ORDERS), ["order_id", "dt"])
    assert (
        rows(t.read(), ["order_id", "dt"]) == rows(oracle.read(warehouse, "db.t"), ["order_id", "dt"]) == now
    )
    assert sum(len(h) for h in stored_hashes(t).values()) == len(now)
    first_day = binary_row.serialize(binary_row.encode_row([DAYS[0]], t.schema.partition_types()), 1)
    assert {e.bucket % 3 for e in t.live_entries() if e.partition == first_day} == {0, 1, 2}


def test_unrouted_dynamic_bucket_write_is_refused_without_a_trace(spark, catalog, warehouse):
    t = dynamic_orders(catalog, **{"dynamic-bucket.assigner-parallelism": "2"})
    df = spark.createDataFrame(orders(range(50))).repartition(3)
    with pytest.raises(Exception, match=r"received rows of another assigner's channel.* lakehouse\.spark"):
        df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    assert t.latest_snapshot_id() is None and data_files(t.paths.root) == []
    write(df, "db.t", warehouse=warehouse)
    assert t.read().num_rows == 50


def test_channels_reach_the_spark_partition_of_their_number(spark):
    keys = hash_partition_keys(5)
    df = spark.createDataFrame([(int(k),) for k in keys], "k INT").repartition(5, "k")
    placed = {r.k: r.p for r in df.select("k", F.spark_partition_id().alias("p")).collect()}
    assert [placed[int(k)] for k in keys] == list(range(5))


def test_fixed_bucket_routing_matches_the_buckets_written(catalog):
    t = pk_orders_table(catalog, bucket="4")
    data = orders(range(200), dt=DAYS * 66 + DAYS[:2])
    t.write(data)
    written = {(e.partition, e.bucket) for e in t.live_entries()}
    router = t.new_row_router(4)
    buckets = router.route(*(data.column(k).combine_chunks() for k in router.columns))
    partitions = [
        binary_row.serialize(binary_row.encode_row([d], t.schema.partition_types()), 1) for d in DAYS
    ]
    routed = {
        (partitions[DAYS.index(d)], int(b))
        for d, b in zip(data.column("dt").to_pylist(), buckets, strict=True)
    }
    assert routed == written


def test_dynamic_bucket_routing_sends_each_key_to_its_assigner():
    options = {"bucket": "-1", "dynamic-bucket.initial-buckets": "2"}
    schema = new_schema("db.dyn", ORDERS, ["order_id", "dt"], ["dt"], options)
    data = orders(range(600), dt=DAYS * 200)
    router = RowRouter(schema, 3)
    channels = router.route(*(data.column(c).combine_chunks() for c in router.columns))
    keys = key_hashes(data, ["order_id"], [f.type for f in schema.fields_named(["order_id"])])
    days = np.array(data.column("dt").to_pylist())
    for day in DAYS:
        of_day = np.flatnonzero(days == day)
        partition_hash = int(
            binary_row.encode_rows([pa.array([day])], schema.partition_types()).hash_codes()[0]
        )
        for split in AssignerSplit.tasks(3, 2):  # 3 channels, 2 assigners per partition
            assert (
                split.routes_here(partition_hash, keys[of_day]) == (channels[of_day] == split.assign_id)
            ).all()
        assert len(set(channels[of_day].tolist())) == 2
    assert set(channels.tolist()) == {0, 1, 2}


@pytest.mark.interop
def test_cross_partition_table_written_from_one_task(spark, catalog, warehouse):
    """Keys move partitions through Spark too; an un-routed write from several tasks is refused."""
    t = catalog.create_table("db.x", ORDERS, primary_keys=["order_id"], partition_keys=["dt"],
                             options={"bucket": "-1"})  # fmt: skip
    t.write(orders(range(10), dt=DAYS[0]))
    moved = spark.createDataFrame(orders(range(5, 15), dt=DAYS[1], price=2.0)).repartition(3)
    write(moved, "db.x", warehouse=warehouse)
    assert sorted((r["order_id"], r["dt"]) for r in rows(t.read())) == (
        [(i, DAYS[0]) for i in range(5)] + [(i, DAYS[1]) for i in range(5, 15)]
    )
    assert rows(t.read()) == rows(oracle.read(warehouse, "db.x"))
    before, files = t.latest_snapshot_id(), set(data_files(warehouse))
    again = spark.createDataFrame(orders(range(10), dt=DAYS[2])).repartition(2)
    with pytest.raises(Exception, match="cross-partition upsert table db.x"):
        again.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.x")
    assert t.latest_snapshot_id() == before and set(data_files(warehouse)) == files


@pytest.mark.interop
def test_spark_writes_reads_and_compacts_a_table_on_s3(any_spark, s3_warehouse):
    uri, s3 = s3_warehouse
    catalog = Catalog(uri, options=s3)
    catalog.create_database("db")
    t = pk_orders_table(catalog)
    data = orders(range(40), dt=DAYS[:2] * 20)
    write(any_spark.createDataFrame(data), "db.t", warehouse=uri, options=s3)
    write(any_spark.createDataFrame(orders(range(10), price=3.0)), "db.t", warehouse=uri, options=s3)
    assert lakespark.compact(any_spark, "db.t", full=True, warehouse=uri, options=s3).snapshot_id == 3
    got = any_spark.read.format("paimon").option("warehouse", uri).options(**s3).load("db.t").toArrow()
    assert rows(got) == rows(t.read()) == rows(oracle.read(uri, "db.t", s3))
    assert got.num_rows == 45  # ids 1, 3, .. 9 of the first day are new keys
    assert [r["order_id"] for r in rows(t.read()) if r["price"] == 3.0] == list(range(10))


def test_a_commit_identifier_commits_once_per_user_with_its_properties(spark, catalog, warehouse):
    """``commit.identifier`` with ``commit.user``: a replayed write of an identifier the user
    committed is dropped without a trace; ``commit.properties`` land on the snapshots, and a
    write with properties commits even when it has no rows (the properties are the point)."""
    t = pk_orders_table(catalog, **{"changelog-producer": "lookup"})
    user = {"commit.user": "feeder"}

    def once(ids, identifier: int, source: str) -> None:
        options = {
            **user,
            "commit.identifier": str(identifier),
            "commit.properties": f'{{"source": "{source}"}}',
        }
        write(spark.createDataFrame(orders(ids, dt=DAYS[0])), "db.t", warehouse=warehouse, options=options)

    once(range(3), 1, "5")
    files = sorted(data_files(warehouse))
    once(range(3, 6), 1, "6")  # a replay of identifier 1: its rows are not committed, its files gone
    assert [r["order_id"] for r in rows(t.read())] == [0, 1, 2] and sorted(data_files(warehouse)) == files
    assert {t.snapshot(i).properties["source"] for i in t.snapshots.snapshot_ids()} == {
        "5"
    }  # data, compaction
    once([], 2, "7")
    latest = t.snapshots.latest()
    assert (latest.commit_kind, latest.commit_identifier, latest.properties) == (
        CommitKind.APPEND,
        2,
        {"source": "7"},
    )
    with pytest.raises(Exception, match="InvalidOptionError.*commit.identifier"):
        write(spark.createDataFrame(orders([9], dt=DAYS[0])), "db.t", warehouse=warehouse,
              options={"commit.identifier": "3"})  # fmt: skip
    with pytest.raises(Exception, match="InvalidOptionError.*JSON object of strings"):
        write(spark.createDataFrame(orders([9], dt=DAYS[0])), "db.t", warehouse=warehouse,
              options={"commit.properties": '{"n": 1}'})  # fmt: skip
    assert t.refresh().latest_snapshot_id() == latest.id
