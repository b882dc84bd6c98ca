"""Iceberg-compatible metadata (``metadata.iceberg.storage``), with pyiceberg as the oracle: an
Iceberg reader loading the table the Hadoop way (its directory, ``metadata/version-hint.text``)
reads exactly the rows this engine reads, prunes files by their bounds without losing rows, and
follows the table through commits, compactions, schema changes, rollbacks and crashes."""

from __future__ import annotations

import datetime
import json
import logging
import struct
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog, col
from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError

pytestmark = pytest.mark.iceberg

TABLE_LOCATION = {"metadata.iceberg.storage": "table-location"}
V3 = {**TABLE_LOCATION, "metadata.iceberg.format-version": "3"}
DELETION_VECTORS = {**V3, "deletion-vectors.enabled": "true", "deletion-vectors.bitmap64": "true"}
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("flag", pa.bool_()),
        ("small", pa.int16()),
        ("name", pa.string()),
        ("price", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("blob", pa.binary()),
        ("ts", pa.timestamp("us")),
        ("day", pa.date32()),
        pa.field("dt", pa.string(), nullable=False),
    ]
)


def rows(ids: range, dt: str, tag: str = "a") -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "flag": [i % 2 == 0 for i in ids],
            "small": pa.array([i % 100 for i in ids], pa.int16()),
            "name": [None if i % 7 == 0 else f"{tag}{i}" for i in ids],
            "price": pa.array([Decimal(i) / 4 - 3 for i in ids], pa.decimal128(10, 2)),
            "score": [i * 0.5 for i in ids],
            "blob": [bytes([i % 256]) for i in ids],
            "ts": pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(minutes=i) for i in ids]),
            "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 30) for i in ids]),
            "dt": [dt] * n,
        },
        schema=SCHEMA,
    )


def iceberg(location: str):
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(location)


def same_rows(ours: pa.Table, theirs: pa.Table) -> None:
    """The same rows, in any order (rows of an append table may repeat an id)."""
    theirs = theirs.select(ours.column_names).cast(ours.schema)
    order = [(c, "ascending") for c in ours.column_names]
    assert theirs.sort_by(order).equals(ours.sort_by(order))


def assert_history(t, compare=None) -> None:
    """Iceberg's history is the table's snapshots, its tags the table's: every file it names
    exists, and pyiceberg reads each snapshot (those ``compare`` accepts) as we read it."""
    from lakehouse.iceberg.metadata import orphan_metadata_files

    table = iceberg(t.iceberg_metadata_location())
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    assert ids == list(range(t.earliest_snapshot_id(), t.latest_snapshot_id() + 1))
    assert {name: ref.snapshot_id for name, ref in table.metadata.refs.items()} == {
        **{name: sid for name, sid in t.tags().items() if sid in ids},
        "main": t.latest_snapshot_id(),
    }
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                assert Path(entry.data_file.file_path).exists()
        if compare is None or compare(snapshot.snapshot_id):
            ours = t.read(snapshot_id=snapshot.snapshot_id)
            same_rows(ours, table.scan(snapshot_id=snapshot.snapshot_id).to_arrow())
    assert orphan_metadata_files(t.store) == []  # what the history no longer names is gone
    if table.metadata.format_version >= 3:  # row lineage: no row id is handed out twice
        lineage = [(s.first_row_id, s.added_rows) for s in table.metadata.snapshots]
        assert all(a + n <= b for (a, n), (b, _) in zip(lineage, lineage[1:], strict=False))
        assert lineage[-1][0] + lineage[-1][1] <= table.metadata.next_row_id


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    c = Catalog(str(tmp_path / "warehouse"))
    c.create_database("db")
    return c


