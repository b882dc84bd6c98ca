"""Snapshot expiration, tags, rollback, consumers and orphan files on tiny real tables."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lakehouse.errors import InvalidArgumentError, SnapshotNotFoundError, TagExistsError
from lakehouse.ops.orphans import candidate_files, referenced_files
from lakehouse.store import consumers

from .conftest import orders, pk_orders_table, rows

FUTURE = 2**62  # an older_than_ms every snapshot is older than


def history(t, n: int) -> dict[int, list]:
    """``n`` upserting writes; snapshot id -> rows it reads."""
    seen = {}
    for i in range(n):
        t.write(orders(range(i, i + 4), price=float(i)))
        for sid in t.snapshots.snapshot_ids():
            seen.setdefault(sid, rows(t.read(snapshot_id=sid)))
    return seen


def assert_clean(t) -> None:
    """Files on disk are exactly the referenced ones."""
    assert {st.path for st in candidate_files(t)} == referenced_files(t).all()


def test_defaults_keep_young_snapshots_and_ten_old_ones(catalog):
    t = pk_orders_table(catalog)
    seen = history(t, 14)
    latest = t.latest_snapshot_id()
    assert t.expire_snapshots().snapshots_expired == 0  # all younger than snapshot.time-retained (1 h)
    result = t.expire_snapshots(older_than_ms=FUTURE)
    assert t.snapshots.snapshot_ids() == list(range(latest - 9, latest + 1))  # snapshot.num-retained.min
    assert result.snapshots_expired == latest - 10 and result.earliest_snapshot_id == latest - 9
    assert result.deleted.data_files > 0 and result.deleted.metadata_files > 0
    assert t.snapshots.read_hint("EARLIEST") == latest - 9
    for sid in t.snapshots.snapshot_ids():
        assert rows(t.read(snapshot_id=sid)) == seen[sid]
    with pytest.raises(SnapshotNotFoundError):
        t.read(snapshot_id=1)
    assert_clean(t)


def test_options_limit_and_retain_max(catalog):
    limits = {
        "snapshot.num-retained.min": "1",
        "snapshot.num-retained.max": "4",
        "snapshot.expire.limit": "3",
    }
    t = pk_orders_table(catalog, **limits)
    history(t, 8)
    latest = t.latest_snapshot_id()
    assert t.expire_snapshots().snapshots_expired == 3  # beyond num-retained.max, whatever the age
    assert t.expire_snapshots(max_deletes=100).earliest_snapshot_id == latest - 3
    t.set_options({"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "9"})
    t.set_options({"snapshot.time-retained": "0 ms"})
    time.sleep(0.01)
    assert t.expire_snapshots(max_deletes=100).earliest_snapshot_id == latest - 1
    assert_clean(t)


def test_bad_arguments_change_nothing(catalog):
    t = pk_orders_table(catalog)
    history(t, 3)
    before = sorted(os.listdir(t.paths.manifest_dir))
    with pytest.raises(InvalidArgumentError, match="retain_max"):
        t.expire_snapshots(retain_min=5, retain_max=2)
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        t.expire_snapshots(retain_min=0)
    assert sorted(os.listdir(t.paths.manifest_dir)) == before
    assert t.snapshots.earliest_id() == 1


def test_consumers_hold_snapshots_back_until_they_expire(catalog):
    t = pk_orders_table(catalog)
    history(t, 6)
    consumers.record(t, "job-1", 3)
    assert consumers.consumers(t) == {"job-1": 3}
    assert t.expire_snapshots(retain_min=1, older_than_ms=FUTURE).earliest_snapshot_id == 3
    t.set_options({"consumer.expiration-time": "1 ms"})
    time.sleep(0.01)
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert consumers.consumers(t) == {}
    assert t.snapshots.earliest_id() == t.latest_snapshot_id()
    with pytest.raises(InvalidArgumentError):
        consumers.record(t, "a/b", 1)


class Killed(BaseException):
    """The process died here (nothing after it runs, no handler catches it)."""


def killed_after(t, deletions: int):
    """Make ``t``'s file deletions after the first ``deletions`` a kill."""
    delete, done = t.io.delete, []

    def dying(path: str) -> bool:
        if len(done) == deletions:
            raise Killed(path)
        done.append(path)
        return delete(path)

    t.io.delete = dying
    return done


def assert_orphans_cleaned(t, readable: dict[int, list]) -> None:
    """Every listed snapshot reads as before; once a day old, whatever a killed cleanup left is
    an orphan, and removing the orphans leaves the table clean."""
    for sid in t.snapshots.snapshot_ids():
        assert rows(t.read(snapshot_id=sid)) == readable[sid]
    two_days_ago = time.time() - 2 * 86400
    for directory, _, names in os.walk(t.paths.root):
        for name in names:
            os.utime(os.path.join(directory, name), (two_days_ago, two_days_ago))
    t.remove_orphan_files()
    assert_clean(t)


