"""Branches shared with pypaimon: it reads the branches we create and write, and we read the ones
it creates and writes (``catalog.create_branch``, ``db.t$branch_<b>``)."""

from __future__ import annotations

import pytest

from lakehouse import Catalog

from ..conftest import ORDERS, orders, pk_orders_table, rows
from . import oracle

pytestmark = pytest.mark.interop

FUTURE = 2**62


def test_pypaimon_reads_a_branch_we_created_and_wrote(catalog, warehouse):
    t = pk_orders_table(catalog)
    for i in range(3):
        t.write(orders(range(i * 3, i * 3 + 5), price=float(i)))
    t.create_tag("two", snapshot_id=2)
    t.create_branch("b", tag="two")
    t.create_branch("s", snapshot_id=3)
    b = t.on_branch("b")
    b.write(orders(range(40, 45), price=9.0))
    b.compact(full=True)
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert rows(oracle.read(warehouse, "db.t$branch_b")) == rows(b.read())
    assert rows(oracle.read(warehouse, "db.t$branch_s")) == rows(t.on_branch("s").read())
    assert rows(oracle.read(warehouse, "db.t")) == rows(t.read())
    assert sorted(oracle.catalog(warehouse).list_branches("db.t")) == ["b", "s"]
    theirs = oracle.read(warehouse, "db.t$branches").sort_by("branch_name")
    assert theirs.column("branch_name").to_pylist() == ["b", "s"]
    ours = catalog.get_table("db.t$branches").read()
    assert ours.column("create_time").to_pylist() == theirs.column("create_time").to_pylist()


def test_we_read_a_branch_pypaimon_created_and_wrote(warehouse):
    oracle.create(warehouse, "db.t", ORDERS, primary_keys=["order_id", "dt"], options={"bucket": "2"})
    for i in range(3):
        oracle.write(warehouse, "db.t", orders(range(i, i + 4), price=float(i)))
    theirs = oracle.catalog(warehouse)
    theirs.create_tag("db.t", "mid", 2)
    theirs.create_branch("db.t", "pb", "mid")
    theirs.create_branch("db.t", "empty")
    oracle.write(warehouse, "db.t$branch_pb", orders(range(20, 23), price=5.0))
    oracle.write(warehouse, "db.t$branch_empty", orders(range(30, 32), price=6.0))
    t = Catalog(warehouse).get_table("db.t")
    assert t.branches() == ["empty", "pb"]
    for name in ("pb", "empty"):
        ours = Catalog(warehouse).get_table(f"db.t$branch_{name}")
        assert rows(ours.read()) == rows(oracle.read(warehouse, f"db.t$branch_{name}")), name
    assert rows(t.on_branch("pb").read(tag="mid")) == rows(t.read(tag="mid"))
    t.fast_forward("pb")
    assert rows(t.read()) == rows(t.on_branch("pb").read()) == rows(oracle.read(warehouse, "db.t"))
