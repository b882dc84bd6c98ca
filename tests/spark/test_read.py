"""Reading tables through the ``paimon`` data source: types, splits, pushdown, time travel."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import datasource as sf

import lakehouse
from lakehouse import col
from lakehouse.errors import InvalidOptionError
from lakehouse.spark.reader import PaimonReader
from lakehouse.spark.source import PaimonDataSource
from lakehouse.spark.types import spark_schema
from lakehouse.system import table_system_names

from ..conftest import ORDERS, orders, rows

pytestmark = pytest.mark.spark

TYPED = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("flag", pa.bool_()),
        pa.field("tiny", pa.int8()),
        pa.field("amount", pa.decimal128(20, 4)),
        pa.field("ratio", pa.float32()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us")),
        pa.field("at_ms", pa.timestamp("ms", tz="UTC")),
        pa.field("raw", pa.binary()),
        pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("address", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int32())])),
    ]
)


def typed_rows() -> pa.Table:
    at = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
    return pa.table(
        {
            "id": [1, 2],
            "flag": [True, None],
            "tiny": [-3, None],
            "amount": [Decimal("12345678.1234"), None],
            "ratio": [0.5, None],
            "day": [datetime.date(2024, 2, 29), None],
            "at": [at, None],
            "at_ms": [datetime.datetime(2024, 1, 1, 0, 0, 1, 5000, tzinfo=datetime.UTC), None],
            "raw": [b"\x00\xff", None],
            "tags": [["a", "b"], None],
            "attrs": [[("k", 1)], None],
            "address": [{"city": "Oslo", "zip": 150}, None],
        },
        schema=TYPED,
    )


def reader(warehouse: str, name: str = "db.t", **options: str):
    """The reader of a session :func:`lakehouse.spark.register` set up (filter pushdown on)."""
    registered = type(PaimonDataSource.__name__, (PaimonDataSource,), {"pushdown": True})
    source = registered({"path": name, "warehouse": warehouse, **options})
    return source.reader(source.schema())


def test_spark_sees_the_table_types_and_rows(spark, catalog, warehouse):
    t = catalog.create_table("db.t", TYPED)
    t.write(typed_rows())
    df = spark.read.format("paimon").option("warehouse", warehouse).load("db.t")
    assert df.schema == spark_schema(t.schema.fields)
    assert df.schema.simpleString() == (
        "struct<id:int,flag:boolean,tiny:tinyint,amount:decimal(20,4),ratio:float,day:date,"
        "at:timestamp_ntz,at_ms:timestamp,raw:binary,tags:array<string>,attrs:map<string,bigint>,"
        "address:struct<city:string,zip:int>>"
    )
    assert not df.schema["id"].nullable and not df.schema["tags"].dataType.containsNull
    got = df.toArrow()
    expected = t.read()
    assert rows(got, "id") == rows(expected.cast(got.schema), "id")
    assert got.column("at_ms").to_pylist()[0] == datetime.datetime(
        2024, 1, 1, 0, 0, 1, 5000, tzinfo=datetime.UTC
    )


def test_one_spark_partition_per_split_by_name_path_and_sql(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(12), dt=["2024-01-01", "2024-01-02", "2024-01-03"] * 4))
    df = spark.read.format("paimon").option("warehouse", warehouse).load("db.t")
    assert df.rdd.getNumPartitions() == len(t.plan().splits) == 3
    by_path = spark.read.format("paimon").load(t.paths.root)
    by_path.createOrReplaceTempView("orders_by_path")
    got = spark.sql(
        "SELECT dt, count(*) AS n, sum(order_id) AS s FROM orders_by_path GROUP BY dt ORDER BY dt"
    )
    assert [tuple(r) for r in got.collect()] == [
        ("2024-01-01", 4, 18),
        ("2024-01-02", 4, 22),
        ("2024-01-03", 4, 26),
    ]


def test_pushed_filters_prune_by_partition_stats_and_index(spark, catalog, warehouse):
    t = catalog.create_table(
        "db.t", ORDERS, partition_keys=["dt"], options={"file-index.bloom-filter.columns": "order_id"}
    )
    for day in ("2024-01-01", "2024-01-02"):
        for start in (0, 100, 200):  # one file per write: even order ids 0..12, 100..112, 200..212
            t.write(orders(range(start, start + 14, 2), dt=day))
    exact = [sf.EqualTo(("dt",), "2024-01-01"), sf.GreaterThanOrEqual(("order_id",), 100)]
    inexact = [sf.GreaterThan(("price",), 0.5), sf.StringEndsWith(("status",), "D")]
    r = reader(warehouse, **{"filter-pushdown": "true"})
    assert list(r.pushFilters([*exact, *inexact])) == inexact
    assert r.plan().stats == dict(
        files_total=6,
        pruned_by_partition=3,
        pruned_by_bucket=0,
        pruned_by_stats=1,
        pruned_by_index=0,
        files_selected=2,
    )
    r = reader(warehouse, **{"filter-pushdown": "true"})
    assert list(r.pushFilters([sf.EqualTo(("order_id",), 101)])) == []  # within two files' ranges
    assert r.plan().stats == dict(
        files_total=6,
        pruned_by_partition=0,
        pruned_by_bucket=0,
        pruned_by_stats=4,
        pruned_by_index=2,
        files_selected=0,
    )

    def query(pushdown: str):
        load = spark.read.format("paimon").option("warehouse", warehouse).option("filter-pushdown", pushdown)
        return load.load("db.t").where("dt = '2024-01-01' AND order_id >= 100 AND status LIKE '%D'")

    pushed, plain = query("true"), query("false")
    expected = t.read(filter=(col("dt") == "2024-01-01") & (col("order_id") >= 100))
    assert rows(pushed.toArrow()) == rows(plain.toArrow()) == rows(expected) and expected.num_rows == 14
    assert list(reader(warehouse).pushFilters(exact)) == exact  # off unless asked for
    # without pushdown a DataFrame serves later queries with other filters correctly (with it,
    # Spark 4.3 would reuse the filtered read plan for the unfiltered count)
    df = spark.read.format("paimon").option("warehouse", warehouse).load("db.t")
    assert df.where("dt = '2024-01-01'").count() == 21 and df.count() == 42


def test_time_travel_reads_the_snapshot_with_its_schema(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(3)))
    first = t.snapshot(1)
    t.io.publish(f"{t.paths.tag_dir}/tag-v1", first.to_json().encode())
    t.add_column("note", pa.string())
    t.write(orders(range(3, 5)).append_column("note", pa.array(["x", "y"])))

    def load(**options: str):
        read = spark.read.format("paimon").option("warehouse", warehouse)
        return read.options(**options).load("db.t")

    for old in (
        load(**{"scan.snapshot-id": "1"}),
        load(**{"scan.timestamp-millis": str(first.time_millis)}),
        load(**{"scan.tag-name": "v1"}),
    ):
        assert old.columns == ORDERS.names
        assert sorted(r.order_id for r in old.collect()) == [0, 1, 2]
    latest = load()
    assert latest.columns == [*ORDERS.names, "note"] and latest.count() == 5


def test_system_tables_by_name(any_spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id"], options={"bucket": "2"})
    t.write(orders(range(3)))
    t.write(orders(range(2, 6), price=2.0))
    t.create_tag("v1", snapshot_id=1)
    load = any_spark.read.format("paimon").option("warehouse", warehouse)
    names = [f"db.t${name}" for name in table_system_names()] + ["sys.all_table_options"]
    for name in names:
        assert load.load(name).toArrow().to_pylist() == catalog.get_table(name).read().to_pylist(), name
    assert load.load("db.t$snapshots").count() == 2 and load.load("db.t$tags").count() == 1
    assert load.load("db.t$audit_log").count() == 6
    at_first = any_spark.read.format("paimon").option("warehouse", warehouse).option("scan.snapshot-id", "1")
    old = at_first.load("db.t$files").toArrow()
    assert (
        old.to_pylist()
        == catalog.get_table("db.t$files", options={"scan.snapshot-id": "1"}).read().to_pylist()
    )
    assert old.num_rows == 2 < load.load("db.t$files").count()
    save = any_spark.createDataFrame(orders([9])).write.format("paimon").option("warehouse", warehouse)
    with pytest.raises(Exception, match=r"db.t\$snapshots is a system table: it can be read, not written"):
        save.mode("append").save("db.t$snapshots")


def test_empty_table_and_workers_running_this_checkout(spark, catalog, warehouse):
    catalog.create_table("db.t", ORDERS)
    assert spark.read.format("paimon").option("warehouse", warehouse).load("db.t").count() == 0
    files = spark.sparkContext.parallelize([0], 1).map(lambda _: lakehouse.__file__).collect()
    assert files == [lakehouse.__file__]


def test_input_partitions_are_sized_for_the_parallelism(spark, catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    days = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    for start in range(0, 36, 12):  # three files of one bucket per day
        t.write(orders(range(start, start + 12), dt=days * 3))
    pk = catalog.create_table("db.pk", ORDERS, primary_keys=["order_id"], options={"bucket": "2"})
    pk.write(orders(range(10)))
    pk.write(orders(range(5)))  # two runs per bucket: both buckets merge
    for name, parallelism, sizes in (("db.t", 2, [6, 6]), ("db.t", 3, [4, 4, 4]), ("db.pk", 2, [1, 1])):
        table = catalog.get_table(name)
        read = PaimonReader(table, {}, spark_schema(table.schema.fields), parallelism)
        partitions = read.partitions()
        assert [len(p.splits) for p in partitions] == sizes
        files = [f.file_name for p in partitions for s in p.splits for f in s.files]
        assert sorted(files) == sorted(f.file_name for s in table.plan().splits for f in s.files)
    [merged, _] = partitions
    assert not merged.splits[0].raw_convertible and len(merged.splits[0].files) == 2
    unsized = reader(warehouse)
    assert [len(p.splits) for p in unsized.partitions()] == [3, 3, 3, 3]  # one per split, file by file
    # the registered data source carries the session's parallelism (2)
    assert spark.read.format("paimon").option("warehouse", warehouse).load("db.t").rdd.getNumPartitions() == 2


def test_append_splits_are_read_file_by_file(catalog):
    t = catalog.create_table("db.t", ORDERS, options={"file-index.bitmap.columns": "status"})
    for start in (0, 10, 20):
        data = orders(range(start, start + 10))
        t.write(data.set_column(4, "status", pa.array(["PAID", "NEW"] * 5)))
    flt = col("status") == "PAID"
    [split] = t.plan(filter=flt).splits
    assert len(split.files) == 3 and all(s is not None for s in split.selections)
    parts = split.by_file()
    assert [len(p.files) for p in parts] == [1, 1, 1]
    read = t.new_read(filter=flt)
    assert pa.concat_tables(read.read_split(p) for p in parts) == read.read_split(split)


def test_spark_finds_the_installed_source_by_name(connect_server, catalog, warehouse):
    """A session nobody registered ``paimon`` in finds it among the installed data sources
    (``pyspark_paimon.DefaultSource``)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(4)))
    fresh = RemoteSparkSession.builder.remote(connect_server.url).create()
    try:
        got = fresh.read.format("paimon").option("warehouse", warehouse).load("db.t").toArrow()
        assert rows(got) == rows(t.read())
    finally:
        fresh.stop()


