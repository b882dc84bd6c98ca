"""compaction.async: writes commit without compacting, a background thread compacts the buckets
they wrote and commits on its own; the stop trigger bounds how far it may fall behind."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import lakehouse.ops.background_compaction as background
from lakehouse.errors import InvalidOptionError
from lakehouse.snapshot import CommitKind

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())])
ASYNC = {"bucket": "2", "compaction.async": "true", "num-sorted-run.compaction-trigger": "2"}


def rows(start: int, stop: int, v: int) -> pa.Table:
    return pa.table({"k": range(start, stop), "v": [v] * (stop - start)}, schema=SCHEMA)


@pytest.fixture
def held(monkeypatch):
    """Background rounds wait for the event before compacting."""
    gate = threading.Event()
    compact = background.compact_buckets

    def gated(*args, **kwargs):
        gate.wait(30)
        return compact(*args, **kwargs)

    monkeypatch.setattr(background, "compact_buckets", gated)
    yield gate
    gate.set()


def kinds(t) -> list[CommitKind]:
    return [t.snapshot(i).commit_kind for i in t.snapshots.snapshot_ids()]


def test_writes_commit_at_once_and_compaction_follows(catalog, held):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options=ASYNC)
    for v in range(4):
        t.write(rows(0, 100, v))
        assert t.read().sort_by("k").column("v").to_pylist() == [v] * 100
    assert kinds(t) == [CommitKind.APPEND] * 4  # nothing compacted in a write's commit
    held.set()
    t.wait_compaction()
    assert CommitKind.COMPACT in kinds(t)
    assert all(b.sorted_runs < 2 for b in t.lsm_shape())
    assert t.read().sort_by("k").column("v").to_pylist() == [3] * 100
    assert t.verify_primary_key().ok


def test_a_write_past_the_stop_trigger_waits_for_compaction(catalog, held):
    t = catalog.create_table(
        "db.t", SCHEMA, primary_keys=["k"], options={**ASYNC, "num-sorted-run.stop-trigger": "3"}
    )
    for v in range(3):
        t.write(rows(0, 10, v))
    done = threading.Event()
    writer = threading.Thread(target=lambda: (t.write(rows(0, 10, 3)), done.set()))
    writer.start()
    assert not done.wait(1.0)  # a fourth sorted run: the write waits for the held compaction
    held.set()
    writer.join(30)
    assert done.is_set() and CommitKind.COMPACT in kinds(t)
    assert t.read().column("v").to_pylist() == [3] * 10


def test_a_failed_round_changes_nothing_and_is_raised_by_wait(catalog, monkeypatch):
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options=ASYNC)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(background, "compact_buckets", broken)
    for v in range(3):
        t.write(rows(0, 10, v))
    with pytest.raises(OSError, match="disk full"):
        t.wait_compaction()
    t.wait_compaction()  # raised once
    assert kinds(t) == [CommitKind.APPEND] * 3
    assert t.read().column("v").to_pylist() == [2] * 10


def test_background_rounds_leave_a_writers_identifiers_alone(catalog):
    """Rounds commit as their own user: a writer's newest snapshot stays its newest write, so its
    identifiers and properties still tell what it committed."""
    t = catalog.create_table("db.t", SCHEMA, primary_keys=["k"], options=ASYNC)
    for i in range(1, 5):
        assert t.write(rows(0, 10, i), commit_user="sink", identifier=i, properties={"batch": str(i)})
    t.wait_compaction()
    compactions = [
        t.snapshot(i) for i in t.snapshots.snapshot_ids() if t.snapshot(i).commit_kind == CommitKind.COMPACT
    ]
    assert compactions and {s.commit_user for s in compactions} == {"sink-compaction"}
    assert t.write(rows(0, 10, 9), commit_user="sink", identifier=4) is None  # a replay
    latest = t.snapshots.latest_of_user("sink")
    assert latest.commit_identifier == 4 and latest.properties == {"batch": "4"}
    assert t.write(rows(0, 10, 5), commit_user="sink", identifier=5) is not None


@pytest.mark.parametrize(
    "options, why",
    [
        ({}, "no primary key"),
        ({"bucket": "-1"}, "dynamic"),
        ({"bucket": "2", "deletion-vectors.enabled": "true"}, "deletion vectors"),
        ({"bucket": "2", "changelog-producer": "lookup"}, "changelog producer"),
        ({"bucket": "2", "merge-engine": "first-row"}, "first-row"),
        ({"bucket": "2", "write-only": "true"}, "write-only"),
    ],
)
def test_tables_whose_commits_must_compact_refuse_it(catalog, options, why):
    keys = [] if why == "no primary key" else ["k"]
    t = catalog.create_table(
        "db.t", SCHEMA, primary_keys=keys, options={**options, "compaction.async": "true"}
    )
    with pytest.raises(InvalidOptionError, match=why):
        t.write(rows(0, 10, 1))
    assert t.latest_snapshot_id() is None