def test_an_iceberg_reader_reads_an_append_table_as_we_do(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(pa.concat_tables([rows(range(0, 50), "x"), rows(range(50, 80), "y")]))
    t.write(rows(range(80, 100), "x", "b"))
    table = iceberg(t.paths.root)  # the table's directory, as a Hadoop-style reader opens it
    assert table.metadata.current_snapshot_id == t.latest_snapshot_id()
    assert [f.field_id for f in table.schema().fields] == [f.id for f in t.schema.fields]
    same_rows(t.read(), table.scan().to_arrow())
    # bounds and partitions prune files, never rows
    for iceberg_filter, ours in [
        ("id >= 90", col("id") >= 90),
        ("dt = 'y'", col("dt") == "y"),
        ("name = 'b85'", col("name") == "b85"),
        ("score < 3.0", col("score") < 3.0),
        ("day = '2024-01-05'", col("day") == datetime.date(2024, 1, 5)),
        ("price > 20", col("price") > Decimal(20)),
        ("ts < '2024-01-01T00:10:00'", col("ts") < datetime.datetime(2024, 1, 1, 0, 10)),
    ]:
        same_rows(t.read(filter=ours), table.scan(row_filter=iceberg_filter).to_arrow())


def test_a_primary_key_table_shows_iceberg_its_last_full_compaction(catalog):
    t = catalog.create_table("db.pk", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                             options={**TABLE_LOCATION, "bucket": "2"})  # fmt: skip
    t.write(rows(range(0, 40), "x"))
    assert iceberg(t.paths.root).scan().to_arrow().num_rows == 0  # level 0 only: not merged rows
    t.compact(full=True)
    compacted = t.read()
    same_rows(compacted, iceberg(t.paths.root).scan().to_arrow())
    t.write(rows(range(0, 40, 2), "x", "new"))
    same_rows(compacted, iceberg(t.paths.root).scan().to_arrow())  # the upserts wait in level 0
    t.compact(full=True)
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    assert pc.sum(pc.starts_with(t.read().column("name"), "new")).as_py() > 0


def test_one_metadata_version_is_kept_unless_more_are_asked_for(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    for i in range(3):
        t.write(rows(range(i * 10, i * 10 + 10), "x"))
    metadata = Path(t.paths.root) / "metadata"
    names = sorted(p.name for p in metadata.iterdir())
    assert [n for n in names if n.endswith(".json")] == ["v3.metadata.json"]
    assert (metadata / "version-hint.text").read_text() == "3"
    assert len([n for n in names if n.endswith(".avro")]) == 6  # per snapshot: a manifest, a list
    t.set_options({"metadata.iceberg.previous-versions-max": "1"})
    t.write(rows(range(30, 40), "x"))
    t.write(rows(range(40, 50), "x"))
    versions = sorted(p.name for p in metadata.glob("v*.metadata.json"))
    assert versions == ["v4.metadata.json", "v5.metadata.json"]
    same_rows(t.read(), iceberg(str(metadata / "v5.metadata.json")).scan().to_arrow())
    same_rows(t.read(snapshot_id=4), iceberg(str(metadata / "v4.metadata.json")).scan().to_arrow())


def test_a_hadoop_catalog_keeps_the_metadata_under_the_warehouse(catalog, tmp_path):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"],
                             options={"metadata.iceberg.storage": "hadoop-catalog"})  # fmt: skip
    t.write(rows(range(0, 20), "x"))
    location = tmp_path / "warehouse" / "iceberg" / "db" / "t"
    assert (location / "metadata" / "version-hint.text").read_text() == "1"
    assert not (Path(t.paths.root) / "metadata").exists()
    assert t.iceberg_metadata_location() == f"{location}/metadata/v1.metadata.json"
    table = iceberg(str(location))
    assert table.metadata.location == t.paths.root  # the data stays where Paimon wrote it
    same_rows(t.read(), table.scan().to_arrow())


def test_schema_changes_reach_iceberg_by_field_id(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    t.add_column("extra", pa.int32())
    t.rename_column("name", "label")
    later = rows(range(10, 20), "x").rename_columns([*SCHEMA.names[:3], "label", *SCHEMA.names[4:]])
    t.write(later.append_column("extra", pa.array(range(10), pa.int32())))
    table = iceberg(t.paths.root)
    assert table.schema().find_field("label").field_id == t.schema.field("label").id
    same_rows(t.read(), table.scan().to_arrow())
    assert len(table.schemas()) == 3


def test_overwrites_reach_iceberg(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(pa.concat_tables([rows(range(0, 10), "x"), rows(range(10, 20), "y"), rows(range(20, 30), "z")]))
    t.write(rows(range(100, 105), "x"), overwrite={"dt": "x"})
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    t.write(rows(range(200, 203), "z"), overwrite=True)
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    assert iceberg(t.paths.root).scan().to_arrow().column("id").to_pylist() == [200, 201, 202]


def test_partition_values_of_each_type_prune_iceberg_scans_without_losing_rows(catalog):
    schema = pa.schema([("id", pa.int64()), ("price", pa.decimal128(10, 2)), ("day", pa.date32()),
                        ("n", pa.int32()), ("flag", pa.bool_())])  # fmt: skip
    t = catalog.create_table(
        "db.t", schema, partition_keys=["price", "day", "n", "flag"], options=TABLE_LOCATION
    )

    def batch(ids: range) -> pa.Table:
        return pa.table(
            {
                "id": list(ids),
                "price": pa.array([Decimal(i % 3) - Decimal("1.25") for i in ids], pa.decimal128(10, 2)),
                "day": [datetime.date(2024, 1, 1 + i % 2) for i in ids],
                "n": pa.array([i % 2 - 7 for i in ids], pa.int32()),
                "flag": [i % 4 == 0 for i in ids],
            },
            schema=schema,
        )

    t.write(batch(range(0, 24)))
    t.write(batch(range(24, 48, 12)), overwrite={"price": Decimal("-1.25"), "day": datetime.date(2024, 1, 1),
                                             "n": -7, "flag": True})  # fmt: skip
    table = iceberg(t.paths.root)
    for iceberg_filter, ours in [
        ("price = -0.25", col("price") == Decimal("-0.25")),
        ("price < 0", col("price") < Decimal(0)),
        ("day = '2024-01-02'", col("day") == datetime.date(2024, 1, 2)),
        ("n = -6", col("n") == -6),
        ("flag = true", col("flag") == True),  # noqa: E712 - a predicate, not a comparison
    ]:
        same_rows(t.read(filter=ours), table.scan(row_filter=iceberg_filter).to_arrow())
    assert_history(t)


def test_iceberg_time_travel_reads_every_snapshot_as_we_do(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(pa.concat_tables([rows(range(0, 10), "x"), rows(range(10, 20), "y")]))
    t.write(rows(range(20, 30), "x"))
    t.write(rows(range(100, 105), "x"), overwrite={"dt": "x"})
    t.add_column("extra", pa.int32())
    for i in range(5):
        t.write(rows(range(30 + i, 31 + i), "y").append_column("extra", pa.array([i], pa.int32())))
    t.compact(full=True)
    table = iceberg(t.paths.root)
    assert [s.summary.operation.value for s in table.metadata.snapshots] == [
        "append", "append", "overwrite", "append", "append", "append", "append", "append", "replace",
    ]  # fmt: skip
    assert table.metadata.snapshots[2].summary["deleted-data-files"] == "2"
    assert table.metadata.snapshots[-1].summary["total-records"] == str(t.read().num_rows)
    assert_history(t)
    assert "extra" not in table.scan(snapshot_id=3).to_arrow().column_names  # read with its schema
    assert table.scan(snapshot_id=4).to_arrow().column("extra").null_count == 15


def test_a_snapshot_reuses_the_manifests_of_its_parent(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    t.write(rows(range(10, 20), "y"))
    t.write(rows(range(20, 30), "z"))
    table = iceberg(t.paths.root)
    listed = [[m.manifest_path for m in s.manifests(table.io)] for s in table.metadata.snapshots]
    assert [len(m) for m in listed] == [1, 2, 3]
    assert listed[1][:1] == listed[0] and listed[2][:2] == listed[1]  # each writes only its files
    t.write(rows(range(100, 105), "y"), overwrite={"dt": "y"})
    last = iceberg(t.paths.root).metadata.snapshots[-1]
    kept = [m.manifest_path for m in last.manifests(table.io)]
    assert listed[2][0] in kept and listed[2][2] in kept and listed[2][1] not in kept  # y's is restated
    assert_history(t)


def test_small_manifests_are_merged_once_there_are_many(catalog):
    options = {**TABLE_LOCATION, "metadata.iceberg.compaction.min.file-num": "3",
               "metadata.iceberg.compaction.max.file-num": "4"}  # fmt: skip
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=options)
    for i in range(9):
        t.write(rows(range(i * 5, i * 5 + 5), "xy"[i % 2]))
    t.write(rows(range(200, 202), "x"), overwrite={"dt": "x"})
    table = iceberg(t.paths.root)
    assert all(len(s.manifests(table.io)) < 4 for s in table.metadata.snapshots)
    assert_history(t)


def test_an_expiration_drops_the_iceberg_snapshots_it_expires(catalog):
    options = {**TABLE_LOCATION, "snapshot.num-retained.min": "1"}
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=options)
    for i in range(6):
        t.write(rows(range(i * 5, i * 5 + 5), "xy"[i % 2]), overwrite=i == 3)
    t.create_tag("before", snapshot_id=2)
    t.create_tag("after", snapshot_id=5)
    t.expire_snapshots(retain_max=3)
    assert t.earliest_snapshot_id() == 4
    assert_history(t)  # snapshots 4-6; the tag of snapshot 2 is no Iceberg tag: its snapshot went
    assert iceberg(t.paths.root).metadata.refs["after"].snapshot_ref_type.value == "tag"
    t.delete_tag("after")
    assert_history(t)


def test_tags_are_iceberg_tags(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    t.create_tag("first")
    t.write(rows(range(10, 20), "x"))
    table = iceberg(t.paths.root)
    assert table.snapshot_by_name("first").snapshot_id == 1
    same_rows(
        t.read(tag="first"), table.scan(snapshot_id=table.snapshot_by_name("first").snapshot_id).to_arrow()
    )
    assert_history(t)


def test_a_primary_key_tables_iceberg_history_follows_its_full_compactions(catalog):
    t = catalog.create_table("db.pk", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                             options={**TABLE_LOCATION, "bucket": "2"})  # fmt: skip
    t.write(rows(range(0, 40), "x"))
    t.compact(full=True)
    t.write(rows(range(0, 40, 2), "x", "new"))
    t.compact(full=True)
    compacted = {2, 4}
    assert_history(t, compare=compacted.__contains__)
    table = iceberg(t.paths.root)
    assert table.scan(snapshot_id=3).to_arrow().num_rows == 40  # the upserts waited in level 0
    assert [s.summary.operation.value for s in table.metadata.snapshots] == [
        "append",
        "append",
        "append",
        "replace",
    ]


def test_iceberg_v3_applies_the_deletion_vectors_of_a_primary_key_table(catalog):
    """With deletion vectors (format 3, 64-bit vectors), Iceberg readers see every file above
    level 0 and apply the table's vectors, copied into Puffin files: the rows we read, at once."""
    options = {**DELETION_VECTORS, "bucket": "2", "snapshot.num-retained.min": "1"}
    t = catalog.create_table(
        "db.pk", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options=options
    )
    t.write(rows(range(0, 40), "x"))
    t.write(rows(range(0, 40, 3), "x", "new"))  # upserts: vectors delete the rows they replace
    t.write(rows(range(1, 40, 7), "x").append_column("_row_kind", pa.array(["-D"] * 6)))
    table = iceberg(t.paths.root)
    summary = table.metadata.snapshots[-1].summary
    assert int(summary["total-position-deletes"]) > 0 and int(summary["total-delete-files"]) > 0
    assert_history(t)  # every snapshot, with its vectors
    assert table.scan().to_arrow().num_rows == t.read().num_rows == 34
    puffins = sorted(Path(t.paths.root, "metadata").glob("*.puffin"))
    assert puffins and all(p.read_bytes()[:4] == p.read_bytes()[-4:] == b"PFA1" for p in puffins)
    t.compact(full=True)
    t.expire_snapshots(retain_max=1)
    assert_history(t)  # the Puffin files of the expired snapshots' vectors are gone with them


def test_32_bit_deletion_vectors_written_before_iceberg_was_on_are_refused_until_compacted(catalog):
    options = {"bucket": "1", "deletion-vectors.enabled": "true"}  # 32-bit vectors
    t = catalog.create_table(
        "db.pk", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options=options
    )
    t.write(rows(range(0, 20), "x"))
    t.write(rows(range(0, 20, 2), "x", "new"))
    t.set_options({**DELETION_VECTORS})
    with pytest.raises(UnsupportedFeatureError, match="32-bit one"):
        t.sync_iceberg_metadata()
    assert t.iceberg_metadata_location() is None  # nothing half written is published
    t.compact(full=True)  # the vectors go with the rows they deleted ...
    with pytest.raises(UnsupportedFeatureError, match="expire the snapshots"):
        t.sync_iceberg_metadata()  # ... but Iceberg's history holds every snapshot the table has
    t.expire_snapshots(retain_min=1, retain_max=1)
    assert t.sync_iceberg_metadata() is not None
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())


def test_a_rollback_rewinds_the_iceberg_metadata(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    for i in range(3):
        t.write(rows(range(i * 10, i * 10 + 10), "x"))
    t.rollback_to(snapshot_id=1)
    metadata = Path(t.paths.root) / "metadata"
    assert sorted(p.name for p in metadata.glob("v*.metadata.json")) == ["v1.metadata.json"]
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    assert_history(t)
    t.write(rows(range(50, 55), "x"))  # snapshot 2 again, another one: its metadata is new
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    assert iceberg(t.paths.root).scan().to_arrow().num_rows == 15
    assert_history(t)


def test_a_failed_sync_leaves_the_commit_and_is_caught_up(catalog, monkeypatch, caplog):
    import lakehouse.iceberg.metadata as metadata

    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    sync = metadata.sync_iceberg

    def crash(table):
        raise OSError("killed")

    monkeypatch.setattr(metadata, "sync_iceberg", crash)
    with caplog.at_level(logging.WARNING):
        t.write(rows(range(10, 20), "x"))
        t.write(rows(range(20, 30), "y"))
    assert "writing its Iceberg metadata failed" in caplog.text
    assert t.latest_snapshot_id() == 3
    assert t.iceberg_metadata_location().endswith("v1.metadata.json")  # readers still see snapshot 1
    assert iceberg(t.paths.root).scan().to_arrow().num_rows == 10
    monkeypatch.setattr(metadata, "sync_iceberg", sync)
    synced = t.sync_iceberg_metadata()
    assert synced is not None and synced.snapshot_id == 3
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    assert_history(t)  # the missed snapshots are in Iceberg's history too
    assert t.sync_iceberg_metadata().metadata_file == synced.metadata_file  # nothing more to do


def test_metadata_files_are_json_an_iceberg_reader_expects(catalog):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    metadata = json.loads(Path(t.iceberg_metadata_location()).read_text())
    assert metadata["format-version"] == 2
    assert metadata["partition-specs"] == [
        {"spec-id": 0, "fields": [
            {"name": "dt", "transform": "identity", "source-id": t.schema.field("dt").id, "field-id": 1000}]}
    ]  # fmt: skip
    (snapshot,) = metadata["snapshots"]
    assert snapshot["snapshot-id"] == snapshot["sequence-number"] == 1
    assert snapshot["summary"]["total-records"] == "10"
    assert snapshot["summary"]["paimon-commit-identity"] == t.snapshots.latest().uuid


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"metadata.iceberg.storage": "hive-catalog"}, UnsupportedFeatureError, "Hive metastore"),
        ({"metadata.iceberg.storage": "rest-catalog"}, UnsupportedFeatureError, "REST catalog"),
        ({"metadata.iceberg.storage": "glue"}, InvalidOptionError, "use one of"),
        ({**TABLE_LOCATION, "metadata.iceberg.format-version": "1"}, InvalidOptionError, "use 2 or 3"),
        ({**TABLE_LOCATION, "metadata.iceberg.manifest-compression": "lz4"}, InvalidOptionError, "zstd"),
        (
            {**TABLE_LOCATION, "deletion-vectors.enabled": "true"},
            UnsupportedFeatureError,
            "format-version'='3'",
        ),
        (
            {**V3, "deletion-vectors.enabled": "true"},
            UnsupportedFeatureError,
            "'deletion-vectors.bitmap64'='true'",
        ),
    ],
)
def test_metadata_iceberg_cannot_use_is_refused_when_the_table_is_created(catalog, options, error, message):
    with pytest.raises(error, match=message):
        catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=options)
    assert "t" not in catalog.list_tables("db")


