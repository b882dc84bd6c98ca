"""Two-phase writes across processes: writers anywhere, one committer, one snapshot."""

from __future__ import annotations

import multiprocessing
import pickle

from lakehouse import col

from .conftest import ORDERS, orders, rows


def _write_part(args):
    table, ids = args  # the Table handle travels by pickle, as to a Spark executor
    writer = table.new_write()
    writer.write(orders(ids, dt=["2024-01-01", "2024-01-02"] * (len(ids) // 2)))
    return pickle.dumps(writer.prepare_commit())


def test_writers_in_other_processes_and_one_commit(catalog):
    t = catalog.create_table(
        "db.t", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "4"}
    )
    parts = [list(range(i, i + 10)) for i in range(0, 40, 10)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        messages = [
            m for blob in pool.map(_write_part, [(t, ids) for ids in parts]) for m in pickle.loads(blob)
        ]
    assert t.latest_snapshot_id() is None  # nothing is visible before the commit
    assert t.new_commit().commit(messages) == 1
    assert [r["order_id"] for r in rows(t.read())] == list(range(40))


def test_plans_and_readers_are_picklable(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(6), dt=["a", "b", "c"] * 2))
    plan = t.plan(filter=col("dt") != "b")
    reader = t.new_read(columns=["order_id"], filter=col("order_id") > 0, schema_id=plan.schema_id)
    restored_reader, restored_splits = pickle.loads(pickle.dumps((reader, plan.splits)))
    got = sorted(
        v for s in restored_splits for v in restored_reader.read_split(s).column("order_id").to_pylist()
    )
    assert got == [2, 3, 5]