@pytest.mark.parametrize("deletions", [0, 1, 3, 4, 6, 12, 24])
def test_an_expiration_killed_after_any_deletion_leaves_every_listed_snapshot_whole(catalog, deletions):
    t = pk_orders_table(catalog)
    seen = history(t, 6)
    latest = t.latest_snapshot_id()
    done = killed_after(t, deletions)
    with pytest.raises(Killed):
        t.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    del t.io.delete
    assert [os.path.basename(p) for p in done[:4]] == [f"snapshot-{i}" for i in range(1, 5)][: len(done)]
    assert_orphans_cleaned(t, seen)
    assert t.expire_snapshots(retain_min=1, older_than_ms=FUTURE).earliest_snapshot_id == latest
    assert rows(t.read()) == seen[latest]
    assert_clean(t)


@pytest.mark.parametrize("deletions", [0, 1, 2, 3, 6])
def test_a_tag_deletion_killed_after_any_deletion_leaves_the_rest_whole(catalog, deletions):
    t = pk_orders_table(catalog)
    history(t, 3)
    t.create_tag("first")
    t.compact(full=True)  # the first tag's files are its own once its snapshot expires
    t.write(orders([7]))
    t.create_tag("second")
    t.write(orders([8]))
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    seen = {sid: rows(t.read(snapshot_id=sid)) for sid in t.snapshots.snapshot_ids()}
    second = rows(t.read(tag="second"))
    done = killed_after(t, deletions)
    with pytest.raises(Killed):
        t.delete_tag("first")
    del t.io.delete
    assert t.tags().keys() == ({"first", "second"} if not done else {"second"})
    assert_orphans_cleaned(t, seen)
    assert rows(t.read(tag="second")) == second


@pytest.mark.parametrize("deletions", [0, 1, 3, 4, 5, 9, 20])
def test_a_rollback_killed_after_any_deletion_leaves_a_shorter_history(catalog, deletions):
    t = pk_orders_table(catalog)
    seen = history(t, 5)
    latest = t.latest_snapshot_id()
    t.create_tag("late", snapshot_id=4)
    done = killed_after(t, deletions)
    with pytest.raises(Killed):
        t.rollback_to(snapshot_id=2)
    del t.io.delete
    later = [f"snapshot-{i}" for i in range(latest, 2, -1)]
    assert [os.path.basename(p) for p in done[: len(later)]] == later[: len(done)]
    assert t.snapshots.snapshot_ids() == list(range(1, latest + 1 - min(len(done), len(later))))
    assert_orphans_cleaned(t, seen)
    t.rollback_to(snapshot_id=2)
    assert rows(t.read()) == seen[2] and t.tags() == {}
    assert_clean(t)


