"""Warehouses on an S3-compatible store (moto on loopback): the table lifecycle, pypaimon reading
what we wrote there, and commits from several processes landing exactly once through conditional
puts; stores without conditional writes commit only under the catalog lock."""

from __future__ import annotations

import multiprocessing
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Barrier

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lakehouse import Catalog
from lakehouse.errors import InvalidOptionError, UnsafeCommitError
from lakehouse.io.fs import FileIO, storage_options
from lakehouse.io.lock import CatalogLock
from lakehouse.io.object_store import S3Settings

from .conftest import ORDERS, orders, pk_orders_table, rows
from .interop import oracle

WRITERS, COMMITS = 4, 6


def test_snapshot_files_are_created_once_under_a_race(s3_warehouse):
    uri, options = s3_warehouse
    io, root = FileIO.for_uri(uri, options)
    assert io.atomic_create
    path = f"{root}/t/snapshot/snapshot-1"
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: io.try_create(path, str(i).encode()), range(16)))
    assert won.count(True) == 1
    assert io.read_bytes(path) == str(won.index(True)).encode()


def test_the_file_io_travels_to_other_processes(s3_warehouse):
    uri, options = s3_warehouse
    io, root = FileIO.for_uri(uri, options)
    copy = pickle.loads(pickle.dumps(io))
    assert copy.try_create(f"{root}/x", b"1") and not io.try_create(f"{root}/x", b"2")


@pytest.mark.interop
def test_a_pk_table_lives_its_whole_life_on_s3(s3_warehouse):
    uri, options = s3_warehouse
    catalog = Catalog(uri, options=options)
    catalog.create_database("db")
    t = pk_orders_table(catalog)
    t.write(orders(range(100)))
    t.write(orders(range(50, 150), price=2.0))
    t.compact(full=True)
    expected = rows(pa.concat_tables([orders(range(50)), orders(range(50, 150), price=2.0)]))
    assert rows(t.read()) == expected
    expired = t.expire_snapshots(retain_min=1, retain_max=1)
    assert expired.snapshots_expired == 2 and expired.files_deleted > 0
    t.io.write_bytes(f"{t.paths.root}/dt=2024-01-01/bucket-0/data-orphan.parquet", b"junk")
    time.sleep(0.05)
    removed = t.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 1)
    assert [p.rsplit("/", 1)[1] for p in removed.paths] == ["data-orphan.parquet"]
    reopened = Catalog(uri, options=options).get_table("db.t")
    assert rows(reopened.read()) == expected
    assert rows(oracle.read(uri, "db.t", options)) == expected


def _commit_many(uri: str, options: dict, writer: int, start: Barrier) -> None:
    table = Catalog(uri, options=options).get_table("db.t")
    start.wait(timeout=120)  # every writer's first commit at once: they race from the start
    for i in range(COMMITS):
        table.write(orders([writer * 1000 + i]))


def test_concurrent_commits_from_processes_land_exactly_once(s3_warehouse):
    uri, s3 = s3_warehouse
    catalog = Catalog(uri, options=s3)
    catalog.create_database("db")
    # 4 writers committing back to back from one moment: one may lose the race many times in a row
    options = {"commit.min-retry-wait": "1 ms", "commit.max-retry-wait": "20 ms", "commit.max-retries": "100"}
    catalog.create_table("db.t", ORDERS, options=options)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(WRITERS)
    writers = [spawn.Process(target=_commit_many, args=(uri, s3, w, start)) for w in range(WRITERS)]
    for process in writers:
        process.start()
    try:
        for process in writers:
            process.join(300)
    finally:
        for process in writers:
            if process.is_alive():  # hung: it must not outlive the test (and hold up pytest's exit)
                process.kill()
    assert [process.exitcode for process in writers] == [0] * WRITERS
    t = catalog.get_table("db.t")
    assert t.snapshots.snapshot_ids() == list(range(1, WRITERS * COMMITS + 1))
    assert sorted(r["order_id"] for r in rows(t.read())) == [
        w * 1000 + i for w in range(WRITERS) for i in range(COMMITS)
    ]


