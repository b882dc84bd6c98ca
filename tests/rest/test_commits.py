"""Commits through the REST catalog server from many processes, and a server killed mid-commit:
every row exactly once, no acknowledged commit lost."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakehouse import Catalog
from tests.rest.server_process import ServerProcess

WRITER = """
import sys
import pyarrow as pa
from lakehouse import Catalog

uri, token, first, count, acknowledged = sys.argv[1:6]
table = Catalog(uri, options={"token": token}).load_table("db.t")
with open(acknowledged, "a") as out:
    for i in range(int(first), int(first) + int(count)):
        table.write(pa.table({"id": pa.array([i], pa.int64())}))
        out.write(f"{i}\\n")
        out.flush()
"""


@pytest.fixture
def server(tmp_path):
    with ServerProcess(str(tmp_path / "warehouse"), tmp_path) as server:
        catalog = Catalog(server.uri, options={"token": server.admin})
        catalog.create_database("db")
        catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
        yield server


def writer(server: ServerProcess, first: int, count: int, acknowledged) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, server.uri, server.admin, str(first), str(count), str(acknowledged)]
    )


def ids(server: ServerProcess) -> list[int]:
    return Catalog(server.uri, options={"token": server.admin}).load_table("db.t").read()["id"].to_pylist()


def test_four_processes_of_fifty_commits_each_land_every_row_once(server, tmp_path):
    acknowledged = tmp_path / "acknowledged"
    writers = [writer(server, 1000 * w, 50, acknowledged) for w in range(4)]
    assert [w.wait(timeout=600) for w in writers] == [0] * 4
    expected = sorted(1000 * w + i for w in range(4) for i in range(50))
    assert sorted(ids(server)) == expected
    assert sorted(int(line) for line in acknowledged.read_text().split()) == expected
    table = Catalog(server.uri, options={"token": server.admin}).load_table("db.t")
    appends = [s for s in table.list_snapshots() if s.commit_kind == "APPEND"]
    assert len(appends) == 200


def test_a_server_killed_mid_commit_loses_no_acknowledged_commit(server, tmp_path):
    acknowledged = tmp_path / "acknowledged"
    process = writer(server, 0, 60, acknowledged)
    while not (acknowledged.exists() and acknowledged.read_text()):  # the table loaded, commits begun
        assert process.poll() is None
        time.sleep(0.1)
    rng = random.Random(7)
    for _ in range(4):
        time.sleep(rng.uniform(0.5, 2.0))
        server.kill()
        time.sleep(rng.uniform(0.0, 0.5))
        server.start()
    assert process.wait(timeout=600) == 0
    found = ids(server)
    assert len(found) == len(set(found)), "a commit landed twice"
    assert sorted(found) == list(range(60))
    assert sorted(int(line) for line in acknowledged.read_text().split()) == list(range(60))
