"""Commits under concurrency and failure: never a lost, duplicated or half-visible row."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lakehouse import Catalog
from lakehouse.commit.table_commit import TableCommit
from lakehouse.errors import CommitConflictError, InvalidArgumentError
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, SnapshotManager
from lakehouse.write.message import CommitMessage

from .conftest import ORDERS, orders, rows


def test_concurrent_committers_in_threads_lose_nothing(catalog):
    t = catalog.create_table("db.t", ORDERS, options={"commit.min-retry-wait": "1 ms"})

    def writer(w):
        ids = []
        for i in range(6):
            ids += [w * 100 + i]
            catalog.get_table("db.t").write(orders([w * 100 + i]))
        return ids

    with ThreadPoolExecutor(4) as pool:
        written = sorted(i for ids in pool.map(writer, range(4)) for i in ids)
    assert [r["order_id"] for r in rows(t.read())] == written
    assert t.snapshots.snapshot_ids() == list(range(1, 25))
    assert t.snapshots.latest().total_record_count == 24


def _process_writer(args):
    warehouse, w = args
    table = Catalog(warehouse).get_table("db.t")
    for i in range(5):
        table.write(orders([w * 100 + i]))


def test_concurrent_committers_in_processes_lose_nothing(catalog, warehouse):
    catalog.create_table("db.t", ORDERS, options={"commit.min-retry-wait": "1 ms"})
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        pool.map(_process_writer, [(warehouse, w) for w in range(3)])
    t = catalog.get_table("db.t")
    assert sorted(r["order_id"] for r in rows(t.read())) == sorted(
        w * 100 + i for w in range(3) for i in range(5)
    )
    assert t.latest_snapshot_id() == 15


def test_losing_the_race_retries_on_the_new_latest_and_cleans_up(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders([1], dt="a"))
    w = t.new_write()
    w.write(orders([2], dt="a"))
    messages = w.prepare_commit()
    committer = t.new_commit()
    # another writer commits while ours is being prepared
    t.write(orders([3], dt="b"))
    manifests_before = set(os.listdir(t.paths.manifest_dir))
    original = SnapshotManager.try_commit
    attempts = []

    def racing_try_commit(self, snapshot):
        attempts.append(snapshot.id)
        if len(attempts) == 1:
            SnapshotManager.try_commit = original
            catalog.get_table("db.t").write(orders([4], dt="c"))  # steals the id we are about to take
            SnapshotManager.try_commit = racing_try_commit
        return original(self, snapshot)

    SnapshotManager.try_commit = racing_try_commit
    try:
        sid = committer.commit(messages)
    finally:
        SnapshotManager.try_commit = original
    assert attempts == [3, 4] and sid == 4
    assert [r["order_id"] for r in rows(t.read())] == [1, 2, 3, 4]
    new_manifests = set(os.listdir(t.paths.manifest_dir)) - manifests_before
    snaps = [t.snapshots.snapshot(i) for i in (3, 4)]
    store = t.manifests()
    referenced = {n for s in snaps for n in (s.base_manifest_list, s.delta_manifest_list)}
    referenced |= {
        m.file_name
        for s in snaps
        for n in (s.base_manifest_list, s.delta_manifest_list)
        for m in store.read_list(n)
    }
    assert new_manifests <= referenced  # the losing attempt's files are gone


def test_deleting_a_file_someone_else_deleted_is_a_conflict(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1, 2]))
    (entry,) = t.live_entries()
    delete = CommitMessage(entry.partition, entry.bucket, entry.total_buckets, (), (entry.file,))
    first, second = t.new_commit(), t.new_commit()
    assert first.commit([delete]) == 2
    with pytest.raises(CommitConflictError, match=entry.file.file_name):
        second.commit([delete])
    assert t.latest_snapshot_id() == 2 and t.read().num_rows == 0


def test_a_crash_before_the_snapshot_leaves_the_table_as_it_was(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1]))
    before = set(os.listdir(t.paths.manifest_dir))

    def crash(self, snapshot):
        raise OSError("disk full")

    original = SnapshotManager.try_commit
    SnapshotManager.try_commit = crash
    try:
        with pytest.raises(OSError, match="disk full"):
            t.write(orders([2]))
    finally:
        SnapshotManager.try_commit = original
    assert t.latest_snapshot_id() == 1 and [r["order_id"] for r in rows(t.read())] == [1]
    assert set(os.listdir(t.paths.manifest_dir)) == before


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from lakehouse import Catalog
    from tests.conftest import orders
    table = Catalog(sys.argv[1]).get_table("db.t")
    i = 0
    while True:
        table.write(orders(range(i * 100, i * 100 + 100)))
        i += 1
    """
)


@pytest.mark.parametrize("delay", [0.4, 0.9, 1.3])
def test_a_writer_killed_at_any_moment_leaves_a_readable_table(catalog, warehouse, delay):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id"], options={"bucket": "2"})
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, warehouse], cwd=os.path.dirname(os.path.dirname(__file__))
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    table = Catalog(warehouse).get_table("db.t")
    latest = table.latest_snapshot_id() or 0
    # every few writes also compact (COMPACT snapshots): the kill may hit one mid-way
    kinds = [table.snapshots.snapshot(i).commit_kind for i in range(1, latest + 1)]
    n = kinds.count(CommitKind.APPEND)
    got = [r["order_id"] for r in rows(table.read())]
    assert got == list(range(n * 100))  # exactly the committed writes, each whole
    t.write(orders([10**6]))  # and writers carry on
    assert table.read().num_rows == n * 100 + 1


