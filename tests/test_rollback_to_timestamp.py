"""rollback_to_timestamp: back to the newest snapshot committed at or before a time."""

from __future__ import annotations

import time

import pytest

from lakehouse.errors import ArgumentTypeError, SnapshotNotFoundError

from .conftest import orders, pk_orders_table, rows


def history(t, n: int) -> dict[int, list]:
    """``n`` writes a few milliseconds apart; snapshot id -> rows it reads."""
    seen = {}
    for i in range(n):
        t.write(orders(range(i, i + 3), price=float(i)))
        seen[t.latest_snapshot_id()] = rows(t.read())
        time.sleep(0.005)
    return seen


def test_rollback_to_timestamp_takes_the_newest_snapshot_at_or_before_it(catalog):
    t = pk_orders_table(catalog)
    seen = history(t, 4)
    times = {sid: t.snapshots.snapshot(sid).time_millis for sid in seen}
    assert t.rollback_to_timestamp(times[4] + 1000).snapshots_removed == 0  # the latest: nothing to do
    result = t.rollback_to_timestamp(times[3] - 1)
    assert (result.snapshot_id, result.snapshots_removed) == (2, 2)
    assert t.latest_snapshot_id() == 2 and rows(t.read()) == seen[2]
    assert t.rollback_to_timestamp(times[1]).snapshot_id == 1
    assert rows(t.read()) == seen[1]


def test_rollback_to_a_time_before_every_snapshot_is_refused(catalog):
    t = pk_orders_table(catalog)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot at all"):
        t.rollback_to_timestamp(0)
    history(t, 2)
    first = t.snapshots.snapshot(1).time_millis
    with pytest.raises(SnapshotNotFoundError, match="earliest snapshot 1"):
        t.rollback_to_timestamp(first - 1)
    with pytest.raises(ArgumentTypeError, match="epoch milliseconds"):
        t.rollback_to_timestamp(str(first))
    assert t.latest_snapshot_id() == 2
