"""Streaming reads through the ``paimon`` data source: scan modes, row kinds, restarts from a
checkpoint, limits, ``Trigger.AvailableNow`` and consumers under snapshot expiration."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, ReadMaxRows
from pyspark.sql.types import StringType

from lakehouse.errors import InvalidArgumentError, InvalidOptionError
from lakehouse.read.stream import StreamLimits
from lakehouse.spark.source import PaimonDataSource
from lakehouse.spark.types import spark_schema
from lakehouse.store import consumers

from ..conftest import ORDERS, orders, pk_orders_table

pytestmark = pytest.mark.spark

KINDS = {"read.changelog": "true"}


def stream(spark, warehouse: str, name: str = "db.t", **options: str):
    return spark.readStream.format("paimon").option("warehouse", warehouse).options(**options).load(name)


def micro_batches(df, checkpoint) -> list[list[tuple]]:
    """The rows of each micro-batch of ``df`` (sorted) until it has read what there was when it
    started; a later call with the same checkpoint goes on from there."""
    got: list[list[tuple]] = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _: got.append(sorted(tuple(r) for r in batch.collect())))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return got


def stream_reader(warehouse: str, name: str = "db.t", **options: str):
    """The stream reader Spark would make, outside Spark."""
    source = PaimonDataSource({"path": name, "warehouse": warehouse, **options})
    return source.streamReader(source.schema())


def read_between(reader, start: dict, end: dict) -> list[tuple]:
    """What Spark's tasks read from ``start`` to ``end``, sorted."""
    return sorted(
        tuple(row.values())
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    )


def drain(reader, start: dict | None = None) -> tuple[list[tuple], dict]:
    """Everything a stream reads now from ``start`` (default: its initial offset), and its new offset."""
    start = reader.initialOffset() if start is None else start
    end = reader.latestOffset(start, ReadAllAvailable())
    return read_between(reader, start, end), end