def test_committing_the_same_messages_again_is_a_no_op(catalog):
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "2"})
    writer = t.new_write()
    writer.write(orders(range(10)))
    messages = writer.prepare_commit()
    first = t.new_commit().commit(messages)
    t.write(orders([20]))  # someone else commits in between
    latest = t.latest_snapshot_id()
    for committer in (t.new_commit(), t.new_commit(commit_user="another-user")):
        assert committer.commit(messages) is None
    assert t.latest_snapshot_id() == latest and first is not None
    assert [r["order_id"] for r in rows(t.read())] == [*range(10), 20]
    half = [m for m in messages if m.new_files][:1] + [
        CommitMessage(m.partition, m.bucket, m.total_buckets, (), table_id=m.table_id, base_snapshot=0)
        for m in messages
    ]
    other = t.new_write()
    other.write(orders([30]))
    mixed = [*half, *other.prepare_commit()]  # some files committed, some not: refused
    with pytest.raises(CommitConflictError, match="were committed already"):
        t.new_commit().commit(mixed)
    assert t.latest_snapshot_id() == latest


def test_a_commit_identifier_lands_once_per_commit_user(catalog):
    """Paimon's filterCommitted: a commit user's newest snapshot covers every identifier up to its
    own, so a restarted stream's replayed batch does not land again; other users and batch commits
    are not filtered."""
    t = catalog.create_table("db.t", ORDERS)

    def written(ids):
        writer = t.new_write()
        writer.write(orders(ids))
        return writer.prepare_commit()

    assert t.new_commit(commit_user="query").commit(written([1]), identifier=0) == 1
    t.write(orders([2]))  # a batch commit of another user in between
    assert t.new_commit(commit_user="query").commit(written([3]), identifier=1) == 3
    again = t.new_commit(commit_user="query")
    assert [again.committed(i) for i in (0, 1, 2)] == [True, True, False]
    assert again.commit(written([4]), identifier=1) is None  # a replay: nothing lands
    assert (
        t.new_commit(commit_user="other").commit(written([5]), identifier=0) == 4
    )  # another query's batch 0
    assert again.commit(written([6]), identifier=2) == 5
    assert t.new_commit(commit_user="query").commit(written([7]), identifier=BATCH_COMMIT_IDENTIFIER) == 6
    assert [r["order_id"] for r in rows(t.read())] == [1, 2, 3, 5, 6, 7]
    assert [(s.commit_user, s.commit_identifier) for s in map(t.snapshot, range(1, 6))] == [
        ("query", 0),
        (t.snapshot(2).commit_user, BATCH_COMMIT_IDENTIFIER),
        ("query", 1),
        ("other", 0),
        ("query", 2),
    ]


def test_messages_of_another_table_are_refused(catalog):
    t = catalog.create_table("db.t", ORDERS)
    u = catalog.create_table("db.u", ORDERS)
    t.write(orders([1]))
    writer = u.new_write()
    writer.write(orders([2]))
    messages = writer.prepare_commit()
    files = sorted(os.listdir(t.paths.root))
    with pytest.raises(InvalidArgumentError, match=r"commit to table db\.t .*written for another table \(u@"):
        t.new_commit().commit(messages)
    assert t.latest_snapshot_id() == 1 and sorted(os.listdir(t.paths.root)) == files
    catalog.drop_table("db.u")  # a table re-created under the same name is another table
    time.sleep(0.002)  # identities tell tables apart by their first schema's time, in millis
    again = catalog.create_table("db.u", ORDERS)
    assert again.identity != u.identity
    with pytest.raises(InvalidArgumentError, match="written for another table"):
        again.new_commit().commit(messages)
    assert again.latest_snapshot_id() is None


def test_a_commit_identifier_lands_once_per_commit_user_with_its_properties(catalog, warehouse, monkeypatch):
    """``write(identifier=...)``: a user's identifier commits once - a replay writes nothing, and
    a writer that loses the identifier to another while writing deletes its files; ``properties``
    are the snapshot's, and commit a snapshot even without rows."""
    t = catalog.create_table("db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "1"})
    assert t.write(orders([1]), commit_user="u", identifier=1, properties={"pos": "7"}) == 1
    assert t.write(orders([2]), commit_user="u", identifier=1) is None
    assert [r["order_id"] for r in rows(t.read())] == [1] and t.snapshot().properties == {"pos": "7"}
    t.write(orders([3]), commit_user="u", identifier=2)
    before = data_files(warehouse)
    truth, stale = TableCommit.committed, [True]

    def late(self, identifier):  # the first check ran before the other writer committed
        return False if stale and stale.pop() else truth(self, identifier)

    monkeypatch.setattr(TableCommit, "committed", late)
    assert t.write(orders([4]), commit_user="u", identifier=2) is None
    monkeypatch.undo()
    assert [r["order_id"] for r in rows(t.read())] == [1, 3] and data_files(warehouse) == before
    assert (
        t.write(orders([]), commit_user="u", identifier=3, properties={"pos": "9"}) == t.latest_snapshot_id()
    )
    assert (t.snapshot().commit_kind, t.snapshot().properties) == (CommitKind.APPEND, {"pos": "9"})


def data_files(warehouse: str) -> list[str]:
    return sorted(f for _, _, files in os.walk(warehouse) for f in files if f.startswith("data-"))
