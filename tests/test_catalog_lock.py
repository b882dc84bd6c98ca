"""The catalog lock on a database server: its URLs, per-table locks, timeouts, a dead holder, an
unreachable server; on PostgreSQL, and on MariaDB in ``make e2e`` (each lock database also runs
the cross-process test of ``test_object_store.py``)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from lakehouse.errors import CommitConflictError, InvalidOptionError, MissingExtraError
from lakehouse.io.fs import FileIO
from lakehouse.io.lock import CatalogLock, LockKind, Server


def lock(uri: str, **options: str) -> CatalogLock:
    return CatalogLock.from_options({"lock.enabled": "true", "lock.uri": uri, **options})


def test_server_urls_in_their_jdbc_and_plain_forms():
    jdbc = lock("jdbc:postgresql://db.internal:6543/meta?user=paimon&password=s3cret")
    assert jdbc.kind is LockKind.POSTGRES
    assert jdbc.server == Server("db.internal", 6543, "meta", "paimon", "s3cret")
    assert "s3cret" not in jdbc.uri
    plain = lock("postgres://paimon:s3cret@db.internal/meta", **{"lock.password": "other"})
    assert plain.server == Server("db.internal", 5432, "meta", "paimon", "other")
    assert "s3cret" not in plain.uri
    mysql = lock("mysql://db.internal/meta", **{"lock.user": "u", "lock.password": "p"})
    assert mysql.kind is LockKind.MYSQL and mysql.server == Server("db.internal", 3306, "meta", "u", "p")
    assert lock("sqlite:///var/lock.sqlite").path == "/var/lock.sqlite"
    assert CatalogLock.from_options({"lock.uri": "mysql://h/db"}) is None  # not enabled


@pytest.mark.parametrize(
    "uri", ["redis://h/0", "postgresql://u:s3cret@h", "jdbc:mysql://h:3306", "sqlite://", "lock.sqlite"]
)
def test_bad_lock_urls_are_typed_errors_that_hide_the_password(uri):
    with pytest.raises(InvalidOptionError, match="lock.uri") as error:
        lock(uri)
    assert "s3cret" not in str(error.value)


def test_a_missing_driver_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with (
        pytest.raises(MissingExtraError, match=r"lakehouse\[postgres\]"),
        lock("postgresql://h/db").hold("t"),
    ):
        pass


@pytest.mark.parametrize(
    "scheme",
    [pytest.param("postgresql", marks=pytest.mark.postgres), pytest.param("mysql", marks=pytest.mark.mysql)],
)
def test_an_unreachable_lock_server_fails_the_commit_and_writes_nothing(tmp_path, scheme):
    with socket.socket() as bound:  # bound but not listening: connections to its port are refused
        bound.bind(("127.0.0.1", 0))
        unreachable = lock(f"{scheme}://u:s3cret@127.0.0.1:{bound.getsockname()[1]}/db")
        io = FileIO(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), lock=unreachable)
        with pytest.raises(CommitConflictError, match="could not reach the catalog lock") as error:
            io.try_create("t/snapshot/snapshot-1", b"{}")
    assert "s3cret" not in str(error.value)
    assert not (tmp_path / "t" / "snapshot" / "snapshot-1").exists()


ORDERS = "db.db/orders/snapshot"  # the key of a table's commits: its snapshot directory


def test_each_key_is_its_own_lock_and_waits_end_after_the_timeout(lock_server):
    holder = lock(lock_server.uri)
    impatient = lock(lock_server.uri, **{"lock-acquire-timeout": "200 ms"})
    with holder.hold(ORDERS):
        with impatient.hold("db.db/users/snapshot"):  # another table: no wait
            pass
        with (
            pytest.raises(CommitConflictError, match="lock-acquire-timeout"),
            impatient.hold(ORDERS),
        ):
            pass
    with impatient.hold(ORDERS):  # released
        pass


HOLD_FOREVER = """
import sys, time
from lakehouse.io.lock import CatalogLock
lock = CatalogLock.from_options({"lock.enabled": "true", "lock.uri": sys.argv[1]})
with lock.hold(sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_holder_that_dies_releases_its_lock(lock_server):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_FOREVER, lock_server.uri, ORDERS], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        waiting = lock(lock_server.uri, **{"lock-acquire-timeout": "300 ms"})
        with pytest.raises(CommitConflictError), waiting.hold(ORDERS):
            pass
    finally:
        holder.kill()
        holder.wait()
    with lock(lock_server.uri, **{"lock-acquire-timeout": "30 s"}).hold(ORDERS):
        pass
