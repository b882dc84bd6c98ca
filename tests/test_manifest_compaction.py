"""compact_manifest: every manifest of the latest snapshot merged, the data untouched."""

from __future__ import annotations

from lakehouse.manifest.entries import FileKind
from lakehouse.snapshot import CommitKind

from .conftest import orders, pk_orders_table, rows

KEY = ["order_id", "dt"]


def history(t, n: int) -> None:
    """``n`` upserts over two partitions, then a full compaction (manifests with DELETE entries)."""
    for i in range(n):
        t.write(orders(range(i, i + 4), dt=["d1", "d2"] * 2, price=float(i)))
    t.compact(full=True)


def test_compact_manifest_merges_every_manifest_and_keeps_the_data(catalog):
    t = pk_orders_table(catalog)
    history(t, 6)
    latest, manifests = t.snapshot(), t.manifests()
    before = manifests.data_manifests(latest)
    expected, live = rows(t.read(), KEY), {e.identifier for e in t.live_entries()}
    assert len(before) > 1 and any(m.num_deleted_files for m in before)
    done = t.compact_manifest(commit_user="maintenance")
    snap = t.snapshot()
    after = manifests.data_manifests(snap)
    assert (done.snapshot_id, done.manifests_before, done.manifests_after) == (latest.id + 1, len(before), 1)
    assert snap.commit_kind == CommitKind.COMPACT and snap.commit_user == "maintenance"
    assert (snap.delta_record_count, snap.total_record_count) == (0, latest.total_record_count)
    assert (
        snap.index_manifest == latest.index_manifest and manifests.read_list(snap.delta_manifest_list) == []
    )
    assert len(after) == 1 and after[0].num_deleted_files == 0
    assert all(e.kind == FileKind.ADD for e in manifests.read_manifest(after[0].file_name))
    assert {e.identifier for e in t.live_entries()} == live
    assert rows(t.read(), KEY) == expected and rows(t.read(snapshot_id=latest.id), KEY) == expected
    assert t.compact_manifest().snapshot_id is None  # already compact: nothing is committed
    assert t.latest_snapshot_id() == snap.id


def test_writes_after_compact_manifest_build_on_it(catalog):
    t = pk_orders_table(catalog)
    history(t, 3)
    before = rows(t.read(), KEY)
    t.compact_manifest()
    t.write(orders([100], dt="d1"))
    t.compact(full=True)
    assert len(t.manifests().data_manifests(t.snapshot())) > 1
    assert t.compact_manifest().manifests_after == 1
    assert rows(t.read(), KEY) == before + rows(orders([100], dt="d1"))


def test_compact_manifest_of_an_empty_table_does_nothing(catalog):
    t = pk_orders_table(catalog)
    done = t.compact_manifest()
    assert (done.snapshot_id, done.manifests_before, done.manifests_after) == (None, 0, 0)
    assert t.latest_snapshot_id() is None
