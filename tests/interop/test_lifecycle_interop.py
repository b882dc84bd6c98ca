"""Expiration, tags and rollback keep tables pypaimon reads identically; pypaimon's tags are
honoured by our expiration."""

from __future__ import annotations

import pytest

from lakehouse import Catalog

from ..conftest import ORDERS, orders, rows
from . import oracle

pytestmark = pytest.mark.interop

FUTURE = 2**62


def pypaimon_read(warehouse: str, options: dict) -> list:
    table = oracle.catalog(warehouse).get_table("db.t").copy(options)
    builder = table.new_read_builder()
    return rows(builder.new_read().to_arrow(builder.new_scan().plan().splits()))


@pytest.mark.parametrize("dv", ["false", "true"])
def test_pypaimon_reads_retained_snapshots_and_tags_after_expiration_and_rollback(warehouse, dv):
    cat = Catalog(warehouse)
    cat.create_database("db")
    options = {"bucket": "2", "deletion-vectors.enabled": dv}
    t = cat.create_table(
        "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=options
    )
    for i in range(8):
        t.write(orders(range(i * 5, i * 5 + 30), dt=["d1", "d2"] * 15, price=float(i)))
    seen = {sid: rows(t.read(snapshot_id=sid)) for sid in t.snapshots.snapshot_ids()}
    t.create_tag("early", snapshot_id=2)
    t.expire_snapshots(retain_min=3, older_than_ms=FUTURE)
    t.rollback_to(snapshot_id=t.latest_snapshot_id() - 1)
    for sid in t.snapshots.snapshot_ids():
        assert pypaimon_read(warehouse, {"scan.snapshot-id": str(sid)}) == seen[sid]
    assert pypaimon_read(warehouse, {"scan.tag-name": "early"}) == seen[2]
    assert rows(oracle.read(warehouse, "db.t")) == seen[t.latest_snapshot_id()]


def test_tags_created_by_pypaimon_protect_files_from_our_expiration(warehouse):
    oracle.create(warehouse, "db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "1"})
    for i in range(5):
        oracle.write(warehouse, "db.t", orders(range(i, i + 4), price=float(i)))
    oracle.catalog(warehouse).create_tag("db.t", "theirs", 2)
    t = Catalog(warehouse).get_table("db.t")
    before = rows(t.read(snapshot_id=2))
    assert t.tags() == {"theirs": 2}
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert t.snapshots.snapshot_ids() == [5]
    assert rows(t.read(tag="theirs")) == before
    assert pypaimon_read(warehouse, {"scan.tag-name": "theirs"}) == before
    t.delete_tag("theirs")
    assert t.remove_orphan_files(older_than_ms=t.snapshots.latest().time_millis, dry_run=True).files == 0