def test_expire_after_commit_is_opt_in(catalog):
    t = pk_orders_table(catalog, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    history(t, 4)
    assert t.snapshots.earliest_id() == 1
    t.set_options({"snapshot.expire.after-commit": "true"})
    t.write(orders([1]))
    assert len(t.snapshots.snapshot_ids()) == 2


# ---- tags ---------------------------------------------------------------------------------


def test_tags_pin_snapshots_through_expiration(catalog):
    t = pk_orders_table(catalog)
    seen = history(t, 6)
    t.create_tag("first", snapshot_id=1)
    tag = t.create_tag("now")
    assert tag.snapshot.id == t.latest_snapshot_id()
    assert t.tags() == {"first": 1, "now": tag.snapshot.id}
    tag_file = os.path.join(t.paths.tag_dir, "tag-first")
    assert Path(tag_file).read_bytes() == Path(t.paths.snapshot(1)).read_bytes()  # Paimon's layout
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert rows(t.read(tag="first")) == seen[1]
    assert_clean(t)
    deleted = t.delete_tag("first")  # the snapshot is gone: the tag's own files go with it
    assert deleted.data_files > 0
    assert t.tags() == {"now": tag.snapshot.id}
    assert_clean(t)
    assert t.delete_tag("now").total == 0  # its snapshot still exists
    assert_clean(t)


def test_tag_errors(catalog):
    t = pk_orders_table(catalog)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot to tag"):
        t.create_tag("x")
    history(t, 2)
    t.create_tag("x")
    with pytest.raises(TagExistsError):
        t.create_tag("x", snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError):
        t.create_tag("y", snapshot_id=99)
    with pytest.raises(InvalidArgumentError):
        t.create_tag("a/b")
    with pytest.raises(SnapshotNotFoundError):
        t.delete_tag("nope")
    assert t.tags() == {"x": 2}


# ---- rollback -----------------------------------------------------------------------------


def test_rollback_to_snapshot_removes_later_snapshots_tags_and_files(catalog):
    t = pk_orders_table(catalog)
    seen = history(t, 5)
    t.create_tag("early", snapshot_id=2)
    t.create_tag("late", snapshot_id=4)
    latest = t.latest_snapshot_id()
    result = t.rollback_to(snapshot_id=3)
    assert result.snapshots_removed == latest - 3 and result.deleted.data_files > 0
    assert t.latest_snapshot_id() == 3 and result.tags_removed == ("late",)
    assert rows(t.read()) == seen[3]
    assert t.tags() == {"early": 2}
    assert_clean(t)
    t.write(orders([100]))
    assert t.latest_snapshot_id() == 4
    assert_clean(t)


def test_rollback_to_a_tag_older_than_every_snapshot(catalog):
    t = pk_orders_table(catalog)
    seen = history(t, 5)
    t.create_tag("v1", snapshot_id=1)
    t.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    assert t.snapshots.earliest_id() > 1
    t.rollback_to(tag="v1")
    assert t.snapshots.snapshot_ids() == [1]
    assert t.snapshots.earliest_id() == 1 and t.latest_snapshot_id() == 1
    assert rows(t.read()) == seen[1]
    assert_clean(t)


def test_rollback_errors(catalog):
    t = pk_orders_table(catalog)
    history(t, 2)
    with pytest.raises(InvalidArgumentError):
        t.rollback_to()
    with pytest.raises(SnapshotNotFoundError):
        t.rollback_to(snapshot_id=9)
    with pytest.raises(SnapshotNotFoundError):
        t.rollback_to(tag="nope")
    assert t.latest_snapshot_id() == 2


# ---- orphan files -------------------------------------------------------------------------


def test_orphan_files_older_than_the_threshold_go(catalog):
    t = pk_orders_table(catalog)
    history(t, 3)
    bucket = os.path.dirname(t.paths.data_file(t.bucket_path(t.live_entries()[0].partition, 0), "x"))
    old = os.path.join(bucket, "data-crashed.parquet")
    young = os.path.join(t.paths.manifest_dir, "manifest-x")
    stray = os.path.join(t.paths.snapshot_dir, ".snapshot-9.tmp")
    for path in (old, young, stray):
        Path(path).write_bytes(b"junk")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    os.utime(stray, (two_days_ago, two_days_ago))
    dry = t.remove_orphan_files(dry_run=True)
    assert dry.paths == tuple(sorted([old, stray])) and dry.bytes == 8
    assert os.path.exists(old)
    done = t.remove_orphan_files()
    assert done.files == 2 and not os.path.exists(old) and os.path.exists(young)
    ten_seconds_ago = time.time() - 10  # file mtimes come from a coarser clock than time.time()
    os.utime(young, (ten_seconds_ago, ten_seconds_ago))
    t.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 5_000)
    assert not os.path.exists(young)
    assert rows(t.read()) and t.snapshots.snapshot_ids() == [1, 2, 3]
    with pytest.raises(InvalidArgumentError, match="past"):
        t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000)


def test_orphan_cleanup_never_reaches_through_a_symbolic_link(catalog, tmp_path):
    t = pk_orders_table(catalog)
    history(t, 2)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    kept = [outside / "data-x.parquet", outside / "manifest-y"]
    for path in kept:
        path.write_bytes(b"precious")
    partition = os.path.dirname(t.paths.data_file(t.bucket_path(t.live_entries()[0].partition, 0), "x"))
    os.symlink(outside, os.path.join(os.path.dirname(partition), "bucket-7"), target_is_directory=True)
    os.symlink(kept[1], os.path.join(t.paths.manifest_dir, "manifest-linked"))
    two_days_ago = time.time() - 2 * 86400
    for path in kept:
        os.utime(path, (two_days_ago, two_days_ago))
    assert t.remove_orphan_files().files == 0
    assert all(path.read_bytes() == b"precious" for path in kept)
    assert rows(t.read())


def test_temporary_files_a_killed_process_left_next_to_metadata_are_orphans(catalog):
    t = pk_orders_table(catalog)
    history(t, 2)
    t.set_options({"snapshot.num-retained.min": "3"})
    t.create_tag("x")
    consumers.record(t, "job", 2)
    left = [
        os.path.join(t.paths.schema_dir, ".schema-2.0f3a.tmp"),
        os.path.join(t.paths.tag_dir, ".tag-y.9c1d.tmp"),
        os.path.join(consumers.consumer_dir(t), ".consumer-job.77aa.tmp"),
    ]
    metadata = [*left, t.paths.schema(1), os.path.join(t.paths.tag_dir, "tag-x")]
    for path in left:
        Path(path).write_bytes(b"half")
    two_days_ago = time.time() - 2 * 86400
    for path in [*metadata, os.path.join(consumers.consumer_dir(t), "consumer-job")]:
        os.utime(path, (two_days_ago, two_days_ago))
    assert t.remove_orphan_files().paths == tuple(sorted(left))
    assert not any(os.path.exists(p) for p in left)
    assert t.refresh().schema.id == 1 and t.tags() == {"x": 2} and consumers.consumers(t) == {"job": 2}
    assert_clean(t)
