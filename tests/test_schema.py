from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse.errors import (
    CorruptFileError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lakehouse.schema import TableSchema, is_widening, new_schema
from lakehouse.types import parse_type

from .conftest import ORDERS, orders, rows

# Laid out exactly as Jackson's pretty printer writes Paimon's own schema files.
JAVA_SCHEMA = """{
  "version" : 3,
  "id" : 0,
  "fields" : [ {
    "id" : 0,
    "name" : "order_id",
    "type" : "BIGINT NOT NULL"
  }, {
    "id" : 1,
    "name" : "tags",
    "type" : {
      "type" : "ARRAY",
      "element" : "STRING"
    }
  } ],
  "highestFieldId" : 1,
  "partitionKeys" : [ ],
  "primaryKeys" : [ "order_id" ],
  "options" : {
    "bucket" : "5"
  },
  "comment" : "",
  "timeMillis" : 1720496663041
}"""


def test_schema_json_round_trips_byte_for_byte():
    schema = TableSchema.from_json(JAVA_SCHEMA)
    assert schema.primary_keys == ("order_id",)
    assert str(schema.field("tags").type) == "ARRAY<STRING>"
    assert schema.to_json() == JAVA_SCHEMA


def test_old_schema_versions_get_paimon_defaults():
    schema = TableSchema.from_json('{"id": 0, "fields": [], "highestFieldId": -1}')
    assert schema.options == {"bucket": "1", "file.format": "orc"}


def test_new_schema_makes_primary_keys_not_null_and_keeps_options_as_strings():
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    s = new_schema("db.t", schema, ["id"], [], {"bucket": 2, "write-only": True})
    assert str(s.field("id").type) == "BIGINT NOT NULL"
    assert s.options == {"bucket": "2", "write-only": "true"}


@pytest.mark.parametrize(
    ("pk", "parts", "options", "error", "match"),
    [
        (["nope"], [], {"bucket": "1"}, SchemaMismatchError, "not among the columns"),
        (["dt"], ["dt"], {"bucket": "1"}, SchemaMismatchError, "must not equal the partition keys"),
        (["order_id"], ["dt"], {"bucket": "2"}, SchemaMismatchError, "must contain every partition key"),
        ([], [], {"bucket": "4"}, InvalidOptionError, "needs 'bucket-key'"),
        ([], [], {"bucket": "0"}, InvalidOptionError, "bucket=0"),
        ([], ["dt"], {"bucket": "2", "bucket-key": "dt"}, InvalidOptionError, "partition keys"),
        ([], [], {"bucket-key": "user_id"}, InvalidOptionError, "fixed bucket count"),
        ([], [], {"file.format": "orc"}, UnsupportedFeatureError, "parquet"),
        ([], [], {"target-file-size": "big"}, InvalidOptionError, "memory size"),
    ],
)
def test_invalid_tables_are_refused_with_what_to_change(pk, parts, options, error, match):
    with pytest.raises(error, match=match):
        new_schema("db.t", ORDERS, pk, parts, options)


def test_schema_changes_write_new_schema_files(catalog):
    t = catalog.create_table(
        "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    t.set_options({"file-index.bloom-filter.columns": "user_id"})
    t.add_column("note", pa.string())
    t.rename_column("note", "remark")
    t.alter_column_type("user_id", pa.int64())
    t.drop_column("remark")
    t.remove_options(["file-index.bloom-filter.columns"])
    assert t.schema_manager.schema_ids() == [0, 1, 2, 3, 4, 5, 6]
    latest = catalog.get_table("db.t").schema
    assert latest.id == 6
    assert latest.field_names == ["order_id", "dt", "user_id", "price", "status"]
    assert str(latest.field("user_id").type) == "BIGINT"
    assert latest.highest_field_id == 5  # the dropped column's id is never reused


def test_rename_rewrites_options_that_name_the_column(catalog):
    t = catalog.create_table(
        "db.t",
        ORDERS,
        options={
            "file-index.bloom-filter.columns": "user_id,status",
            "file-index.bloom-filter.user_id.fpp": "0.01",
            "fields.user_id.stats-mode": "full",
        },
    )
    t.rename_column("user_id", "customer")
    assert t.schema.options == {
        "file-index.bloom-filter.columns": "customer,status",
        "file-index.bloom-filter.customer.fpp": "0.01",
        "fields.customer.stats-mode": "full",
    }


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda t: t.rename_column("dt", "day"), "partition column"),
        (lambda t: t.rename_column("price", "status"), "already exists"),
        (lambda t: t.drop_column("order_id"), "primary key"),
        (lambda t: t.drop_column("missing"), "has no column"),
        (lambda t: t.add_column("price", pa.int32()), "already exists"),
        (lambda t: t.add_column("n", pa.field("n", pa.int32(), nullable=False)), "must be nullable"),
        (lambda t: t.alter_column_type("price", pa.float32()), "without losing information"),
        (lambda t: t.alter_column_type("status", pa.int32()), "without losing information"),
        (lambda t: t.alter_column_type("order_id", pa.int32()), "key column"),
        (lambda t: t.set_options({"bucket": "8"}), "cannot change once the table holds data"),
    ],
)
def test_refused_schema_changes_leave_the_schema_alone(catalog, change, match):
    t = catalog.create_table(
        "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    t.write(orders(range(3)))
    with pytest.raises(SchemaMismatchError, match=match):
        change(t)
    assert t.schema_manager.schema_ids() == [0]


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        ("TINYINT", "BIGINT", True),
        ("BIGINT", "INT", False),
        ("INT", "DOUBLE", True),
        ("BIGINT", "DOUBLE", False),
        ("INT", "DECIMAL(12, 2)", True),
        ("INT", "DECIMAL(5, 0)", False),
        ("DECIMAL(10, 2)", "DECIMAL(12, 4)", True),
        ("DECIMAL(10, 2)", "DECIMAL(10, 3)", False),
        ("VARCHAR(5)", "STRING", True),
        ("CHAR(5)", "VARCHAR(5)", True),
        ("STRING", "VARCHAR(5)", False),
        ("TIMESTAMP(3)", "TIMESTAMP(6)", True),
        ("TIMESTAMP(6)", "TIMESTAMP(3)", False),
        ("FLOAT", "DOUBLE", True),
        ("STRING", "INT", False),
    ],
)
def test_widening_rules(old, new, ok):
    assert is_widening(parse_type(old), parse_type(new)) is ok


