from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lakehouse.errors import CorruptFileError, SnapshotNotFoundError
from lakehouse.snapshot import CommitKind, Snapshot

from .conftest import ORDERS, orders, rows


def test_snapshot_json_has_paimon_keys_in_java_order():
    s = Snapshot(
        id=3,
        schema_id=0,
        base_manifest_list="b",
        delta_manifest_list="d",
        commit_user="u",
        commit_identifier=2**63 - 1,
        commit_kind=CommitKind.APPEND,
        time_millis=5,
        total_record_count=10,
        delta_record_count=2,
        base_manifest_list_size=7,
        delta_manifest_list_size=8,
        uuid="x",
    )
    text = s.to_json()
    assert list(json.loads(text)) == [
        "version",
        "uuid",
        "id",
        "schemaId",
        "baseManifestList",
        "baseManifestListSize",
        "deltaManifestList",
        "deltaManifestListSize",
        "commitUser",
        "writerVersion",
        "commitIdentifier",
        "commitKind",
        "timeMillis",
        "totalRecordCount",
        "deltaRecordCount",
        "nextRowId",
    ]
    assert '"commitKind" : "APPEND"' in text and not text.endswith("\n")
    assert Snapshot.from_json(text) == s


def _table(catalog, commits=3):
    t = catalog.create_table("db.t", ORDERS)
    for i in range(commits):
        t.write(orders([i]))
    return t


def test_commits_make_consecutive_snapshots_with_record_counts(catalog):
    t = _table(catalog)
    assert t.snapshots.snapshot_ids() == [1, 2, 3]
    s = t.snapshots.snapshot(3)
    assert (s.total_record_count, s.delta_record_count, s.commit_kind) == (3, 1, CommitKind.APPEND)
    assert t.latest_snapshot_id() == 3
    assert not os.path.exists(t.paths.snapshot_dir + "/EARLIEST")  # only expiration writes it


@pytest.mark.parametrize("hint", [None, b"1", b"99", b"garbage", b"3\n"])
def test_latest_survives_stale_missing_or_broken_hints(catalog, hint):
    t = _table(catalog)
    path = t.paths.snapshot_dir + "/LATEST"
    if hint is None:
        os.remove(path)
    else:
        with open(path, "wb") as f:
            f.write(hint)
    assert t.latest_snapshot_id() == 3
    assert t.snapshots.earliest_id() == 1


def test_time_travel_by_id_and_timestamp(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1]))
    time.sleep(0.01)
    t.write(orders([2]))
    first, second = t.snapshots.snapshot(1), t.snapshots.snapshot(2)
    assert [r["order_id"] for r in rows(t.read(snapshot_id=1))] == [1]
    assert [r["order_id"] for r in rows(t.read(timestamp_ms=first.time_millis))] == [1]
    assert [r["order_id"] for r in rows(t.read(timestamp_ms=second.time_millis + 1000))] == [1, 2]
    with pytest.raises(SnapshotNotFoundError, match="no snapshot at or before"):
        t.read(timestamp_ms=first.time_millis - 1)
    with pytest.raises(SnapshotNotFoundError, match=r"snapshots 1\.\.2"):
        t.read(snapshot_id=7)
    with pytest.raises(SnapshotNotFoundError, match="no tag"):
        t.read(tag="v1")


def test_empty_table_reads_empty(catalog):
    t = catalog.create_table("db.t", ORDERS)
    assert t.latest_snapshot_id() is None
    assert t.read().schema == ORDERS and t.read().num_rows == 0
    assert t.plan().stats["files_total"] == 0


@pytest.mark.parametrize(
    "damage", [b"", b'{"version" : 3, "id" :', b"\x00\x01 not json", b"[3]", b"[" * 100_000]
)
def test_corrupt_snapshot_is_a_typed_error_naming_the_file(catalog, damage):
    t = _table(catalog, commits=2)
    with open(t.paths.snapshot(2), "wb") as f:
        f.write(damage)
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        t.read()
    assert rows(t.read(snapshot_id=1))[0]["order_id"] == 0


@pytest.mark.parametrize(
    "field, value",
    [("id", "2"), ("schemaId", None), ("baseManifestList", 7), ("timeMillis", 2**70), ("properties", [1])],
)
def test_a_snapshot_field_of_the_wrong_type_is_corrupt(catalog, field, value):
    t = _table(catalog, commits=2)
    path = Path(t.paths.snapshot(2))
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(CorruptFileError, match=f"snapshot-2 is corrupt or truncated \\(field {field}"):
        t.read()


def test_a_hint_too_long_for_a_snapshot_id_is_ignored(catalog):
    t = _table(catalog, commits=2)
    Path(t.paths.snapshot_dir, "LATEST").write_text("9" * 5000)  # past int()'s digit limit, too
    assert t.latest_snapshot_id() == 2


def test_a_tag_of_a_damaged_snapshot_is_not_created(catalog):
    t = _table(catalog, commits=2)
    Path(t.paths.snapshot(2)).write_bytes(b'{"id": 2')
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        t.create_tag("v1", snapshot_id=2)
    assert t.snapshots.tag_names() == []


def test_a_damaged_tag_file_is_corrupt_naming_it(catalog):
    t = _table(catalog, commits=2)
    t.create_tag("v1", snapshot_id=1)
    Path(t.paths.tag("v1")).write_bytes(b"{")
    with pytest.raises(CorruptFileError, match="tag file .*tag-v1 is corrupt"):
        t.read(tag="v1")
