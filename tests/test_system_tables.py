"""System tables: Paimon's names, columns and types, and the values they report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError, SnapshotNotFoundError, TableNotFoundError
from lakehouse.store import consumers

from .conftest import orders, pk_orders_table, rows

COLUMNS = {  # Paimon's column names, in order
    "snapshots": [
        "snapshot_id",
        "schema_id",
        "commit_user",
        "commit_identifier",
        "commit_kind",
        "commit_time",
        "base_manifest_list",
        "delta_manifest_list",
        "changelog_manifest_list",
        "total_record_count",
        "delta_record_count",
        "changelog_record_count",
        "watermark",
        "next_row_id",
        "operation",
        "writer_version",
    ],
    "schemas": ["schema_id", "fields", "partition_keys", "primary_keys", "options", "comment", "update_time"],
    "options": ["key", "value"],
    "tags": [
        "tag_name",
        "snapshot_id",
        "schema_id",
        "commit_time",
        "record_count",
        "create_time",
        "time_retained",
    ],
    "branches": ["branch_name", "create_time"],
    "consumers": ["consumer_id", "next_snapshot_id"],
    "manifests": [
        "file_name",
        "file_size",
        "num_added_files",
        "num_deleted_files",
        "schema_id",
        "min_partition_stats",
        "max_partition_stats",
        "min_row_id",
        "max_row_id",
    ],
    "aggregation_fields": ["field_name", "field_type", "function", "function_options", "comment"],
    "partitions": [
        "partition",
        "record_count",
        "file_size_in_bytes",
        "file_count",
        "last_update_time",
        "created_at",
        "created_by",
        "updated_by",
        "options",
        "total_buckets",
        "done",
        "deleted_record_count",
    ],
    "buckets": [
        "partition",
        "bucket",
        "record_count",
        "file_size_in_bytes",
        "file_count",
        "last_update_time",
    ],
    "statistics": ["snapshot_id", "schema_id", "mergedRecordCount", "mergedRecordSize", "colstat"],
    "table_indexes": [
        "partition",
        "bucket",
        "index_type",
        "file_name",
        "file_size",
        "row_count",
        "dv_ranges",
        "row_range_start",
        "row_range_end",
        "index_field_id",
        "index_field_name",
    ],
    "files": [
        "partition",
        "bucket",
        "file_path",
        "file_format",
        "schema_id",
        "level",
        "record_count",
        "file_size_in_bytes",
        "min_key",
        "max_key",
        "null_value_counts",
        "min_value_stats",
        "max_value_stats",
        "min_sequence_number",
        "max_sequence_number",
        "creation_time",
        "deleteRowCount",
        "file_source",
        "first_row_id",
        "write_cols",
    ],
    "audit_log": ["rowkind", "order_id", "dt", "user_id", "price", "status"],
    "binlog": ["rowkind", "order_id", "dt", "user_id", "price", "status"],
    "ro": ["order_id", "dt", "user_id", "price", "status"],
}


@pytest.fixture
def table(catalog):
    t = pk_orders_table(catalog, **{"deletion-vectors.enabled": "true"})
    t.write(orders(range(4), dt=["2024-01-01", "2024-01-01", "2024-01-02", "2024-01-02"]))
    t.write(orders([1, 2], dt=["2024-01-01", "2024-01-02"], price=5.0))
    return t


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_every_system_table_has_paimons_columns(catalog, table, name):
    got = catalog.get_table(f"db.t${name}").read()
    assert got.column_names == COLUMNS[name]


def test_snapshots_schemas_and_options(catalog, table):
    snaps = catalog.get_table("db.t$snapshots").read().to_pylist()
    assert [s["snapshot_id"] for s in snaps] == table.snapshots.snapshot_ids()
    assert snaps[0]["commit_kind"] == "APPEND" and snaps[0]["delta_record_count"] == 4
    assert catalog.get_table("db.t$snapshots").read().schema.field("commit_time").type == pa.timestamp("ms")
    table.set_options({"snapshot.time-retained": "5 h"})
    table.add_column("note", pa.string())
    schemas = catalog.get_table("db.t$schemas").read().to_pylist()
    assert [s["schema_id"] for s in schemas] == [0, 1, 2]
    assert '"name":"note"' in schemas[2]["fields"] and schemas[0]["primary_keys"] == '["order_id","dt"]'
    options = dict(catalog.get_table("db.t$options").read().to_pylist()[i].values() for i in range(3))
    assert options["snapshot.time-retained"] == "5 h"
    table.rename_column("note", "remark")
    table.alter_column_type("user_id", pa.int64())
    table.drop_column("remark")
    table.remove_options(["snapshot.time-retained"])
    schemas = catalog.get_table("db.t$schemas").read().to_pylist()
    assert [s["schema_id"] for s in schemas] == [0, 1, 2, 3, 4, 5, 6]
    assert '"name":"remark"' in schemas[3]["fields"] and '"BIGINT"' in schemas[4]["fields"]
    assert "remark" not in schemas[5]["fields"] and "time-retained" not in schemas[6]["options"]
    keys = catalog.get_table("db.t$options").read().column("key").to_pylist()
    assert "snapshot.time-retained" not in keys and "bucket" in keys


def test_files_partitions_buckets_follow_the_chosen_snapshot(catalog, table):
    files = catalog.get_table("db.t$files").read().to_pylist()
    assert {f["partition"] for f in files} == {"{2024-01-01}", "{2024-01-02}"}
    assert sum(f["record_count"] for f in files) == sum(e.file.row_count for e in table.live_entries())
    assert all(f["file_format"] == "parquet" and f["min_key"].startswith("[") for f in files)
    assert "order_id=" in files[0]["min_value_stats"]
    first = catalog.get_table("db.t$files", options={"scan.snapshot-id": "1"}).read()
    assert sum(first.column("record_count").to_pylist()) == 4
    table.create_tag("one", snapshot_id=1)
    tagged = catalog.get_table("db.t$files").with_options({"scan.tag-name": "one"}).read()
    assert tagged.equals(first)
    parts = catalog.get_table("db.t$partitions").read().to_pylist()
    assert [p["partition"] for p in parts] == ["dt=2024-01-01", "dt=2024-01-02"]
    assert [p["total_buckets"] for p in parts] == [2, 2]
    buckets = catalog.get_table("db.t$buckets").read()
    assert sum(buckets.column("file_count").to_pylist()) == len(files)
    with pytest.raises(SnapshotNotFoundError):
        catalog.get_table("db.t$files", options={"scan.snapshot-id": "99"}).read()


def test_tags_consumers_manifests_indexes(catalog, table):
    table.create_tag("b", snapshot_id=1)
    table.create_tag("a")
    tags = catalog.get_table("db.t$tags").read().to_pylist()
    assert [(t["tag_name"], t["snapshot_id"]) for t in tags] == [("a", table.latest_snapshot_id()), ("b", 1)]
    assert tags[1]["record_count"] == 4
    consumers.record(table, "reader", 2)
    assert catalog.get_table("db.t$consumers").read().to_pylist() == [
        {"consumer_id": "reader", "next_snapshot_id": 2}
    ]
    manifests = catalog.get_table("db.t$manifests").read().to_pylist()
    assert sum(m["num_added_files"] - m["num_deleted_files"] for m in manifests) == len(table.live_entries())
    assert manifests[0]["min_partition_stats"] == "{2024-01-01}"
    table.write(orders(range(200), price=1.0))
    table.write(orders(range(0, 8, 2), price=3.0))  # small updates: older rows marked in vectors
    indexes = catalog.get_table("db.t$table_indexes").read().to_pylist()
    assert indexes and all(i["index_type"] == "DELETION_VECTORS" for i in indexes)
    assert all(r["f0"] for i in indexes for r in i["dv_ranges"])
    assert catalog.get_table("db.t$branches").read().num_rows == 0


def _with_statistics(table, content: bytes | None) -> None:
    """The latest snapshot pointing at a statistics file (as other engines' ANALYZE writes it)."""
    path = Path(table.paths.snapshot(table.latest_snapshot_id()))
    path.write_text(json.dumps({**json.loads(path.read_text()), "statistics": "stats-1"}))
    if content is not None:
        Path(table.paths.root, "statistics").mkdir()
        Path(table.paths.root, "statistics", "stats-1").write_bytes(content)


def test_statistics_of_another_engine_are_read(catalog, table):
    _with_statistics(table, b'{"snapshotId": 2, "schemaId": 0, "mergedRecordCount": 6, "colStats": {}}')
    (row,) = catalog.get_table("db.t$statistics").read().to_pylist()
    assert (row["snapshot_id"], row["mergedRecordCount"], row["mergedRecordSize"]) == (2, 6, None)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'{"snapshotId": 2, "mergedRecordCount": "many"}', "is corrupt"),
        (b'{"snapshotId": 2, "mergedRecordCount": 1e999}', "is corrupt"),
        (b"[1]", "is corrupt"),
        (b"{", "is corrupt"),
        (None, "is missing"),
    ],
    ids=["text-count", "infinite-count", "not-an-object", "truncated", "missing"],
)
def test_damaged_statistics_are_corrupt_naming_the_file(catalog, table, content, problem):
    _with_statistics(table, content)
    with pytest.raises(CorruptFileError, match=f"statistics file .*stats-1 of snapshot [0-9]+ {problem}"):
        catalog.get_table("db.t$statistics").read()