def test_a_column_iceberg_v2_cannot_hold_is_refused(catalog):
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns"))])
    with pytest.raises(UnsupportedFeatureError, match="timestamp_ns.*format-version'='3'"):
        catalog.create_table("db.t", schema, options=TABLE_LOCATION)
    t = catalog.create_table("db.t", schema)
    with pytest.raises(UnsupportedFeatureError, match="timestamp_ns"):
        t.set_options(TABLE_LOCATION)
    t.set_options({**TABLE_LOCATION, "metadata.iceberg.format-version": "3"})
    with pytest.raises(UnsupportedFeatureError, match="timestamp_ns"):
        t.set_options({"metadata.iceberg.format-version": "2"})
    with pytest.raises(UnsupportedFeatureError, match="partition column ts is a TIMESTAMP\\(9\\)"):
        catalog.create_table(
            "db.p",
            schema,
            partition_keys=["ts"],
            options={**TABLE_LOCATION, "metadata.iceberg.format-version": "3"},
        )


def row_ids(manifest_list: str) -> dict[str, int]:
    """The first row id of each live data file of a snapshot, as Iceberg v3 readers assign them:
    the file's own, or inherited from its manifest's (in order, over files without their own)."""
    import fastavro

    out = {}
    with open(manifest_list, "rb") as f:
        manifests = list(fastavro.reader(f))
    for m in manifests:
        with open(m["manifest_path"], "rb") as f:
            entries = list(fastavro.reader(f))
        watermark = m["first_row_id"]
        for e in entries:
            if e["status"] == 2:  # DELETED
                continue
            data = e["data_file"]
            if data["first_row_id"] is None:
                data["first_row_id"], watermark = watermark, watermark + data["record_count"]
            out[data["file_path"]] = data["first_row_id"]
    return out