def test_settings_come_from_options_then_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    from_env = S3Settings.parse({})
    assert (from_env.access_key, from_env.region, from_env.endpoint, from_env.path_style) == (
        "env-key",
        "eu-west-1",
        None,
        False,
    )
    given = S3Settings.parse({"fs.s3.endpoint": "minio:9000", "s3.access-key": "k", "s3.secret-key": "s"})
    assert (given.endpoint, given.access_key, given.path_style) == ("https://minio:9000", "k", True)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(InvalidOptionError, match="s3.secret-key"):
        S3Settings.parse({})
    assert storage_options({"s3.endpoint": "e", "lock.enabled": "true", "scan.snapshot-id": "1"}) == {
        "s3.endpoint": "e",
        "lock.enabled": "true",
    }


def _generic_store(tmp_path, options=None) -> tuple[FileIO, str]:
    """A store reached through a generic ``pyarrow.fs`` filesystem (no atomic create)."""
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    return FileIO(fs, lock=CatalogLock.from_options(options or {})), "t"


def test_a_store_without_atomic_creates_refuses_commits_without_a_lock(tmp_path):
    io, root = _generic_store(tmp_path)
    assert not io.atomic_create
    with pytest.raises(UnsafeCommitError, match="lock.enabled=true"):
        io.try_create(f"{root}/snapshot-1", b"1")
    assert not (tmp_path / "t" / "snapshot-1").exists()


def test_conditional_writes_switched_off_need_the_lock(s3_warehouse):
    uri, options = s3_warehouse
    catalog = Catalog(uri, options={**options, "s3.conditional-writes": "false"})
    catalog.create_database("db")
    with pytest.raises(UnsafeCommitError):
        catalog.create_table("db.t", ORDERS)
    assert not catalog.table_exists("db.t")


def _create_locked(args: tuple[str, str, int]) -> list[bool]:
    root, lock_uri, writer = args
    fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
    io = FileIO(fs, lock=CatalogLock.from_options({"lock.enabled": "true", "lock.uri": lock_uri}))
    return [io.try_create(f"snapshot-{i}", str(writer).encode()) for i in range(30)]


def test_the_catalog_lock_makes_creates_exclusive_across_processes(tmp_path, lock_uri):
    (tmp_path / "store").mkdir()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_create_locked, [(str(tmp_path / "store"), lock_uri, w) for w in range(4)])
    for i in range(30):
        winners = [w for w in range(4) if results[w][i]]
        assert len(winners) == 1
        assert (tmp_path / "store" / f"snapshot-{i}").read_bytes() == str(winners[0]).encode()


def test_a_locked_s3_catalog_commits(s3_warehouse, lock_uri):
    uri, options = s3_warehouse
    locked = {**options, "s3.conditional-writes": "false", "lock.enabled": "true", "lock.uri": lock_uri}
    catalog = Catalog(uri, options=locked)
    catalog.create_database("db")
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders(range(3)))
    assert rows(Catalog(uri, options=options).get_table("db.t").read()) == rows(orders(range(3)))


def test_resolved_settings_travel_as_options(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    resolved = storage_options({"lock.enabled": "false"}, "s3://bucket/wh")
    assert S3Settings.parse(resolved) == S3Settings.parse({})
    assert resolved["s3.access-key"] == "env-key" and resolved["lock.enabled"] == "false"
    assert storage_options({}, "/local/warehouse") == {}


def test_bad_storage_options_are_typed_errors_and_create_nothing(tmp_path):
    for options in (
        {"lock.enabled": "true", "lock.uri": "redis://db/0"},
        {"lock.enabled": "maybe"},
        {"lock.enabled": "true", "lock-acquire-timeout": "soon"},
    ):
        with pytest.raises(InvalidOptionError, match="lock"):
            Catalog(str(tmp_path / "warehouse"), options=options)
    with pytest.raises(InvalidOptionError, match="s3.conditional-writes"):
        Catalog("s3://bucket/warehouse", options={"s3.conditional-writes": "sometimes"})
    assert not (tmp_path / "warehouse").exists()