def test_incremental_between_reads_the_changes_of_a_range(spark, catalog, warehouse):
    """``incremental-between``: changelog files of a table with a producer (updates as -U/+U,
    deletes as -D under ``read.changelog``), the new files of an append table - with
    ``streaming-read-overwrite`` also those a dynamic overwrite of an empty partition added."""
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                             options={"bucket": "1", "changelog-producer": "lookup"})  # fmt: skip
    t.write(orders(range(3), price=1.0))
    first = t.latest_snapshot_id()  # the write's APPEND snapshot, then the COMPACT one with its changelog
    t.write(orders([1], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    t.write(orders([2]).append_column("_row_kind", pa.array(["-D"])))

    def read(name, between, **options):
        df = spark.read.format("paimon").options(
            warehouse=warehouse, **{"incremental-between": between}, **options
        )
        return df.load(name)

    got = read("db.t", f"{first},{t.latest_snapshot_id()}", **{"read.changelog": "true"})
    assert sorted((r.order_id, r.price, r._row_kind) for r in got.collect()) == [
        (1, 1.0, "-U"), (1, 2.0, "+U"), (2, 1.0, "-D"),
    ]  # fmt: skip
    assert read("db.t", f"0,{t.latest_snapshot_id()}").columns == ORDERS.names
    a = catalog.create_table("db.a", ORDERS, partition_keys=["dt"])
    a.write(orders([1], dt="d1"))
    a.write(orders([2, 3], dt="d2"), overwrite={"dt": "d2"})
    assert [r.order_id for r in read("db.a", "1,2").collect()] == []
    got = read("db.a", "0,2", **{"streaming-read-overwrite": "true"}).where("order_id > 1")
    assert sorted(r.order_id for r in got.collect()) == [2, 3]
    with pytest.raises(Exception, match="incremental-between"):
        read("db.a", "1,9").collect()
    with pytest.raises(Exception, match="incremental-between"):
        read("db.a", "two").collect()
    with pytest.raises(InvalidOptionError, match="incremental-between"):
        lakehouse.spark.read(spark, "db.a", warehouse=warehouse, options={"incremental-between": "0,2"})