NANOS = pa.schema(
    [
        ("id", pa.int64()),
        ("at", pa.timestamp("ns")),
        ("at_utc", pa.timestamp("ns", tz="UTC")),
        pa.field("hour", pa.timestamp("us"), nullable=False),
    ]
)


def nanos(ids: range) -> pa.Table:
    base = 1_700_000_000_000_000_000
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "at": pa.array([base + i * 1_000_000_007 + 1 for i in ids], pa.timestamp("ns")),
            "at_utc": pa.array([base + i for i in ids], pa.timestamp("ns", tz="UTC")),
            "hour": pa.array([base // 1000 + 3_600_000_000 * (i % 2) + 5 for i in ids], pa.timestamp("us")),
        },
        schema=NANOS,
    )


def test_iceberg_v3_reads_nanosecond_timestamps_to_the_nanosecond(catalog):
    """Format version 3: timestamps of precision 7-9 are Iceberg ``timestamp_ns`` (with their
    bounds and partition values in nanoseconds), and every snapshot carries row lineage."""
    t = catalog.create_table("db.t", NANOS, partition_keys=["hour"], options=V3)
    t.write(nanos(range(0, 10)))
    t.write(nanos(range(10, 16)))
    hour = nanos(range(100, 101)).column("hour")[0].as_py()
    t.write(nanos(range(100, 102, 2)), overwrite={"hour": hour})  # one hour's files go, the other's stay
    table = iceberg(t.paths.root)
    assert table.metadata.format_version == 3
    assert [str(f.field_type) for f in table.schema().fields] == [
        "long",
        "timestamp_ns",
        "timestamptz_ns",
        "timestamp",
    ]
    assert_history(t)
    # bounds in nanoseconds (pyiceberg builds no timestamp_ns literal to prune with: read them)
    at = t.schema.field("at").id
    entries = [
        e for m in table.metadata.snapshots[0].manifests(table.io) for e in m.fetch_manifest_entry(table.io)
    ]
    for e in entries:
        written = pc.min_max(
            t.read(snapshot_id=1, filter=col("hour") == e.data_file.partition[0]).column("at")
        )
        low, high = (
            struct.unpack("<q", e.data_file.lower_bounds[at])[0],
            struct.unpack("<q", e.data_file.upper_bounds[at])[0],
        )
        assert (low, high) == (written["min"].value, written["max"].value)
    # row lineage: each snapshot's rows take the next ids, none handed out twice
    snapshots = table.metadata.snapshots
    # (the kept files' restated manifests take ids for their rows too: legal gaps, as Paimon's)
    assert [(s.first_row_id, s.added_rows) for s in snapshots] == [(0, 10), (10, 6), (16, 9)]
    assert table.metadata.next_row_id == 25
    kept = row_ids(snapshots[2].manifest_list)
    assert len(kept) == 3 and {p: kept[p] for p in kept if p in row_ids(snapshots[1].manifest_list)} == {
        p: i for p, i in row_ids(snapshots[1].manifest_list).items() if p in kept
    }  # a kept file's rows keep their ids
    t.rollback_to(snapshot_id=1)
    t.write(nanos(range(200, 203)))
    assert iceberg(t.paths.root).metadata.snapshots[-1].first_row_id == 25  # ids of the rolled back too
    assert_history(t)


