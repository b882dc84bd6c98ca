"""File indexes on real tables: written with data, used to skip files and rows, rebuilt, verified."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse import col
from lakehouse.errors import CorruptFileError, InvalidOptionError, UnsupportedFeatureError
from lakehouse.fileindex import bitmap, format
from lakehouse.snapshot import CommitKind
from lakehouse.types import parse_type

from .conftest import rows
from .interop import oracle

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        ("user_id", pa.int64()),
        ("status", pa.string()),
        ("price", pa.int64()),
    ]
)
INDEXES = {
    "file-index.bloom-filter.columns": "user_id",
    "file-index.bloom-filter.user_id.items": "500",
    "file-index.bitmap.columns": "status",
    "file-index.bsi.columns": "price",
}


def batch(start: int, n: int = 400, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed + start)
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "dt": ["2024-01-01"] * n,
            "user_id": rng.integers(start * 10, start * 10 + 1000, n),
            "status": rng.choice(["NEW", "PAID", "SHIPPED"], n),
            "price": rng.integers(-5000, 5000, n),
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=INDEXES)
    for i in range(4):
        t.write(batch(i * 1000))
    return t


def test_every_written_file_carries_its_indexes_and_they_verify(table):
    entries = table.live_entries()
    assert all(e.file.extra_files and e.file.extra_files[0].endswith(".parquet.index") for e in entries)
    report = table.verify_file_indexes()
    assert report.ok and report.files_checked == 4 and report.problems == []


def test_small_indexes_are_embedded_in_the_manifest(catalog):
    t = catalog.create_table(
        "db.small",
        SCHEMA,
        options={"file-index.bitmap.columns": "status", "file-index.in-manifest-threshold": "10 kb"},
    )
    t.write(batch(0, n=50))
    (e,) = t.live_entries()
    assert e.file.embedded_index is not None and e.file.extra_files == ()
    assert t.verify_file_indexes().ok


def test_point_and_range_queries_skip_files_and_rows(table):
    everything = table.read()
    probe = everything.column("user_id")[5].as_py()
    for flt in (
        col("user_id") == probe,
        col("price").between(100, 120),
        col("status") == "PAID",
        (col("status") == "NEW") & (col("price") < -4900),
        col("user_id").isin([probe, -1]),
    ):
        expected = everything.filter(_expr(flt))
        assert rows(table.read(filter=flt), "id") == rows(expected, "id")
    point = table.plan(filter=col("user_id") == probe).stats
    assert point["files_selected"] == 1 and point["pruned_by_stats"] + point["pruned_by_index"] == 3
    plan = table.plan(filter=col("price").between(100, 120))
    kept = [
        len(__import__("pyroaring").BitMap.deserialize(s)) for sp in plan.splits for s in sp.selections if s
    ]
    assert kept and sum(kept) == everything.filter(_expr(col("price").between(100, 120))).num_rows


def _expr(flt):
    from lakehouse.predicate import bind, to_expression

    return to_expression(bind(flt, {f.name: f.type for f in SCHEMA}, "t"))


def test_or_of_indexed_predicates_never_drops_a_match(table):
    everything = table.read()
    flt = (col("user_id") == -7) | (col("price") >= 4990) | col("status").is_null()
    assert rows(table.read(filter=flt), "id") == rows(everything.filter(_expr(flt)), "id")


def test_primary_key_tables_never_skip_on_value_indexes(catalog):
    t = catalog.create_table(
        "db.pk",
        SCHEMA,
        primary_keys=["id", "dt"],
        partition_keys=["dt"],
        options={
            "bucket": "1",
            "file-index.bitmap.columns": "status",
            "file-index.bloom-filter.columns": "id",
        },
    )
    old = batch(0, n=10).set_column(3, "status", pa.array(["NEW"] * 10))
    t.write(old)
    t.write(old.slice(0, 1).set_column(3, "status", pa.array(["PAID"])))
    # the newest version of id 0 is PAID; the older file still says NEW. A value index would be
    # wrong to skip the newer file for status = 'NEW' (the stale row would come back).
    got = t.read(filter=col("status") == "NEW")
    assert sorted(got.column("id").to_pylist()) == list(range(1, 10))
    assert t.plan(filter=col("status") == "PAID").stats["pruned_by_index"] == 0
    key = t.plan(filter=col("id") == 5).stats  # the key bloom filter may skip the newer file
    assert key["pruned_by_stats"] + key["pruned_by_index"] == 1


def test_rewrite_after_an_options_change_builds_indexes_without_touching_data(catalog):
    t = catalog.create_table("db.r", SCHEMA, partition_keys=["dt"])
    for i in range(3):
        t.write(batch(i * 1000))
    data_files = {e.file.file_name for e in t.live_entries()}
    before = t.latest_snapshot_id()
    assert t.plan(filter=col("status") == "OTHER").stats["pruned_by_index"] == 0
    t.set_options(INDEXES)
    stale = t.verify_file_indexes()  # files written before the options lack their indexes: not wrong
    assert stale.ok and stale.coverage == 0.0 and len(stale.missing) == stale.indexes_expected == 3 * 3
    assert all("has no" in m for m in stale.missing)
    result = t.rewrite_file_index()
    assert (result.files_checked, result.files_rewritten) == (3, 3)
    snap = t.snapshots.latest()
    assert snap.commit_kind == CommitKind.COMPACT and snap.id == before + 1
    assert {e.file.file_name for e in t.live_entries()} == data_files
    assert t.verify_file_indexes().ok
    assert t.plan(filter=col("status") == "OTHER").stats["pruned_by_index"] == 3
    assert t.read(snapshot_id=before).num_rows == t.read().num_rows == 1200
    assert all(not e.file.extra_files for e in t.live_entries(t.snapshots.snapshot(before)))
    assert t.rewrite_file_index().files_rewritten == 0  # nothing left to do
    t.remove_options(["file-index.bitmap.columns", "file-index.bsi.columns"])
    t.rewrite_file_index()
    assert t.verify_file_indexes().ok
    assert t.plan(filter=col("status") == "OTHER").stats["pruned_by_index"] == 0


@pytest.mark.interop
@pytest.mark.parametrize("threshold", ["1 MB", "1 B"])
def test_rewrites_back_to_an_earlier_index_keep_every_file(catalog, warehouse, threshold):
    # a file's metadata that returns to an earlier version (embedded index bytes, or none at all)
    # is that version's manifest identifier again: the pair that added and deleted it must not
    # cancel the new ADD
    t = catalog.create_table("db.b", SCHEMA, partition_keys=["dt"])
    for i in range(3):
        t.write(batch(i * 1000, n=20))
    bloom = {"file-index.bloom-filter.columns": "user_id", "file-index.bloom-filter.user_id.items": "50"}
    bitmap = {"file-index.bitmap.columns": "status"}
    t.set_options({**bloom, "file-index.in-manifest-threshold": threshold})
    for change in ([bitmap], [], ["file-index.bitmap.columns"], [], [bitmap], ["file-index.bitmap.columns"]):
        if change and isinstance(change[0], dict):
            t.set_options(change[0])
        elif change:
            t.remove_options(change)
        t.rewrite_file_index()
        assert t.read().num_rows == 60 and len(t.live_entries()) == 3
        assert t.verify_file_indexes().ok
    t.remove_options(list(bloom))
    assert t.rewrite_file_index().files_rewritten == 3  # back to the metadata the files were written with
    assert rows(t.read(), "id") == rows(t.read(snapshot_id=3), "id")
    assert rows(oracle.read(warehouse, "db.b"), "id") == rows(t.read(), "id")


def test_rewrite_of_some_partitions(catalog):
    t = catalog.create_table("db.p", SCHEMA, partition_keys=["dt"])
    t.write(batch(0))
    t.write(batch(1000).set_column(1, "dt", pa.array(["2024-01-02"] * 400)))
    t.set_options(INDEXES)
    assert t.rewrite_file_index(partitions={"dt": "2024-01-02"}).files_rewritten == 1
    report = t.verify_file_indexes()
    assert report.ok and report.missing and all("dt=2024-01-01" in m for m in report.missing)
    assert report.coverage == 0.5


def _index_path(table, entry) -> str:
    return (
        f"{table.paths.root}/{table.bucket_path(entry.partition, entry.bucket)}/{entry.file.extra_files[0]}"
    )


def test_verification_reports_flipped_bits_and_edited_row_sets(table):
    entries = table.live_entries()
    # flip one bit of the first file's bloom filter
    path = _index_path(table, entries[0])
    container = format.read(Path(path).read_bytes())
    bloom = bytearray(container["user_id"]["bloom-filter"])
    bloom[20] ^= 0x10
    container["user_id"]["bloom-filter"] = bytes(bloom)
    Path(path).write_bytes(format.write(container))
    # move one row from one value's bitmap to another's in the second file
    path2 = _index_path(table, entries[1])
    container2 = format.read(Path(path2).read_bytes())
    values = (
        pq.ParquetFile(path2.removesuffix(".index")).read(columns=["status"]).column("status").to_pylist()
    )
    values[0] = "PAID" if values[0] != "PAID" else "NEW"
    container2["status"]["bitmap"] = bitmap.build(pa.array(values), parse_type("STRING"))
    Path(path2).write_bytes(format.write(container2))
    report = table.verify_file_indexes()
    assert not report.ok
    assert any(
        entries[0].file.file_name in p and "'user_id'" in p and "bloom-filter" in p for p in report.problems
    )
    assert any(entries[1].file.file_name in p and "'status'" in p and "bitmap" in p for p in report.problems)


def test_a_corrupt_index_is_a_typed_error_when_filtering_and_rewrite_repairs_it(table):
    entries = table.live_entries()
    path = _index_path(table, entries[0])
    Path(path).write_bytes(b"garbage")
    with pytest.raises(CorruptFileError, match="rewrite_file_index"):
        table.read(filter=col("status") == "NEW")
    assert table.read().num_rows == 1600  # no filter, no index needed
    assert not table.verify_file_indexes().ok
    table.set_options({"file-index.read.enabled": "false"})
    assert table.read(filter=col("status") == "NEW").num_rows > 0
    table.set_options({"file-index.read.enabled": "true"})
    table.rewrite_file_index()
    assert table.verify_file_indexes().ok
    os.remove(_index_path(table, table.live_entries()[0]))
    assert any("missing" in p for p in table.verify_file_indexes().problems)


def test_an_index_selecting_rows_the_file_does_not_have_is_corrupt(table):
    """A bitmap index whose row count grew: NOT EQUAL answers rows past the end of the file."""
    path = _index_path(table, table.live_entries()[0])
    indexes = format.read(Path(path).read_bytes())
    damaged = bytearray(indexes["status"]["bitmap"])
    damaged[1:5] = (10_000).to_bytes(4, "big")  # the row count, after the version byte
    Path(path).write_bytes(format.write({**indexes, "status": {"bitmap": bytes(damaged)}}))
    with pytest.raises(CorruptFileError, match=f"{os.path.basename(path)} is unusable.*selects row 9999"):
        table.read(filter=col("status") != "NEW")


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (
            {"file-index.bloom-filter.columns": "flag"},
            InvalidOptionError,
            "bloom-filter index cannot be built",
        ),
        ({"file-index.bsi.columns": "status"}, InvalidOptionError, "bsi index cannot be built"),
        ({"file-index.bitmap.columns": "amount"}, InvalidOptionError, "bitmap index cannot be built"),
        ({"file-index.bsi.columns": "nope"}, InvalidOptionError, "unknown column 'nope'"),
        ({"file-index.zonemap.columns": "id"}, UnsupportedFeatureError, "'zonemap' is not supported"),
        ({"file-index.bloom-filter.id.fpp": "0.1"}, InvalidOptionError, "does not declare"),
        (
            {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.fpp": "1.5"},
            InvalidOptionError,
            r"bloom-filter\.id\.fpp='1.5' must be a probability",
        ),
        (
            {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "lots"},
            InvalidOptionError,
            "items='lots' must be a positive whole number",
        ),
        (
            {"file-index.bitmap.columns": "status", "file-index.bitmap.status.version": "3"},
            InvalidOptionError,
            "version='3' must be 1 or 2",
        ),
        (
            {"file-index.bitmap.columns": "status", "file-index.bitmap.status.index-block-size": "big"},
            InvalidOptionError,
            "index-block-size",
        ),
    ],
)
def test_indexes_the_type_cannot_carry_are_refused_at_creation(catalog, options, error, match):
    schema = pa.schema(
        [("id", pa.int64()), ("flag", pa.bool_()), ("status", pa.string()), ("amount", pa.decimal128(10, 2))]
    )
    with pytest.raises(error, match=match):
        catalog.create_table("db.bad", schema, options=options)
    t = catalog.create_table("db.ok", schema)
    with pytest.raises(error, match=match):
        t.set_options(options)


def test_an_index_kind_set_by_another_engine_refuses_writes_and_rewrites(catalog, table):
    """Java may declare a ``range-bitmap`` index this engine cannot build: writes and rewrites
    refuse with a typed error and commit nothing, instead of writing files without it."""
    schema_file = Path(table.paths.schema_dir) / "schema-0"
    schema = json.loads(schema_file.read_text())
    schema["options"]["file-index.range-bitmap.columns"] = "price"
    schema_file.write_text(json.dumps(schema))
    t = catalog.get_table("db.t")
    before = t.latest_snapshot_id()
    with pytest.raises(UnsupportedFeatureError, match="'range-bitmap' is not supported"):
        t.write(batch(9000))
    with pytest.raises(UnsupportedFeatureError, match="range-bitmap"):
        t.rewrite_file_index()
    assert t.latest_snapshot_id() == before and t.read().num_rows == 1600


def test_verification_checks_index_placement_against_the_threshold(table):
    table.set_options({"file-index.in-manifest-threshold": "10 mb"})  # now every index fits the manifest
    report = table.verify_file_indexes()
    assert not report.ok and len(report.problems) == report.files_checked == 4
    assert all("in its own file; the threshold is 10485760" in p for p in report.problems)
    table.rewrite_file_index()
    assert table.verify_file_indexes().ok
    assert all(e.file.embedded_index and not e.file.extra_files for e in table.live_entries())