def test_files_written_under_old_schemas_read_under_the_new_one(catalog):
    t = catalog.create_table(
        "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    t.write(orders(range(4), price=1.5))
    t.add_column("note", pa.string())
    t.rename_column("status", "state")
    t.alter_column_type("user_id", pa.int64())
    t.drop_column("price")
    t.write(
        pa.table(
            {
                "order_id": pa.array([3, 9], pa.int64()),
                "dt": ["2024-01-01"] * 2,
                "user_id": pa.array([30, 90], pa.int64()),
                "state": ["NEW", "NEW"],
                "note": ["a", "b"],
            }
        )
    )
    got = rows(t.read())
    assert [r["order_id"] for r in got] == [0, 1, 2, 3, 9]
    assert got[0] == {"order_id": 0, "dt": "2024-01-01", "user_id": 0, "state": "PAID", "note": None}
    assert got[3] == {"order_id": 3, "dt": "2024-01-01", "user_id": 30, "state": "NEW", "note": "a"}
    assert t.read().schema.field("user_id").type == pa.int64()
    # time travel reads a snapshot with the schema it was written under
    old = t.read(snapshot_id=1)
    assert old.column_names == ORDERS.names and old.num_rows == 4


def test_rows_read_from_a_file_carry_the_tables_fields_not_the_files(catalog):
    """The Parquet field ids stored with a file's columns stay in the file: each batch of a file,
    evolved or not, has the table's fields alone."""
    from lakehouse.store.data_reader import iter_data_file, read_data_file

    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(4)))
    [entry] = t.live_entries()
    where = t.bucket_path(entry.partition, entry.bucket)
    fields = list(t.schema.fields)
    batches = [read_data_file(t.store, where, entry.file, fields)]
    batches += list(iter_data_file(t.store, where, entry.file, fields, [], 3))
    for batch in batches:
        assert batch.column_names == ORDERS.names
        assert all(f.metadata is None for f in batch.schema)


def test_a_dropped_and_re_added_name_is_a_new_column(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1]))
    t.drop_column("status")
    t.add_column("status", pa.string())
    assert t.read().column("status").to_pylist() == [None]


def test_stats_of_files_written_before_a_widening_still_prune_correctly(catalog):
    import datetime as dt

    from lakehouse import col

    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ms")), ("n", pa.int32())])
    t = catalog.create_table("db.w", schema)
    t.write(
        pa.table(
            {
                "id": [1, 2],
                "ts": [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)],
                "n": pa.array([5, 6], pa.int32()),
            },
            schema=schema,
        )
    )
    t.alter_column_type("ts", pa.timestamp("us"))
    t.alter_column_type("n", pa.int64())
    t.write(
        pa.table(
            {"id": [3], "ts": [dt.datetime(2024, 1, 3, 0, 0, 0, 7)], "n": [2**40]}, schema=t.arrow_schema
        )
    )
    assert t.read(filter=col("ts") == dt.datetime(2024, 1, 2)).column("id").to_pylist() == [2]
    assert t.read(filter=col("ts") > dt.datetime(2024, 1, 2, 12)).column("id").to_pylist() == [3]
    assert t.plan(filter=col("ts") < dt.datetime(2024, 1, 1, 12)).stats["files_selected"] == 1
    assert sorted(t.read(filter=col("n") >= 6).column("id").to_pylist()) == [2, 3]


@pytest.mark.parametrize(
    "change",
    [
        lambda o: {**o, "primaryKeys": ["nope"]},
        lambda o: {**o, "fields": o["fields"] + o["fields"][:1]},
        lambda o: {**o, "id": "0"},
        lambda o: {**o, "fields": [{**o["fields"][0], "id": 1.5}]},
        lambda o: [o],
    ],
    ids=["key-is-no-field", "repeated-name", "id-as-text", "field-id-float", "not-an-object"],
)
def test_a_damaged_schema_file_is_corrupt_naming_it(catalog, change):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"])
    path = Path(t.paths.schema(0))
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(CorruptFileError, match="schema-0 is unreadable"):
        catalog.get_table("db.t")