def test_a_copy_of_the_table_never_deletes_the_originals_metadata(catalog, tmp_path):
    """Iceberg metadata names its files by absolute path: a copy (a backup) names the original's,
    and syncing the copy must not retire them."""
    import shutil

    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(rows(range(0, 10), "x"))
    shutil.copytree(tmp_path / "warehouse", tmp_path / "backup")
    copy = Catalog(str(tmp_path / "backup")).get_table("db.t")
    copy.write(rows(range(10, 20), "x"))
    same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())
    same_rows(copy.read(), iceberg(copy.paths.root).scan().to_arrow())


@pytest.mark.parametrize("storage", ["table-location", "hadoop-catalog"])
def test_a_renamed_table_is_described_where_its_files_now_are_and_a_dropped_one_not_at_all(
    catalog, tmp_path, storage
):
    options = {"metadata.iceberg.storage": storage, "metadata.iceberg.previous-versions-max": "5"}
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=options)
    t.write(rows(range(0, 10), "x"))
    t.write(rows(range(10, 20), "y"))
    t.create_tag("first", snapshot_id=1)
    catalog.create_database("other")
    catalog.rename_table("db.t", "other.moved")
    moved = catalog.get_table("other.moved")
    catalog_home = str(tmp_path / "warehouse" / "iceberg" / "other")
    home = moved.paths.root if storage == "table-location" else catalog_home
    assert moved.iceberg_metadata_location().startswith(home)
    assert not (tmp_path / "warehouse" / "iceberg" / "db" / "t").exists()  # nothing left under the old name
    assert_history(moved)  # every snapshot, every tag, every file where it now is
    metadata = Path(moved.iceberg_metadata_location()).parent
    assert [p.name for p in metadata.glob("v*.metadata.json")] == ["v2.metadata.json"]  # none names old paths
    catalog.drop_table("other.moved")
    assert not (tmp_path / "warehouse" / "iceberg" / "other" / "moved").exists()