def test_an_append_table_streams_its_rows_then_each_new_file(any_spark, catalog, warehouse, tmp_path):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders([1, 2]))
    t.write(orders([3], dt="2024-01-02"))
    df = stream(any_spark, warehouse, **KINDS)
    assert df.isStreaming
    assert df.schema == spark_schema(t.schema.fields).add("_row_kind", StringType(), nullable=False)
    name = f"changes_{uuid.uuid4().hex}"
    query = (
        df.select("order_id", "dt", "_row_kind")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted(tuple(r) for r in any_spark.table(name).collect()) == [
        (1, "2024-01-01", "+I"),
        (2, "2024-01-01", "+I"),
        (3, "2024-01-02", "+I"),
    ]
    plain = stream(any_spark, warehouse)  # without read.changelog: the table's columns
    assert plain.schema == spark_schema(t.schema.fields)


def test_a_primary_key_stream_goes_on_from_its_checkpoint_with_updates_and_deletes(
    spark, catalog, warehouse, tmp_path
):
    t = pk_orders_table(catalog)
    t.write(orders(range(3)))
    df = stream(spark, warehouse, **KINDS).select("order_id", "price", "_row_kind")
    assert micro_batches(df, tmp_path) == [[(0, 1.0, "+I"), (1, 1.0, "+I"), (2, 1.0, "+I")]]
    t.write(orders([1], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    t.write(orders([2]).append_column("_row_kind", pa.array(["-D"])))
    t.write(orders([5], price=5.0))
    assert micro_batches(df, tmp_path) == [[(1, 2.0, "+U"), (2, 1.0, "-D"), (5, 5.0, "+I")]]
    assert micro_batches(df, tmp_path) == []  # nothing new


def test_a_changelog_producer_streams_its_changelog_files(spark, catalog, warehouse, tmp_path):
    kv = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    t = catalog.create_table(
        "db.t", kv, primary_keys=["k"], options={"bucket": "1", "changelog-producer": "lookup"}
    )
    t.write(pa.table({"k": [1, 2], "v": [10, 20]}, schema=kv))
    df = stream(spark, warehouse, **KINDS)
    assert micro_batches(df, tmp_path) == [[(1, 10, "+I"), (2, 20, "+I")]]
    t.write(pa.table({"k": [1], "v": [11]}, schema=kv))
    t.write(pa.table({"k": [2], "v": [20], "_row_kind": ["-D"]}))
    # the lookup compactions' changelog: the delta files would show (1, 11) as an insert
    assert micro_batches(df, tmp_path) == [[(1, 10, "-U"), (1, 11, "+U"), (2, 20, "-D")]]


def test_scan_modes_pick_where_a_stream_starts(catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS)
    for i in (1, 2, 3):
        t.write(orders([i]))
        time.sleep(0.002)  # each snapshot at a time of its own

    def ids(**options: str) -> list[int]:
        got, _ = drain(stream_reader(warehouse, **options))
        return [row[0] for row in got]

    assert ids() == ids(**{"scan.mode": "latest-full"}) == [1, 2, 3]
    assert ids(**{"scan.mode": "latest"}) == []
    assert ids(**{"scan.snapshot-id": "2"}) == ids(**{"scan.mode": "from-snapshot", "scan.snapshot-id": "2"})
    assert ids(**{"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}) == [2, 3]
    assert ids(**{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"}) == [1, 2, 3]
    assert ids(**{"scan.timestamp-millis": str(t.snapshot(2).time_millis)}) == [2, 3]
    assert ids(**{"scan.mode": "from-timestamp", "scan.timestamp-millis": "0"}) == [1, 2, 3]
    t.create_tag("v2", snapshot_id=2)
    assert ids(**{"scan.tag-name": "v2"}) == [2, 3]

    later = stream_reader(warehouse, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "5"})
    start = later.initialOffset()
    assert start == {"snapshot": 5, "full": False, "index": 0}
    assert later.latestOffset(start, ReadAllAvailable()) == start  # waits for snapshot 5
    t.write(orders([4]))
    t.write(orders([5]))
    assert drain(later, start) == (
        [(5, "2024-01-01", 5, 1.0, "PAID")],
        {"snapshot": 6, "full": False, "index": 0},
    )


def test_a_stream_of_an_empty_table_waits_for_its_first_snapshot(catalog, warehouse):
    t = pk_orders_table(catalog)
    reader = stream_reader(warehouse, **KINDS)
    start = reader.initialOffset()
    assert start == {"snapshot": 1, "full": True, "index": 0}
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    t.write(orders([1, 2]))
    t.write(orders([2]).append_column("_row_kind", pa.array(["-D"])))
    got, end = drain(reader, start)
    assert [(row[0], row[-1]) for row in got] == [(1, "+I"), (2, "+I"), (2, "-D")]  # rows of 1, changes of 2
    assert end == {"snapshot": 3, "full": False, "index": 0}


def test_a_full_scan_shows_each_key_with_the_kind_that_won_its_merge(catalog, warehouse):
    t = pk_orders_table(catalog)
    t.write(orders([1, 2]))
    t.write(orders([1], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    got, _ = drain(stream_reader(warehouse, **KINDS))
    assert [(row[0], row[3], row[-1]) for row in got] == [(1, 2.0, "+U"), (2, 1.0, "+I")]


def test_limits_cut_micro_batches_between_files(spark, catalog, warehouse, tmp_path):
    t = catalog.create_table("db.t", ORDERS)
    for i in range(3):
        t.write(orders([2 * i, 2 * i + 1]))  # a file of two rows per snapshot
    full = stream(spark, warehouse, **{"read.stream.maxFilesPerTrigger": "1"}).select("order_id")
    assert sorted(micro_batches(full, tmp_path / "files")) == [[(0,), (1,)], [(2,), (3,)], [(4,), (5,)]]
    rows = stream(spark, warehouse, **{"read.stream.maxRowsPerTrigger": "5"}).select("order_id")
    assert [len(batch) for batch in micro_batches(rows, tmp_path / "rows")] == [4, 2]
    changes = stream(spark, warehouse, **{"scan.snapshot-id": "1", "read.stream.maxFilesPerTrigger": "2"})
    batches = micro_batches(changes.select("order_id"), tmp_path / "changes")
    assert batches == [[(0,), (1,), (2,), (3,)], [(4,), (5,)]]  # snapshots 1 and 2, then 3


def test_limits_always_let_a_step_read_one_unit(catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(10)))
    reader = stream_reader(warehouse, **{"read.stream.maxRowsPerTrigger": "3"})
    start = reader.initialOffset()
    assert reader.getDefaultReadLimit() == ReadMaxRows(3)
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"snapshot": 2, "full": False, "index": 0}  # the one file, larger than the limit
    assert reader.latestOffset(start, ReadMaxFiles(5)) == end
    assert StreamLimits(files=2, rows=7).tighter(StreamLimits(rows=3, bytes=9)) == StreamLimits(2, 3, 9)
    assert StreamLimits(bytes=100).admits(1, 10**9, 100) and not StreamLimits(bytes=100).admits(1, 1, 101)


def test_available_now_reads_what_there_was_when_it_started(catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1]))
    reader = stream_reader(warehouse, **{"scan.mode": "latest", "read.stream.maxFilesPerTrigger": "1"})
    start = reader.initialOffset()
    t.write(orders([2]))
    t.write(orders([3]))
    reader.prepareForTriggerAvailableNow()
    t.write(orders([4]))  # after the trigger started: for the next run
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    second = reader.latestOffset(first, reader.getDefaultReadLimit())
    assert reader.latestOffset(second, reader.getDefaultReadLimit()) == second
    assert [row[0] for row in read_between(reader, start, first)] == [2]
    assert [row[0] for row in read_between(reader, first, second)] == [3]
    assert reader.partitions(second, second) == []


def test_a_consumer_keeps_the_snapshots_its_stream_still_needs(spark, catalog, warehouse, tmp_path):
    def run_twice(name: str, **options: str):
        """Stream ``name`` once, then expire all but its latest snapshot and stream it again."""
        t = catalog.create_table(name, ORDERS)
        t.write(orders([1]))
        t.write(orders([2]))
        df = stream(spark, warehouse, name, **options).select("order_id")
        assert micro_batches(df, tmp_path / name) == [[(1,), (2,)]]
        for i in (3, 4, 5):
            t.write(orders([i]))
        t.expire_snapshots(retain_min=1, older_than_ms=2**62)
        return t, lambda: micro_batches(df, tmp_path / name)

    t, again = run_twice("db.kept", **{"consumer-id": "etl"})
    assert consumers.next_snapshot(t, "etl") == t.snapshots.earliest_id() == 3
    assert again() == [[(3,), (4,), (5,)]]
    assert consumers.next_snapshot(t, "etl") == 6
    t.write(orders([6]))
    # a new query of the consumer starts where it stopped
    assert drain(stream_reader(warehouse, "db.kept", **{"consumer-id": "etl"}))[0] == [
        (6, "2024-01-01", 6, 1.0, "PAID")
    ]
    ignoring = {"consumer-id": "etl", "consumer.ignore-progress": "true"}
    fresh, _ = drain(stream_reader(warehouse, "db.kept", **ignoring))
    assert [row[0] for row in fresh] == [1, 2, 3, 4, 5, 6]  # latest-full: the rows of snapshot 6

    t, again = run_twice("db.gone")
    assert t.snapshots.earliest_id() == 5
    with pytest.raises(StreamingQueryException, match="snapshot 3, which a stream reads next, has expired"):
        again()


def test_batch_reads_with_read_changelog_show_row_kinds(spark, catalog, warehouse):
    t = pk_orders_table(catalog)
    t.write(orders([1, 2]))
    t.write(orders([2], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    load = spark.read.format("paimon").option("warehouse", warehouse)
    assert load.load("db.t").columns == ORDERS.names
    df = load.option("read.changelog", "true").load("db.t")
    assert df.columns == [*ORDERS.names, "_row_kind"]
    got = sorted((r.order_id, r.price, r._row_kind) for r in df.collect())
    assert got == [(1, 1.0, "+I"), (2, 2.0, "+U")]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"scan.mode": "from-snapshot"}, "starts at scan.snapshot-id or scan.tag-name: set it"),
        ({"scan.mode": "from-timestamp"}, "starts at scan.timestamp-millis"),
        ({"scan.mode": "latest", "scan.snapshot-id": "1"}, "does not start at scan.snapshot-id"),
        ({"scan.mode": "from-snapshot", "scan.timestamp-millis": "1"}, "does not start at scan.timestamp"),
        ({"scan.mode": "compacted-full"}, "unknown scan.mode 'compacted-full'; use one of default, latest"),
        ({"read.stream.maxFilesPerTrigger": "0"}, "must be at least 1"),
        ({"consumer.ignore-progress": "yes"}, "must be 'true' or 'false'"),
    ],
)
def test_bad_stream_options_say_what_to_do(catalog, warehouse, options, error):
    catalog.create_table("db.t", ORDERS).write(orders([1]))
    with pytest.raises(InvalidOptionError, match=error):
        stream_reader(warehouse, **options)


def test_streams_that_cannot_be_read_are_refused(catalog, warehouse):
    pk_orders_table(catalog).write(orders([1]))
    with pytest.raises(InvalidOptionError, match='has a primary key.*option\\("read.changelog", "true"\\)'):
        stream_reader(warehouse)
    with pytest.raises(InvalidOptionError, match=r"db.t\$snapshots is a system table: it can be read, not"):
        stream_reader(warehouse, "db.t$snapshots")
    with pytest.raises(InvalidArgumentError, match="consumer id"):
        stream_reader(warehouse, **KINDS, **{"consumer-id": "../x"})
