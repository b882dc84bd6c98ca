"""Branches on tiny real tables: Paimon's layout, isolation of reads and writes, time travel,
fast-forward, deletion, name checks, and cleanups that keep every branch's files."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.errors import (
    BranchExistsError,
    BranchNotFoundError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakehouse.ops import branches as branch_ops
from lakehouse.ops.orphans import candidate_files, referenced_files

from .conftest import orders, pk_orders_table, rows

FUTURE = 2**62


def listing(root: str) -> set[str]:
    """Every file under a directory, relative to it."""
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def used_files(t) -> set[str]:
    """Files some snapshot or tag of any branch of ``t`` references."""
    store = t.store
    used = referenced_files(store)
    for other in store.other_branches():
        used.update(referenced_files(other))
    return used.all()


def on_disk(t) -> set[str]:
    """The data and metadata files cleanups look at, on every branch."""
    store = t.store
    return {st.path for s in (store, *store.other_branches()) for st in candidate_files(s)}


@pytest.fixture
def t(catalog):
    """``db.t`` with snapshots 1..3 and tag ``t2`` on snapshot 2."""
    table = pk_orders_table(catalog)
    for i in range(3):
        table.write(orders(range(i * 4, i * 4 + 6), price=float(i)))
    table.create_tag("t2", snapshot_id=2)
    return table


def test_create_from_tag_lays_out_the_branch_as_paimon_does(catalog, t):
    before = rows(t.read(tag="t2"))
    made = t.create_branch("b", tag="t2")
    assert made.name == "b" and made.create_time_ms > 0
    root = Path(t.paths.root)
    assert listing(str(root / "branch/branch-b")) == {"tag/tag-t2", "snapshot/snapshot-2", "schema/schema-0"}
    copied = (root / "branch/branch-b/snapshot/snapshot-2").read_bytes()
    assert copied == (root / "snapshot/snapshot-2").read_bytes()
    assert t.branches() == ["b"]
    for b in (
        catalog.get_table("db.t$branch_b"),
        catalog.get_table("db.t", branch="b"),
        catalog.get_table("db.t", options={"branch": "b"}),
        t.on_branch("b"),
    ):
        assert b.name == "db.t$branch_b" and b.branch == "b"
        assert rows(b.read()) == before and b.tags() == {"t2": 2}
    assert catalog.get_table("db.t$branch_main").name == "db.t"
    assert pickle.loads(pickle.dumps(t.on_branch("b"))).branch == "b"


def test_create_from_snapshot_copies_it_and_its_schemas(t):
    before = rows(t.read(snapshot_id=2))
    t.add_column("note", pa.string())
    t.write(orders(range(2)).append_column("note", pa.array(["x", "y"])))
    t.create_branch("old", snapshot_id=2)
    t.create_branch("new", snapshot_id=t.latest_snapshot_id())
    old, new = t.on_branch("old"), t.on_branch("new")
    assert old.schema_manager.schema_ids() == [0] and old.snapshots.snapshot_ids() == [2]
    assert new.schema_manager.schema_ids() == [0, 1] and old.tags() == {}
    assert rows(old.read()) == before and "note" not in old.arrow_schema.names
    assert rows(new.read()) == rows(t.read())


def test_empty_branch_starts_at_snapshot_one_with_the_current_schema(t):
    t.create_branch("e")
    e = t.on_branch("e")
    assert e.latest_snapshot_id() is None and e.read().num_rows == 0
    assert e.schema.id == t.schema.id
    assert e.write(orders(range(100, 103))) == 1
    assert rows(e.read()) == rows(orders(range(100, 103)))
    assert t.latest_snapshot_id() == 3


def test_writes_time_travel_tags_and_schema_changes_stay_on_their_branch(t):
    main_before = rows(t.read())
    t.create_branch("b", tag="t2")
    b = t.on_branch("b")
    assert b.write(orders(range(50, 55), price=7.0)) == 3  # the branch's own snapshot 3
    b.create_tag("mine")
    b.add_column("note", pa.string())
    b.write(orders(range(50, 52), price=8.0).append_column("note", pa.array(["n", "n"])))
    b.compact(full=True)
    assert rows(t.read()) == main_before and t.tags() == {"t2": 2}
    assert "note" not in t.refresh().arrow_schema.names and t.schema_manager.schema_ids() == [0]
    assert b.tags() == {"t2": 2, "mine": 3}
    at_3 = rows(b.read(snapshot_id=3))
    assert rows(b.read(tag="mine")) == at_3 and {r["order_id"] for r in at_3} >= set(range(50, 55))
    assert rows(b.read(snapshot_id=2)) == rows(t.read(snapshot_id=2))
    assert {r["order_id"]: r["note"] for r in b.read().to_pylist() if r["order_id"] in (50, 51)} == {
        50: "n",
        51: "n",
    }
    t.write(orders(range(90, 92)))
    assert {r["order_id"] for r in b.read().to_pylist()}.isdisjoint({90, 91})
    assert t.latest_snapshot_id() == 4 and b.latest_snapshot_id() == 5
    b.read_changes(3, consumer_id="reader")  # consumers too are the branch's own
    assert os.path.exists(os.path.join(b.paths.branch_root, "consumer", "consumer-reader"))
    assert not os.path.exists(os.path.join(t.paths.root, "consumer"))


def test_fast_forward_replaces_main_after_the_branch_point(catalog, t):
    t.create_branch("b", tag="t2")
    b = t.on_branch("b")
    b.add_column("note", pa.string())
    b.write(orders(range(60, 63)).append_column("note", pa.array(["a", "b", "c"])))
    b.create_tag("b-tag")
    t.create_tag("t3", snapshot_id=3)  # after the branch point: goes
    t.create_tag("t1", snapshot_id=1)  # before it: stays
    expected = rows(b.read())
    result = t.fast_forward("b")
    assert (result.snapshot_id, result.snapshots_removed, result.snapshots_copied) == (3, 2, 2)
    assert result.tags_removed == ("t2", "t3") and result.tags_copied == ("b-tag", "t2")
    assert rows(t.read()) == expected and "note" in t.arrow_schema.names
    assert t.tags() == {"t1": 1, "t2": 2, "b-tag": 3}
    assert t.snapshots.snapshot_ids() == [1, 2, 3] and t.snapshots.read_hint("LATEST") == 3
    assert t.schema_manager.schema_ids() == [0, 1]
    assert t.write(orders(range(70, 72)).append_column("note", pa.array(["d", "e"]))) == 4
    assert rows(catalog.get_table("db.t").read(snapshot_id=1)) == rows(orders(range(6), price=0.0))
    assert t.branches() == ["b"]  # the branch stays, as in Paimon


def test_a_killed_fast_forward_leaves_a_readable_table_and_finishes_when_run_again(t, monkeypatch):
    t.create_branch("b", tag="t2")
    b = t.on_branch("b")
    for i in range(3):
        b.write(orders(range(i, i + 2), price=10.0 + i))
    expected, expected_ids = rows(b.read()), [1, *b.snapshots.snapshot_ids()]
    copy = branch_ops._copy
    for kill_after in range(0, 6):
        calls = []

        def dying(table, source, target, calls=calls, kill_after=kill_after):
            if len(calls) == kill_after:
                raise OSError("killed")
            calls.append(target)
            copy(table, source, target)

        monkeypatch.setattr(branch_ops, "_copy", dying)
        with pytest.raises(OSError, match="killed"):
            t.fast_forward("b")
        monkeypatch.setattr(branch_ops, "_copy", copy)
        latest = t.snapshots.latest_id()
        if latest is not None:
            t.refresh().read()  # whatever a kill leaves reads
        t.fast_forward("b")
        assert rows(t.read()) == expected and t.snapshots.snapshot_ids() == expected_ids


def test_a_killed_create_leaves_a_readable_branch_to_delete_and_create_again(t, monkeypatch):
    copy = branch_ops._copy

    def dying(table, source, target):
        if "/snapshot/" in target:
            raise OSError("killed")
        copy(table, source, target)

    monkeypatch.setattr(branch_ops, "_copy", dying)
    with pytest.raises(OSError, match="killed"):
        t.create_branch("b", tag="t2")
    monkeypatch.setattr(branch_ops, "_copy", copy)
    assert t.on_branch("b").read().num_rows == 0  # its schemas came first: an empty branch
    assert t.expire_snapshots(retain_min=1, older_than_ms=FUTURE).snapshots_expired == 2
    with pytest.raises(BranchExistsError):
        t.create_branch("b", tag="t2")
    t.delete_branch("b")
    t.create_branch("b", tag="t2")
    assert rows(t.on_branch("b").read()) == rows(t.read(tag="t2"))


def test_delete_branch_then_orphan_cleanup_frees_its_files(t):
    t.create_branch("b", tag="t2")
    b = t.on_branch("b")
    existing = listing(t.paths.root)
    b.write(orders(range(200, 240), price=3.0))
    mine = {os.path.join(t.paths.root, f) for f in listing(t.paths.root) - existing if "/snapshot" not in f}
    before = rows(t.read())
    time.sleep(0.01)
    now = int(time.time() * 1000) - 1
    assert t.remove_orphan_files(older_than_ms=now).files == 0  # the branch's files are in use
    assert b.remove_orphan_files(older_than_ms=now).files == 0
    assert on_disk(t) == used_files(t)
    deleted = t.delete_branch("b")
    assert deleted.name == "b" and t.branches() == [] and not os.path.exists(b.paths.branch_root)
    time.sleep(0.01)
    freed = t.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 1)
    assert mine and mine <= set(freed.paths)  # data files, manifests and lists of its write
    assert rows(t.read()) == before and rows(t.read(tag="t2")) == rows(t.read(snapshot_id=2))
    assert on_disk(t) == used_files(t)


def test_expiring_main_past_the_branch_point_keeps_the_branch_whole(t):
    t.create_branch("s", snapshot_id=2)  # no tag protects it on main
    t.create_branch("e")
    s, e = t.on_branch("s"), t.on_branch("e")
    s.write(orders(range(300, 303)))
    e.write(orders(range(400, 403)))
    seen = {sid: rows(s.read(snapshot_id=sid)) for sid in s.snapshots.snapshot_ids()}
    for i in range(4):
        t.write(orders(range(i, i + 10), price=20.0 + i))
    t.delete_tag("t2")
    t.compact(full=True)
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert t.snapshots.snapshot_ids() == [t.latest_snapshot_id()]
    for sid, expected in seen.items():
        assert rows(s.read(snapshot_id=sid)) == expected
    assert rows(e.read()) == rows(orders(range(400, 403)))
    s.expire_snapshots(retain_min=1, older_than_ms=FUTURE)  # the branch's own expiration keeps main's
    assert rows(s.read()) == seen[max(seen)]
    assert on_disk(t) == used_files(t)


def test_rollback_and_tag_deletion_on_main_keep_the_files_of_branches(t):
    t.create_branch("s", snapshot_id=3)
    t.create_branch("x", tag="t2")
    s, x = t.on_branch("s"), t.on_branch("x")
    s.write(orders(range(500, 502)))
    at_s, at_x = rows(s.read()), rows(x.read())
    t.rollback_to(tag="t2")  # main's snapshot 3, which s starts from, goes
    t.write(orders(range(600, 610)))
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)  # tag t2 alone keeps snapshot 2
    t.delete_tag("t2")  # x's copy of it still needs its files
    assert rows(s.read()) == at_s and rows(x.read()) == at_x
    assert on_disk(t) == used_files(t)


def test_bad_names_and_sources_change_nothing(catalog, t):
    t.create_branch("b")
    root = t.paths.root
    before = listing(root)
    for name, error, match in [
        ("main", InvalidArgumentError, "default branch"),
        ("", InvalidArgumentError, "non-blank"),
        ("   ", InvalidArgumentError, "non-blank"),
        ("123", InvalidArgumentError, "only digits"),
        ("a/b", InvalidArgumentError, "'/'"),
        ("a$b", InvalidArgumentError, r"\$"),
        (None, InvalidArgumentError, "non-blank"),
        ("b", BranchExistsError, "already has a branch 'b'"),
    ]:
        with pytest.raises(error, match=match):
            t.create_branch(name)
    with pytest.raises(SnapshotNotFoundError, match="no tag 'nope'"):
        t.create_branch("x", tag="nope")
    with pytest.raises(SnapshotNotFoundError, match="no snapshot 9"):
        t.create_branch("x", snapshot_id=9)
    with pytest.raises(InvalidArgumentError, match="not both"):
        t.create_branch("x", snapshot_id=1, tag="t2")
    with pytest.raises(BranchNotFoundError, match="no branch 'x'"):
        t.delete_branch("x")
    with pytest.raises(InvalidArgumentError, match="other than 'main'"):
        t.fast_forward("main")
    with pytest.raises(InvalidArgumentError, match="to itself"):
        t.on_branch("b").fast_forward("b")
    with pytest.raises(SnapshotNotFoundError, match="no snapshot to fast-forward"):
        t.fast_forward("b")
    with pytest.raises(BranchNotFoundError, match="no branch 'x'"):
        t.fast_forward("x")
    with pytest.raises(TableNotFoundError, match="no branch 'x'"):
        catalog.get_table("db.t$branch_x")
    with pytest.raises(InvalidArgumentError, match="named at once"):
        catalog.get_table("db.t$branch_b", branch="c")
    with pytest.raises(InvalidArgumentError, match="must look like"):
        catalog.get_table("db.t$snapshots$files")
    assert listing(root) == before


def test_branches_system_table_and_system_tables_of_a_branch(catalog, t):
    t.create_branch("b", tag="t2")
    t.create_branch("a")
    t.on_branch("b").write(orders(range(3)))
    got = catalog.get_table("db.t$branches").read()
    assert got.schema.names == ["branch_name", "create_time"]
    assert got.column("branch_name").to_pylist() == ["a", "b"]
    assert all(v.timestamp() > 0 for v in got.column("create_time").to_pylist())
    snaps = catalog.get_table("db.t$branch_b$snapshots").read().column("snapshot_id").to_pylist()
    assert snaps == [2, 3]
    assert catalog.get_table("db.t$snapshots", branch="b").read().num_rows == 2
    assert catalog.get_table("db.t$branch_a$snapshots").read().num_rows == 0
    assert catalog.get_table("db.t$branch_b$tags").read().column("tag_name").to_pylist() == ["t2"]
    assert catalog.get_table("db.t$branch_b$branches").read().num_rows == 2
    assert catalog.get_table("db.t$snapshots").read().num_rows == 3


def test_table_at_and_a_reopened_catalog_see_branches(warehouse, t):
    from lakehouse.catalog import table_at

    t.create_branch("b", tag="t2")
    assert rows(table_at(t.paths.root, branch="b").read()) == rows(t.read(tag="t2"))
    assert Catalog(warehouse).get_table("db.t").branches() == ["b"]


def test_reloading_a_table_dropped_meanwhile_says_so(catalog, t):
    """A fast-forward reloads the schemas it copied: a table dropped meanwhile has none."""
    store = t.store
    catalog.drop_table(t.name)
    with pytest.raises(TableNotFoundError, match=f"table {t.name} has no schema files any more"):
        store.reload()
