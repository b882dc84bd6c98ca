"""What a newer Paimon writes and this engine does not know: the table opens, what Paimon's layout
lets it read reads, and the rest is an ``UnsupportedFeatureError`` naming the table, the column or
file and the feature - never ``CorruptFileError`` (the files are valid, the engine is older)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse import col
from lakehouse.errors import CorruptFileError, UnsupportedFeatureError
from lakehouse.fileindex import format as fileindex_format
from lakehouse.manifest.entries import IndexFileMeta
from lakehouse.types import NewerType, parse_type
from lakehouse.write.message import CommitMessage

from .conftest import ORDERS, orders, rows
from .interop import oracle

VARIANT = pa.struct(
    [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), nullable=False)]
)
NEWER = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("v", VARIANT), ("vec", pa.list_(pa.float32(), 3))]
)


def newer_rows() -> pa.Table:
    variants = [
        {"value": b"\x0c\x01", "metadata": b"\x01\x00\x00"},
        {"value": b"\x0c\x02", "metadata": b"\x01\x00\x00"},
    ]
    return pa.table(
        {"id": [1, 2], "name": ["a", "b"], "v": variants, "vec": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}, NEWER
    )


def test_types_of_a_newer_paimon_parse_and_keep_their_spelling():
    vector = {"type": "VECTOR", "element": "FLOAT", "length": 3, "nullable": True}
    for spelling in ("VARIANT", "BLOB NOT NULL", "GEOGRAPHY(4326)", vector):
        dtype = parse_type(spelling)
        assert isinstance(dtype, NewerType) and dtype.to_json() == spelling
        assert parse_type(dtype.copy(False).to_json()) == dtype.copy(False)
    assert parse_type(vector).copy(False).to_json()["nullable"] is False
    for broken in ("{not a type", 12, {"fields": []}):
        with pytest.raises(ValueError, match="cannot parse"):
            parse_type(broken)


@pytest.mark.interop
def test_variant_and_vector_columns_read_as_paimon_stores_them(catalog, warehouse):
    oracle.create(warehouse, "db.n", NEWER)
    oracle.write(warehouse, "db.n", newer_rows())
    t = catalog.get_table("db.n")
    assert [type(f.type).__name__ for f in t.schema.fields[2:]] == ["NewerType", "NewerType"]
    assert t.read().equals(oracle.read(warehouse, "db.n")) and t.read().equals(newer_rows())
    assert t.read(columns=["id", "name"], filter=col("name") == "b").to_pylist() == [{"id": 2, "name": "b"}]
    with pytest.raises(UnsupportedFeatureError, match=r"table db\.n: column 'v' has type VARIANT.*filter on"):
        t.read(filter=col("v").is_null())
    with pytest.raises(UnsupportedFeatureError, match=r"table db\.n: column 'v' has type VARIANT.*not write"):
        t.write(newer_rows())
    t.set_options({"snapshot.num-retained.min": "5"})  # a schema change keeps the newer types as spelled
    fields = json.loads(Path(t.paths.schema(1)).read_text())["fields"]
    assert [f["type"] for f in fields[2:]] == ["VARIANT", {"type": "VECTOR", "element": "FLOAT", "length": 3,
                                                            "nullable": True}]  # fmt: skip
    assert oracle.read(warehouse, "db.n").equals(newer_rows())
    assert catalog.get_table("db.n$schemas").read().num_rows == 2


@pytest.mark.interop
def test_a_shredded_variant_is_refused_by_name(catalog, warehouse):
    oracle.create(warehouse, "db.n", NEWER)
    oracle.write(warehouse, "db.n", newer_rows())
    t = catalog.get_table("db.n")
    [entry] = t.live_entries()
    path = t.paths.data_file(t.bucket_path(entry.partition, entry.bucket), entry.file.file_name)
    stored = pq.read_table(path)
    typed = pa.StructArray.from_arrays(
        [*stored.column("v").combine_chunks().flatten(), pa.array([1, 2], pa.int8())],
        fields=[*VARIANT, pa.field("typed_value", pa.int8())],
    )  # a shredded variant: values of a known type outside the binary encoding
    pq.write_table(stored.set_column(2, "v", typed), path)
    assert t.read(columns=["id"]).to_pylist() == [{"id": 1}, {"id": 2}]
    with pytest.raises(UnsupportedFeatureError, match=r"data file .*stores column 'v' \(VARIANT\).*shredded"):
        t.read()


@pytest.mark.interop
def test_a_blob_table_opens_and_refuses_reads_and_writes(catalog, warehouse):
    schema = pa.schema([("id", pa.int64()), ("doc", pa.large_binary())])
    options = {"row-tracking.enabled": "true", "data-evolution.enabled": "true"}
    oracle.create(warehouse, "db.b", schema, options=options)
    oracle.write(warehouse, "db.b", pa.table({"id": [1], "doc": [b"hello"]}, schema))
    t = catalog.get_table("db.b")
    assert t.schema.field("doc").type.root == "BLOB"
    files = catalog.get_table("db.b$files").read()
    assert sorted(name.rsplit(".", 1)[1] for name in files.column("file_path").to_pylist()) == [
        "blob",
        "parquet",
    ]
    with pytest.raises(UnsupportedFeatureError, match=r"table db\.b: data-evolution\.enabled=true"):
        t.read(columns=["id"])
    with pytest.raises(UnsupportedFeatureError, match=r"table db\.b: column 'doc' has type BLOB"):
        t.write(pa.table({"id": [2]}))


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_data_files_of_another_format_are_named(catalog, warehouse, fmt):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    oracle.create(warehouse, "db.f", schema, options={"file.format": fmt})
    oracle.write(warehouse, "db.f", pa.table({"id": [1], "name": ["a"]}, schema))
    t = catalog.get_table("db.f")
    assert catalog.get_table("db.f$files").read().column("file_format").to_pylist() == [fmt]
    with pytest.raises(
        UnsupportedFeatureError, match=rf"table db\.f: data file .*\.{fmt} is in {fmt.upper()} format"
    ):
        t.read(columns=["id"])
    with pytest.raises(UnsupportedFeatureError, match=rf"table db\.f: file\.format='{fmt}'"):
        t.write(pa.table({"id": [2], "name": ["b"]}, schema))
    with pytest.raises(UnsupportedFeatureError, match=rf"table db\.g: file\.format='{fmt}'"):
        catalog.create_table("db.g", schema, options={"file.format": fmt})
    t.set_options({"snapshot.num-retained.min": "5"})  # options of such a table still change


def test_a_column_of_an_unknown_type_leaves_the_others_readable(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(4)))
    path = Path(t.paths.schema(0))
    schema = json.loads(path.read_text())
    schema["fields"][4]["type"] = "GEOGRAPHY(4326)"  # what a newer writer could have declared
    path.write_text(json.dumps(schema))
    t = catalog.get_table("db.t")
    assert rows(t.read(columns=["order_id", "price"])) == rows(orders(range(4)).select(["order_id", "price"]))
    with pytest.raises(
        UnsupportedFeatureError, match=r"table db\.t: column 'status' has type GEOGRAPHY\(4326\)"
    ):
        t.read()
    with pytest.raises(UnsupportedFeatureError, match=r"column 'status' has type GEOGRAPHY"):
        t.write(orders([9]))
    path.write_text('{"fields": [{"id": 0, "name": "x", "type": {"kind": "?"}}]}')
    with pytest.raises(CorruptFileError, match="schema-0"):
        catalog.get_table("db.t")


def test_a_file_index_of_a_newer_type_is_ignored_by_reads_and_named_by_verify(catalog):
    options = {"file-index.bloom-filter.columns": "user_id", "file-index.bloom-filter.user_id.items": "20"}
    t = catalog.create_table("db.t", ORDERS, options=options)
    t.write(orders(range(20)))
    [entry] = t.live_entries()
    container = fileindex_format.read(entry.file.embedded_index)
    container["price"] = {"range-bitmap": b"\x01\x02\x03"}  # a newer index this engine cannot decode
    _replace_index(t, entry, fileindex_format.write(container))
    assert rows(t.read(filter=col("price") > 0.5)) == rows(orders(range(20)))
    assert rows(t.read(filter=col("user_id") == 3)) == rows(orders([3, 10, 17]))
    report = t.verify_file_indexes()
    assert not report.ok and any(
        "'price'" in p and "range-bitmap" in p and "newer" in p for p in report.problems
    )


def test_a_file_index_container_of_a_newer_version_is_read_around(catalog):
    options = {"file-index.bloom-filter.columns": "user_id", "file-index.bloom-filter.user_id.items": "20"}
    t = catalog.create_table("db.t", ORDERS, options=options)
    t.write(orders(range(20)))
    [entry] = t.live_entries()
    newer = bytearray(entry.file.embedded_index)
    newer[8:12] = (2).to_bytes(4, "big")  # container version 2
    _replace_index(t, entry, bytes(newer))
    assert rows(t.read(filter=col("user_id") == 3)) == rows(orders([3, 10, 17]))
    assert t.plan(filter=col("user_id") == 99).stats["pruned_by_index"] == 0
    report = t.verify_file_indexes()
    assert any(entry.file.file_name in p and "version 2 is newer" in p for p in report.problems)


def _replace_index(t, entry, index: bytes) -> None:
    """Commit ``index`` as the embedded file index of ``entry``'s file (as a newer writer would)."""
    after = replace(entry.file, embedded_index=index)
    message = CommitMessage(
        entry.partition,
        entry.bucket,
        entry.total_buckets,
        compact_before=(entry.file,),
        compact_after=(after,),
    )
    t.new_commit().commit([message])


def test_index_files_of_a_newer_type_block_rewrites_not_reads(catalog):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "1"})
    writer = t.new_write()
    writer.write(orders(range(5)))
    [message] = writer.prepare_commit()
    Path(t.paths.index_dir).mkdir()
    Path(t.paths.index_file("index-global-0")).write_bytes(b"btree")
    newer = IndexFileMeta("GLOBAL_BTREE", "index-global-0", 5, 5)  # as a newer writer commits it
    t.new_commit().commit([replace(message, new_index_files=(newer,))])
    assert [e.index_file.index_type for e in t.index_entries()] == ["GLOBAL_BTREE"]
    assert rows(t.read()) == rows(orders(range(5)))
    with pytest.raises(
        UnsupportedFeatureError, match=r"table db\.t: its index manifest holds \['GLOBAL_BTREE'\]"
    ):
        t.write(orders([7]))
    with pytest.raises(UnsupportedFeatureError, match="GLOBAL_BTREE"):
        t.compact(full=True)
