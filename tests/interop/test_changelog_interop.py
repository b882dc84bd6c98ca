"""Changelog files between us and pypaimon: pypaimon reads tables with our changelog files
identically and streams our changelog rows as we read them; we read the changelog files of
pypaimon's ``changelog-producer=input`` writes as pypaimon streams them."""

from __future__ import annotations

import contextlib
import signal

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.store import consumers

from ..test_changelog import KV, batch, kv_table, per_key, state
from . import oracle

pytestmark = pytest.mark.interop

CONSUMER = "interop"


@contextlib.contextmanager
def hang_guard(seconds: int):
    """Fail instead of waiting forever if pypaimon's stream never reaches the last snapshot."""

    def fail(*_):
        raise TimeoutError("pypaimon's changelog stream stopped before the last snapshot")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def pypaimon_changes(warehouse: str, t) -> dict[int, list[tuple]]:
    """Each key's changelog rows as pypaimon's streaming read returns them, from snapshot 1."""
    consumers.record(t, CONSUMER, 1)
    last = max(i for i in t.snapshots.snapshot_ids() if t.snapshots.snapshot(i).changelog_manifest_list)
    table = oracle.catalog(warehouse).get_table("db.t")
    builder = table.new_stream_read_builder().with_consumer_id(CONSUMER).with_include_row_kind(True)
    read = builder.new_read()
    parts = []
    with hang_guard(120):
        for plan in builder.new_streaming_scan().stream_sync():
            data = read.to_arrow(plan.splits())
            if data is not None:
                parts.append(data.select(["k", "v", "_row_kind"]))
            if plan.snapshot_id >= last:
                break
    return per_key(pa.concat_tables(parts))


HISTORY = [
    [(1, 10), (2, 20), (3, 30), (5, 50)],
    [(2, 21, "+U"), (3, 30, "-D"), (4, 40), (5, 50)],
    [(1, 10), (4, 41), (6, 60, "-D")],
]


@pytest.mark.parametrize(
    "producer,options",
    [
        ("input", {}),
        ("full-compaction", {}),
        ("lookup", {}),
        ("lookup", {"deletion-vectors.enabled": "true"}),
        ("lookup", {"changelog-producer.row-deduplicate": "true"}),
    ],
)
def test_pypaimon_reads_our_changelog_tables_and_streams_our_changelog(warehouse, producer, options):
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = kv_table(cat, producer, **options)
    for rows in HISTORY:
        t.write(batch(rows))
    ours = t.read_changes(0)
    assert ours.num_rows > 0
    data = oracle.read(warehouse, "db.t")
    assert dict(zip(*(data.column(c).to_pylist() for c in ("k", "v")), strict=True)) == state(t)
    assert pypaimon_changes(warehouse, t) == per_key(ours)


def test_we_read_the_changelog_pypaimon_writes(warehouse):
    oracle.create(
        warehouse, "db.t", KV, primary_keys=["k"], options={"bucket": "2", "changelog-producer": "input"}
    )
    oracle.write(warehouse, "db.t", pa.table({"k": [1, 2, 3], "v": [10, 20, 30]}, schema=KV))
    oracle.write(warehouse, "db.t", pa.table({"k": [2, 4], "v": [21, 40]}, schema=KV))
    t = Catalog(warehouse).get_table("db.t")
    assert [t.snapshots.snapshot(i).changelog_record_count for i in (1, 2)] == [3, 2]
    assert per_key(t.read_changes(0)) == pypaimon_changes(warehouse, t)
    assert per_key(t.read_changes(1)) == {2: [("+I", 21)], 4: [("+I", 40)]}
    t.write(batch([(1, 11, "+U"), (3, 30, "-D")]))  # and we add to their changelog
    assert per_key(t.read_changes(2)) == {1: [("+U", 11)], 3: [("-D", 30)]}
    assert per_key(t.read_changes(0)) == pypaimon_changes(warehouse, t)
