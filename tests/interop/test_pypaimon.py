"""Tables we write read identically in pypaimon, and tables pypaimon writes read identically here."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pypaimon.schema.schema_change import SchemaChange

from lakehouse import Catalog
from lakehouse.bucket.fixed import fixed_buckets

from ..conftest import ORDERS, orders, rows
from . import oracle

pytestmark = pytest.mark.interop


def same(ours: pa.Table, theirs: pa.Table, key) -> None:
    assert ours.num_rows == theirs.num_rows
    assert rows(ours, key) == rows(theirs.select(ours.column_names), key)


# ---- table kinds ---------------------------------------------------------------------------


def _append_commits(write):
    write(orders(range(0, 6), dt=["2024-01-01", "2024-01-02"] * 3))
    write(orders(range(6, 9), dt="2024-01-03", price=2.5))


def _pk_commits(write, with_deletes: bool):
    write(orders(range(40), dt=["2024-01-01", "2024-01-02"] * 20, price=1.0))
    write(orders(range(0, 40, 3), dt=["2024-01-01", "2024-01-02"] * 7, price=2.0))
    write(orders(range(1, 40, 5), dt=["2024-01-02", "2024-01-01"] * 4, price=3.0, status="SHIPPED"))
    if with_deletes:
        gone = orders([0, 2, 4, 39], dt=["2024-01-01"] * 3 + ["2024-01-02"])
        write(gone.append_column("_row_kind", pa.array(["-D"] * 4)))


PK_OPTIONS = {"bucket": "4"}


def test_pypaimon_reads_our_append_table(catalog, warehouse):
    t = catalog.create_table("db.a", ORDERS, partition_keys=["dt"])
    _append_commits(t.write)
    same(t.read(), oracle.read(warehouse, "db.a"), "order_id")


def test_we_read_pypaimon_append_table(warehouse):
    oracle.create(warehouse, "db.a", ORDERS, partition_keys=["dt"])
    _append_commits(lambda d: oracle.write(warehouse, "db.a", d))
    same(Catalog(warehouse).get_table("db.a").read(), oracle.read(warehouse, "db.a"), "order_id")


def test_pypaimon_reads_our_primary_key_table(catalog, warehouse):
    t = catalog.create_table(
        "db.p", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=PK_OPTIONS
    )
    _pk_commits(t.write, with_deletes=True)
    ours = t.read()
    assert ours.num_rows == 36
    same(ours, oracle.read(warehouse, "db.p"), ["order_id", "dt"])


def test_we_read_pypaimon_primary_key_table_and_place_keys_in_its_buckets(warehouse):
    oracle.create(warehouse, "db.p", ORDERS, ["order_id", "dt"], ["dt"], PK_OPTIONS)
    _pk_commits(lambda d: oracle.write(warehouse, "db.p", d), with_deletes=False)
    table = Catalog(warehouse).get_table("db.p")
    same(table.read(), oracle.read(warehouse, "db.p"), ["order_id", "dt"])
    key_type = [table.schema.field("order_id").type]
    for e in table.live_entries():
        data = pq.ParquetFile(
            f"{table.paths.root}/{table.bucket_path(e.partition, e.bucket)}/{e.file.file_name}"
        )
        keys = data.read(columns=["order_id"]).column("order_id")
        assert set(fixed_buckets([keys], key_type, 4).tolist()) == {e.bucket}


def test_mixed_writers_on_one_primary_key_table(catalog, warehouse):
    t = catalog.create_table(
        "db.p", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=PK_OPTIONS
    )
    t.write(orders(range(10), price=1.0))
    oracle.write(warehouse, "db.p", orders(range(5, 15), price=2.0))
    t.write(orders(range(12, 20), price=3.0))
    ours = t.read()
    assert [r["price"] for r in rows(ours)] == [1.0] * 5 + [2.0] * 7 + [3.0] * 8
    same(ours, oracle.read(warehouse, "db.p"), "order_id")


def test_manifests_merged_by_copying_blocks_read_the_same_everywhere(catalog, warehouse):
    """Small manifests that only add files are merged by copying their encoded blocks (one of
    pypaimon's, written with its own Avro schema, is merged entry by entry): the merged manifests
    list every file, prune partitions by their combined ranges, and read the same in pypaimon."""
    from lakehouse import col
    from lakehouse.manifest.files import ManifestStore

    t = catalog.create_table("db.m", ORDERS, partition_keys=["dt"], options={"manifest.merge-min-count": "3"})
    days = [f"2024-01-0{d}" for d in range(1, 6)]
    copied = []
    original = ManifestStore.concat_manifests
    ManifestStore.concat_manifests = lambda self, metas: copied.append(len(metas)) or original(self, metas)
    try:
        for i in range(12):
            write = t.write if i != 5 else (lambda d: oracle.write(warehouse, "db.m", d))
            write(orders(range(10 * i, 10 * i + 10), dt=days[i % 5], price=float(i)))
    finally:
        ManifestStore.concat_manifests = original
    assert copied  # merges that copied blocks happened
    manifests = t.store.manifests().data_manifests(t.snapshot())
    assert len(manifests) < 12 and sum(m.num_added_files for m in manifests) == len(t.live_entries()) == 12
    same(t.read(), oracle.read(warehouse, "db.m"), "order_id")
    for day in (days[0], days[4]):
        plan = t.plan(filter=col("dt") == day)
        assert plan.stats["files_selected"] == sum(1 for i in range(12) if i % 5 == days.index(day))
        theirs = oracle.read(warehouse, "db.m")
        same(
            t.read(filter=col("dt") == day),
            theirs.filter(pa.compute.equal(theirs.column("dt"), day)),
            "order_id",
        )


def test_pypaimon_reads_our_thin_mode_and_overwritten_tables(catalog, warehouse):
    t = catalog.create_table(
        "db.p",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={**PK_OPTIONS, "data-file.thin-mode": "true"},
    )
    _pk_commits(t.write, with_deletes=True)
    t.write(orders([100, 101], dt="2024-01-02"), overwrite={"dt": "2024-01-02"})
    same(t.read(), oracle.read(warehouse, "db.p"), ["order_id", "dt"])


# ---- every type ----------------------------------------------------------------------------

ALL_TYPES = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("bigdec", pa.decimal128(30, 5)),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("d", pa.date32()),
        ("t", pa.time32("ms")),
        ("ts0", pa.timestamp("s")),
        ("ts3", pa.timestamp("ms")),
        ("ts6", pa.timestamp("us")),
        ("ts9", pa.timestamp("ns")),
        ("ltz", pa.timestamp("us", tz="UTC")),
        ("arr", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.int64())),
        ("row", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ]
)


def _all_types_data() -> pa.Table:
    when = dt.datetime(2024, 3, 1, 12, 30, 45, 123456)
    return pa.table(
        {
            "id": [1, 2, 3],
            "b": [True, False, None],
            "i8": [-128, 127, None],
            "i16": [-32768, 32767, None],
            "i32": [-(2**31), 2**31 - 1, None],
            "i64": [-(2**63), 2**63 - 1, None],
            "f32": [1.5, -0.25, None],
            "f64": [1e300, -2.5, None],
            "dec": [Decimal("12345678.90"), Decimal("-0.01"), None],
            "bigdec": [Decimal("1234567890123456789012345.12345"), Decimal("-1.00001"), None],
            "s": ["hello", "日本語テキスト and more", None],
            "bin": [b"\x00\x01", b"x" * 40, None],
            "d": [dt.date(2024, 1, 1), dt.date(1969, 12, 31), None],
            "t": [dt.time(0, 0, 0, 1000), dt.time(23, 59, 59, 999000), None],
            "ts0": [when.replace(microsecond=0), dt.datetime(1960, 1, 1), None],
            "ts3": [when.replace(microsecond=123000), dt.datetime(1960, 1, 1, 0, 0, 0, 5000), None],
            "ts6": [when, dt.datetime(1960, 1, 1, 0, 0, 0, 5), None],
            "ts9": pa.array([1_709_296_245_123_456_789, -1, None], pa.timestamp("ns")),
            "ltz": [when.replace(tzinfo=dt.UTC), dt.datetime(2000, 1, 1, tzinfo=dt.UTC), None],
            "arr": [[1, None, 3], [], None],
            "m": [[("a", 1), ("b", None)], [], None],
            "row": [{"x": 1, "y": "a"}, {"x": None, "y": None}, None],
        },
        schema=ALL_TYPES,
    )


def test_pypaimon_reads_our_table_with_every_type(catalog, warehouse):
    t = catalog.create_table("db.all", ALL_TYPES)
    t.write(_all_types_data())
    ours = t.read()
    assert ours.equals(_all_types_data())
    same(ours, oracle.read(warehouse, "db.all"), "id")


def test_we_read_pypaimon_table_with_every_type(warehouse):
    oracle.create(warehouse, "db.all", ALL_TYPES)
    oracle.write(warehouse, "db.all", _all_types_data())
    ours = Catalog(warehouse).get_table("db.all").read()
    assert rows(ours, "id") == rows(_all_types_data(), "id")
    same(ours, oracle.read(warehouse, "db.all"), "id")


def test_our_primary_key_table_with_every_type(catalog, warehouse):
    t = catalog.create_table("db.allpk", ALL_TYPES, primary_keys=["id"], options={"bucket": "2"})
    t.write(_all_types_data())
    t.write(_all_types_data().slice(1, 1))
    ours = t.read()
    assert rows(ours, "id") == rows(_all_types_data(), "id")
    # pypaimon's merging reader drops the nanoseconds of TIMESTAMP(9); compare the rest
    same(ours.drop_columns(["ts9"]), oracle.read(warehouse, "db.allpk"), "id")


# ---- schema evolution ----------------------------------------------------------------------


# after: add note, rename user_id -> customer, widen it to BIGINT, drop status
EVOLVED_BATCH = pa.table(
    {
        "order_id": pa.array([2, 7], pa.int64()),
        "dt": ["2024-01-01"] * 2,
        "customer": pa.array([20, 70], pa.int64()),
        "price": [1.0, 1.0],
        "note": ["n2", "n7"],
    }
)
EVOLVED_ROWS = [(0, 0, None), (1, 1, None), (2, 20, "n2"), (3, 3, None), (7, 70, "n7")]


def _check_evolved(ours: pa.Table, warehouse: str) -> None:
    assert [(r["order_id"], r["customer"], r["note"]) for r in rows(ours)] == EVOLVED_ROWS
    same(ours, oracle.read(warehouse, "db.e"), "order_id")


def test_pypaimon_reads_our_evolved_table(catalog, warehouse):
    t = catalog.create_table(
        "db.e", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    t.write(orders(range(4)))
    t.add_column("note", pa.string())
    t.rename_column("user_id", "customer")
    t.alter_column_type("customer", pa.int64())
    t.drop_column("status")
    t.write(EVOLVED_BATCH)
    _check_evolved(t.read(), warehouse)


def test_we_read_pypaimon_evolved_table(warehouse):
    oracle.create(warehouse, "db.e", ORDERS, ["order_id", "dt"], ["dt"], {"bucket": "2"})
    oracle.write(warehouse, "db.e", orders(range(4)))
    oracle.alter(warehouse, "db.e", [SchemaChange.add_column("note", _paimon_type("STRING"))])
    oracle.alter(warehouse, "db.e", [SchemaChange.rename_column("user_id", "customer")])
    oracle.alter(warehouse, "db.e", [SchemaChange.update_column_type("customer", _paimon_type("BIGINT"))])
    oracle.alter(warehouse, "db.e", [SchemaChange.drop_column("status")])
    oracle.write(warehouse, "db.e", EVOLVED_BATCH)
    _check_evolved(Catalog(warehouse).get_table("db.e").read(), warehouse)


def _paimon_type(text: str):
    from pypaimon.schema.data_types import AtomicType

    return AtomicType(text)


def test_no_temporary_files_remain(catalog, warehouse):
    t = catalog.create_table(
        "db.p", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=PK_OPTIONS
    )
    _pk_commits(t.write, with_deletes=True)
    leftovers = [f for _, _, fs in os.walk(warehouse) for f in fs if f.endswith(".tmp")]
    assert leftovers == []


def test_deletes_written_by_pypaimon_remove_their_keys(warehouse):
    """pypaimon marks deletes through ``rowkind.field`` and records no retract count for them;
    merging still has to honour the -D (Paimon semantics), whatever pypaimon's own reader shows."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("kind", pa.string())])
    oracle.create(warehouse, "db.k", schema, ["id"], [], {"bucket": "1", "rowkind.field": "kind"})
    oracle.write(
        warehouse,
        "db.k",
        pa.table(
            {"id": [1, 2, 3, 2], "v": ["a", "b", "c", "b"], "kind": ["+I", "+I", "+I", "-D"]}, schema=schema
        ),
    )
    table = Catalog(warehouse).get_table("db.k")
    assert [e.file.delete_row_count for e in table.live_entries()] == [0]
    assert table.read().column("id").to_pylist() == [1, 3]


def test_we_read_pypaimon_dynamic_bucket_table_and_its_index_manifest(warehouse):
    oracle.create(warehouse, "db.dyn", ORDERS, ["order_id", "dt"], ["dt"])  # bucket -1: hash index
    _pk_commits(lambda d: oracle.write(warehouse, "db.dyn", d), with_deletes=False)
    table = Catalog(warehouse).get_table("db.dyn")
    same(table.read(), oracle.read(warehouse, "db.dyn"), ["order_id", "dt"])
    snapshot = table.snapshots.latest()
    index = table.manifests().read_index_manifest(snapshot.index_manifest)
    assert {e.index_file.index_type for e in index} == {"HASH"}
    assert sum(e.index_file.row_count for e in index) == 40  # one hash per key


def test_pypaimon_reads_tables_that_carry_file_indexes(catalog, warehouse):
    options = {
        "file-index.bloom-filter.columns": "user_id",
        "file-index.bloom-filter.user_id.items": "100",
        "file-index.bitmap.columns": "status",
        "file-index.bsi.columns": "order_id",
        "file-index.in-manifest-threshold": "16 b",
    }
    t = catalog.create_table("db.idx", ORDERS, partition_keys=["dt"], options=options)
    _append_commits(t.write)
    small = catalog.create_table(
        "db.small",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={
            **PK_OPTIONS,
            "file-index.bitmap.columns": "status",
            "file-index.in-manifest-threshold": "64 kb",
        },
    )
    _pk_commits(small.write, with_deletes=True)
    assert all(e.file.extra_files for e in t.live_entries())
    assert all(e.file.embedded_index for e in small.live_entries())
    same(t.read(), oracle.read(warehouse, "db.idx"), "order_id")
    same(small.read(), oracle.read(warehouse, "db.small"), ["order_id", "dt"])