def test_polars_and_duckdb_read_the_table_through_its_iceberg_metadata(catalog):
    import polars as pl

    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=TABLE_LOCATION)
    t.write(pa.concat_tables([rows(range(0, 30), "x"), rows(range(30, 40), "y")]))
    location = t.iceberg_metadata_location()
    frame = pl.scan_iceberg(location).filter(pl.col("dt") == "y").select("id").collect()
    assert sorted(frame["id"].to_list()) == list(range(30, 40))
    duck = iceberg(location).scan().to_duckdb("orders")
    x = duck.sql("SELECT count(*), sum(id) FROM orders WHERE dt = 'x'").fetchall()
    assert x == [(30, sum(range(30)))]


def test_an_iceberg_reader_reads_a_table_on_s3(s3_warehouse):
    """On an object store the metadata names the files by their s3:// paths, which pyiceberg
    opens with the store's endpoint and credentials."""
    uri, options = s3_warehouse
    catalog = Catalog(uri, options=options)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"],
                             options={"metadata.iceberg.storage": "hadoop-catalog"})  # fmt: skip
    t.write(pa.concat_tables([rows(range(0, 20), "x"), rows(range(20, 30), "y")]))
    t.write(rows(range(30, 35), "y"))
    location = t.iceberg_metadata_location()
    assert location.startswith("s3://") and "/iceberg/db/t/metadata/v2.metadata.json" in location
    from pyiceberg.table import StaticTable

    properties = {
        "s3.endpoint": options["s3.endpoint"],
        "s3.access-key-id": options["s3.access-key"],
        "s3.secret-access-key": options["s3.secret-key"],
        "s3.region": options["s3.region"],
    }
    table = StaticTable.from_metadata(location, properties)
    same_rows(t.read(), table.scan().to_arrow())
    same_rows(t.read(filter=col("dt") == "y"), table.scan(row_filter="dt = 'y'").to_arrow())


