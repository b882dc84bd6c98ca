"""Write scopes: every file of a write carries its id, so ending the write finds its files by
listing - after waiting for the writers that hold leases - and keeps nothing it did not commit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse.errors import WriteAbortedError
from lakehouse.write.scope import (
    ENDED,
    SCOPES_DIR,
    Lease,
    WriteScope,
    abort_write,
    committed_since,
    finish_write,
)

from .conftest import ORDERS, orders, rows

FAST = {"write.heartbeat-interval": "50 ms", "write.heartbeat-timeout": "1 s"}


def table_files(root: str) -> set[str]:
    """Every file under the table but its schema files."""
    found = {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}
    return {f for f in found if os.sep + "schema" + os.sep not in f}


def write_files(t, scope: WriteScope, token: str, data: pa.Table, lease: Lease | None = None):
    writer = t.new_write(names=scope.namer(token, lease))
    writer.write(data)
    return writer.prepare_commit()


@pytest.fixture
def busy(catalog):
    """A dynamic-bucket primary-key table with every kind of file a write makes: data,
    changelog, hash index, deletion vectors and file-index files next to the data."""
    return catalog.create_table(
        "db.t",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={
            "bucket": "-1",
            "changelog-producer": "input",
            "deletion-vectors.enabled": "true",
            "file-index.bloom-filter.columns": "user_id",
            "file-index.in-manifest-threshold": "1 b",
        },
    )


def test_every_file_of_a_write_carries_its_id_and_writer(busy):
    busy.write(orders(range(20)))
    before = table_files(busy.paths.root)
    scope = WriteScope()
    messages = write_files(busy, scope, "w7", orders(range(10, 30), price=2.0))
    busy.new_commit().commit(messages)
    metadata = (os.sep + "manifest" + os.sep, os.sep + "snapshot" + os.sep)
    new = [
        os.path.basename(f)
        for f in table_files(busy.paths.root) - before
        if not any(m in f for m in metadata)
    ]
    assert {n.split("-")[0] for n in new} == {"data", "changelog", "index"}
    assert any(n.endswith(".parquet.index") for n in new)  # a file index next to its data file
    assert all(f"{scope.write_id}-w7-" in n for n in new)


def test_abort_deletes_files_no_message_names(busy):
    busy.write(orders(range(20)))
    before = table_files(busy.paths.root)
    scope = WriteScope()
    write_files(busy, scope, "a", orders(range(10, 30), price=2.0))  # the messages are lost
    write_files(busy, scope, "b", orders(range(40, 50), price=3.0))
    assert table_files(busy.paths.root) != before
    busy.new_commit().abort([], scope)
    assert table_files(busy.paths.root) == before
    assert rows(busy.read()) == rows(orders(range(20)))


def test_an_abort_keeps_what_a_later_snapshot_references(busy):
    base = busy.latest_snapshot_id()
    scope = WriteScope()
    busy.new_commit().commit(write_files(busy, scope, "a", orders(range(10))))
    files = table_files(busy.paths.root)
    busy.new_commit().abort([], scope, committed_since(busy, base))  # an abort after the commit
    assert table_files(busy.paths.root) == files
    assert rows(busy.read()) == rows(orders(range(10)))


def test_a_write_whose_source_fails_leaves_the_table_as_it_was(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"], options={"target-file-size": "1 kb"})
    t.write(orders(range(5)))
    before = table_files(t.paths.root)

    def batches():
        yield from orders(range(100, 400)).to_batches(max_chunksize=50)
        raise RuntimeError("the source fails half way")

    reader = pa.RecordBatchReader.from_batches(ORDERS, batches())
    with pytest.raises(RuntimeError, match="half way"):
        t.write(reader)
    assert table_files(t.paths.root) == before


def test_abort_waits_for_a_writer_that_still_writes(catalog):
    t = catalog.create_table(
        "db.t",
        ORDERS,
        partition_keys=["dt"],
        options={"target-file-size": "1 kb", "write-buffer-size": "1 kb"},
    )
    scope = WriteScope.leased_from(FAST)
    started, outcome = threading.Event(), []

    def writer() -> None:
        lease = Lease(t, scope, "w1").acquire()
        w = t.new_write(names=scope.namer("w1", lease))
        try:
            for i in range(100_000):
                w.write(orders(range(i * 10, i * 10 + 10)))  # a new file every batch
                started.set()
        except WriteAbortedError as e:
            outcome.append(e)
            w.abort()
        finally:
            lease.release()

    thread = threading.Thread(target=writer)
    thread.start()
    assert started.wait(30)
    abort_write(t, scope)
    assert [type(e) for e in outcome] == [WriteAbortedError]  # it stopped before the abort listed
    thread.join()
    files = table_files(t.paths.root)
    assert [os.path.relpath(f, t.paths.root) for f in files] == [
        os.path.join(SCOPES_DIR, scope.write_id, ENDED)
    ]


CHILD = """
import sys
from lakehouse import Catalog
from lakehouse.write.scope import Lease, WriteScope
from tests.conftest import orders
warehouse, write_id = sys.argv[1:]
t = Catalog(warehouse).get_table("db.t")
scope = WriteScope(write_id, leased=True, heartbeat_ms=50, timeout_ms=1000)
lease = Lease(t, scope, "dead").acquire()
writer = t.new_write(names=scope.namer("dead", lease))
writer.write(orders(range(50)))
writer.prepare_commit()
print("written", flush=True)
sys.stdin.read()
"""


def test_a_killed_writer_is_waited_for_until_its_lease_is_stale(catalog, warehouse):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    scope = WriteScope(leased=True, heartbeat_ms=50, timeout_ms=1000)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, warehouse, scope.write_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout.readline().strip() == "written"
    child.kill()  # SIGKILL: no clean-up, its lease stays behind, never renewed again
    child.wait()
    assert any(scope.write_id in f for f in table_files(t.paths.root) if "bucket-" in f)
    abort_write(t, scope)
    leftovers = [os.path.relpath(f, t.paths.root) for f in table_files(t.paths.root)]
    assert leftovers == [os.path.join(SCOPES_DIR, scope.write_id, ENDED)]


@pytest.mark.parametrize("committed", [False, True], ids=["aborted", "committed"])
def test_ending_a_write_deletes_the_renewal_a_killed_writer_left_half_written(catalog, committed):
    """A lease is renewed by writing a hidden temporary file and moving it over the lease; a
    writer killed in between leaves the temporary file, which no listing of leases shows."""
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    before = table_files(t.paths.root)
    scope = WriteScope(leased=True, heartbeat_ms=10, timeout_ms=100)
    write_files(t, scope, "dead", orders(range(10)))
    directory = scope.directory(t.paths)
    t.io.write_bytes(os.path.join(directory, "dead"), b"7")
    Path(directory, f".dead.{uuid.uuid4().hex}.tmp").write_bytes(b"8")
    if committed:  # a commit without the dead writer's files
        finish_write(t, scope, set())
        assert table_files(t.paths.root) == before
    else:
        abort_write(t, scope)
        assert table_files(t.paths.root) == before | {os.path.join(directory, ENDED)}


def test_a_writer_starting_after_the_abort_stops_before_its_first_file(catalog):
    t = catalog.create_table("db.t", ORDERS)
    scope = WriteScope.leased_from(FAST)
    abort_write(t, scope)
    with pytest.raises(WriteAbortedError, match=f"write {scope.write_id} to table db.t has ended"):
        Lease(t, scope, "late").acquire()
    assert not os.path.exists(os.path.join(scope.directory(t.paths), "late"))


def test_files_a_writer_finishes_after_the_abort_are_orphans_at_once(catalog):
    """The window that remains: a writer that looked dead but was not finishes a file after the
    listing. Nothing reads it, and orphan cleanup deletes it whatever its age."""
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(5)))
    scope = WriteScope.leased_from(FAST)
    abort_write(t, scope)
    write_files(t, scope, "zombie", orders(range(100, 110)))  # no lease: it missed the marker
    late = {f for f in table_files(t.paths.root) if "zombie" in f}
    assert late and rows(t.read()) == rows(orders(range(5)))
    found = t.remove_orphan_files(dry_run=True)
    assert set(found.paths) == late
    t.remove_orphan_files()
    assert not {f for f in table_files(t.paths.root) if "zombie" in f}
    marker = os.path.join(scope.directory(t.paths), ENDED)
    assert os.path.exists(marker)  # kept for late writers, until older than the threshold
    old = time.time() - 2 * 86_400
    os.utime(marker, (old, old))
    t.remove_orphan_files()
    assert not os.path.exists(marker)
    assert rows(t.read()) == rows(orders(range(5)))


def test_after_a_commit_the_files_of_writers_not_committed_are_deleted(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    scope = WriteScope.leased_from(FAST)
    data = orders(range(30))
    attempts = {}
    for token in ("first", "second"):  # two attempts of one task, as speculation runs them
        lease = Lease(t, scope, token).acquire()
        attempts[token] = write_files(t, scope, token, data, lease)
        lease.finish()
    t.new_commit().commit(attempts["first"])
    finish_write(t, scope, {"first"})
    names = {os.path.basename(f) for f in table_files(t.paths.root)}
    assert not any("second" in n for n in names) and any("first" in n for n in names)
    assert not os.path.exists(scope.directory(t.paths))
    assert rows(t.read()) == rows(data)
