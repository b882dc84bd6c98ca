"""Partition expiration and manifest compaction leave tables pypaimon reads as we do, and work on
tables pypaimon wrote."""

from __future__ import annotations

import pytest

from lakehouse import Catalog

from ..conftest import ORDERS, orders, rows
from . import oracle

pytestmark = pytest.mark.interop

DAYS = ["2000-01-01", "2000-01-02", "2999-01-01", "2999-01-02"]


def pypaimon_read(warehouse: str, options: dict | None = None) -> list:
    table = oracle.catalog(warehouse).get_table("db.t").copy(options or {})
    builder = table.new_read_builder()
    return rows(builder.new_read().to_arrow(builder.new_scan().plan().splits()))


def commits(write) -> None:
    write(orders(range(40), dt=DAYS * 10, price=1.0))
    write(orders(range(0, 40, 3), dt=[DAYS[i % 4] for i in range(0, 40, 3)], price=2.0))


@pytest.mark.parametrize(
    "options", [{"bucket": "2"}, {"bucket": "2", "deletion-vectors.enabled": "true"}, {}]
)
def test_pypaimon_reads_our_table_after_partition_expiration_and_manifest_compaction(
    catalog, warehouse, options
):
    keys = ["order_id", "dt"] if options else []
    t = catalog.create_table("db.t", ORDERS, primary_keys=keys, partition_keys=["dt"], options=options)
    commits(t.write)
    if keys:
        t.compact(full=True)
    before = t.latest_snapshot_id()
    done = t.expire_partitions(expiration_time="7 d")
    assert [p["dt"] for p in done.partitions] == DAYS[:2]
    ours = rows(t.read())
    assert {r["dt"] for r in ours} == set(DAYS[2:])
    assert pypaimon_read(warehouse) == ours
    assert pypaimon_read(warehouse, {"scan.snapshot-id": str(before)}) == rows(t.read(snapshot_id=before))
    assert t.compact_manifest().manifests_after == 1
    assert pypaimon_read(warehouse) == ours == rows(t.read())


def test_we_expire_partitions_of_a_pypaimon_table(warehouse):
    oracle.create(warehouse, "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                  options={"bucket": "1", "partition.timestamp-formatter": "yyyy-MM-dd"})  # fmt: skip
    commits(lambda d: oracle.write(warehouse, "db.t", d))
    t = Catalog(warehouse).get_table("db.t")
    assert t.expire_partitions(expiration_time="7 d", max_expires=1).partitions == ({"dt": DAYS[0]},)
    assert t.compact_manifest().snapshot_id is not None
    assert {r["dt"] for r in pypaimon_read(warehouse)} == set(DAYS[1:])
    assert pypaimon_read(warehouse) == rows(t.read())