@pytest.mark.parametrize(
    ("primary_keys", "options"),
    [((), TABLE_LOCATION), ((), V3), (("id", "dt"), TABLE_LOCATION), (("id", "dt"), DELETION_VECTORS)],
    ids=["append", "append-v3", "primary-key", "deletion-vectors"],
)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.sampled_from(["append", "overwrite", "compact", "expire", "rollback", "tag", "index"]), max_size=8
    )
)
def test_after_any_history_iceberg_readers_read_every_snapshot(tmp_path_factory, primary_keys, options, ops):
    """Random histories of writes, overwrites, full compactions, expirations, rollbacks, tags and
    file-index rewrites: after each, Iceberg's history is the table's snapshots and tags, names
    only files that exist, and pyiceberg reads every snapshot of an append table as we do, and
    the latest snapshot of a primary-key table whenever all of it is compacted into the top level."""
    warehouse = tmp_path_factory.mktemp("iceberg")
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    options = {**options, "bucket": "1" if primary_keys else "-1",
               "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3",
               "metadata.iceberg.compaction.min.file-num": "2",  # manifests merged often
               "metadata.iceberg.compaction.max.file-num": "3"}  # fmt: skip
    keys = list(primary_keys)
    t = catalog.create_table("db.t", SCHEMA, primary_keys=keys, partition_keys=["dt"], options=options)
    for n, op in enumerate(["append", *ops]):
        ids = range(n * 3 % 7, n * 3 % 7 + 5)  # overlapping keys: upserts in a primary-key table
        if op == "append":
            t.write(rows(ids, "x" if n % 2 else "y", f"n{n}-"))
        elif op == "overwrite":
            t.write(rows(ids, "x", f"o{n}-"), overwrite={"dt": "x"})
        elif op == "compact":
            t.compact(full=True)
        elif op == "expire":
            t.expire_snapshots()
        elif op == "rollback" and t.earliest_snapshot_id() < t.latest_snapshot_id():
            t.rollback_to(snapshot_id=t.earliest_snapshot_id())
        elif op == "tag":
            t.create_tag(f"t{n}")
        elif op == "index":
            t.set_options({"file-index.bloom-filter.columns": "id,name" if n % 2 else "id"})
            t.rewrite_file_index()  # restates every file: the same files stay listed once
        merged_by_iceberg = not primary_keys or "deletion-vectors.enabled" in options
        assert_history(t, compare=None if merged_by_iceberg else lambda sid: False)
        if primary_keys and _fully_compacted(t):
            same_rows(t.read(), iceberg(t.paths.root).scan().to_arrow())


def _fully_compacted(t) -> bool:
    """Whether every file of the table is in the top level (what Iceberg sees is all of it)."""
    return all(set(s.files_per_level) <= {t.schema.core_options.num_levels - 1} for s in t.lsm_shape())


def test_nested_columns_reach_iceberg_by_the_ids_their_parquet_fields_carry(catalog):
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string())),
                        ("attrs", pa.map_(pa.string(), pa.int64())),
                        ("point", pa.struct([("x", pa.float64()), ("y", pa.float64())]))])  # fmt: skip
    t = catalog.create_table("db.t", schema, options=TABLE_LOCATION)
    data = pa.table(
        {
            "id": [1, 2],
            "tags": [["a", "b"], None],
            "attrs": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
            "point": [{"x": 1.0, "y": 2.0}, None],
        },
        schema=schema,
    )
    t.write(data)
    theirs = iceberg(t.paths.root).scan().to_arrow().sort_by("id")
    assert theirs.to_pylist() == t.read().sort_by("id").to_pylist()