def test_row_tables(catalog, table):
    audit = catalog.get_table("db.t$audit_log").read()
    assert set(audit.column("rowkind").to_pylist()) == {"+I"}
    assert rows(audit.drop_columns(["rowkind"])) == rows(table.read())
    binlog = catalog.get_table("db.t$binlog").read()
    assert binlog.column("order_id").to_pylist()[0] == [audit.column("order_id")[0].as_py()]
    ro = catalog.get_table("db.t$ro").read()
    assert rows(ro) == rows(table.read())  # deletion-vector tables push every write to the top level
    table.write(orders([0], dt="2024-01-01", price=9.0).append_column("_row_kind", pa.array(["+U"])))
    kinds = dict(zip(*[catalog.get_table("db.t$audit_log").read().column(c).to_pylist()
                       for c in ("order_id", "rowkind")], strict=True))  # fmt: skip
    assert kinds[0] == "+U"


def test_read_optimized_skips_files_not_yet_compacted(catalog):
    t = pk_orders_table(catalog)
    t.write(orders(range(3)))
    assert catalog.get_table("db.t$ro").read().num_rows == 0  # only level 0 so far
    t.compact(full=True)
    t.write(orders([7]))
    assert rows(catalog.get_table("db.t$ro").read()) == rows(t.read(snapshot_id=2))


def test_aggregation_fields(catalog):
    t = pk_orders_table(catalog, **{"merge-engine": "aggregation", "fields.price.aggregate-function": "sum"})
    got = {r["field_name"]: r for r in catalog.get_table("db.t$aggregation_fields").read().to_pylist()}
    assert got["price"]["function"] == "[sum]"
    assert got["price"]["function_options"] == "[fields.price.aggregate-function]"
    assert got["user_id"]["function"] == "[]"
    assert t.name == "db.t"


def test_global_tables_and_unknown_names(catalog, table):
    catalog.create_table("db.u", pa.schema([pa.field("x", pa.int32())]), options={"bucket": "-1"})
    opts = catalog.get_table("sys.all_table_options").read().to_pylist()
    assert {"database_name": "db", "table_name": "t", "key": "bucket", "value": "2"} in opts
    assert {r["key"] for r in catalog.get_table("sys.catalog_options").read().to_pylist()} == {"warehouse"}
    with pytest.raises(TableNotFoundError, match=r"\$nope"):
        catalog.get_table("db.t$nope")
    with pytest.raises(TableNotFoundError):
        catalog.get_table("sys.nope")
    with pytest.raises(TableNotFoundError):
        catalog.get_table("db.missing$snapshots")
