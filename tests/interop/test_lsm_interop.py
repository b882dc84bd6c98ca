"""pypaimon and our engine agree on merge engines and compacted LSM trees, both directions."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse import Catalog

from ..conftest import ORDERS, orders, rows
from . import oracle
from .test_pypaimon import same

pytestmark = pytest.mark.interop

METRICS = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        pa.field("total", pa.int64()),
        pa.field("top", pa.float64()),
        pa.field("last", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("any", pa.bool_()),
    ]
)
AGGREGATION = {
    "bucket": "2",
    "merge-engine": "aggregation",
    "fields.total.aggregate-function": "sum",
    "fields.top.aggregate-function": "max",
    "fields.tags.aggregate-function": "listagg",
    "fields.any.aggregate-function": "bool_or",
}
ENGINES = {
    "aggregation": AGGREGATION,
    "partial-update": {"bucket": "2", "merge-engine": "partial-update"},
    "first-row": {"bucket": "2", "merge-engine": "first-row"},
    "deduplicate": {"bucket": "2", "sequence.field": "total"},
}


def _metrics(i: int) -> pa.Table:
    keys = [k % 7 for k in range(i, i + 9)]
    return pa.table(
        {
            "k": pa.array(keys, pa.int32()),
            "total": pa.array([None if k % 4 == 0 else k * (i + 1) for k in range(9)], pa.int64()),
            "top": pa.array([float((k * 7 + i) % 11) for k in range(9)]),
            "last": pa.array([None if k % 3 == 0 else f"v{i}-{k}" for k in range(9)]),
            "tags": pa.array([f"t{i}" if k % 2 else None for k in range(9)]),
            "any": pa.array([None if k % 5 == 0 else (k + i) % 3 == 0 for k in range(9)]),
        },
        schema=METRICS,
    )


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_pypaimon_reads_our_merge_engines_before_and_after_compaction(catalog, warehouse, engine):
    t = catalog.create_table("db.m", METRICS, primary_keys=["k"], options=ENGINES[engine])
    for i in range(4):
        t.write(_metrics(i))
    same(t.read(), oracle.read(warehouse, "db.m"), "k")
    t.compact(full=True)
    same(t.read(), oracle.read(warehouse, "db.m"), "k")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_we_read_pypaimon_merge_engines(warehouse, engine):
    oracle.create(warehouse, "db.m", METRICS, primary_keys=["k"], options=ENGINES[engine])
    for i in range(4):
        oracle.write(warehouse, "db.m", _metrics(i))
    same(Catalog(warehouse).get_table("db.m").read(), oracle.read(warehouse, "db.m"), "k")


def test_pypaimon_reads_our_levels_after_universal_compactions(catalog, warehouse):
    t = catalog.create_table(
        "db.p", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"},
    )  # fmt: skip
    for i in range(9):
        t.write(orders(range(i * 7, i * 7 + 30), dt=["2024-01-01", "2024-01-02"] * 15, price=float(i)))
        if i == 4:
            gone = orders([0, 1, 2], dt=["2024-01-01", "2024-01-02", "2024-01-01"])
            t.write(gone.append_column("_row_kind", pa.array(["-D"] * 3)))
    levels = {e.file.level for e in t.live_entries()}
    assert len(levels) > 1  # several levels in play
    ours = t.read()
    same(ours, oracle.read(warehouse, "db.p"), ["order_id", "dt"])
    keys = {(r["order_id"], r["dt"]) for r in rows(ours)}
    assert not keys & {(0, "2024-01-01"), (1, "2024-01-02"), (2, "2024-01-01")}


DV_ENGINES = {name: {**options, "deletion-vectors.enabled": "true"} for name, options in ENGINES.items()}
del DV_ENGINES["first-row"]


@pytest.mark.parametrize("engine", sorted(DV_ENGINES))
def test_pypaimon_applies_our_deletion_vectors(catalog, warehouse, engine):
    t = catalog.create_table("db.m", METRICS, primary_keys=["k"], options=DV_ENGINES[engine])
    t.write(pa.concat_tables([_metrics(i) for i in range(0, 60, 9)]).set_column(
        0, "k", pa.array(range(63), pa.int32())
    ))  # fmt: skip
    for i in range(3):
        t.write(_metrics(i))  # updates keys 0..6: their older rows get deletion vectors
    assert any(e.index_file.row_count for e in t.index_entries())  # vectors pypaimon must apply
    same(t.read(), oracle.read(warehouse, "db.m"), "k")
    t.compact(full=True)
    same(t.read(), oracle.read(warehouse, "db.m"), "k")


def test_we_compact_what_pypaimon_wrote_to_a_deletion_vector_table(catalog, warehouse):
    options = {"bucket": "2", "deletion-vectors.enabled": "true"}
    oracle.create(warehouse, "db.o", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                  options=options)  # fmt: skip
    t = catalog.get_table("db.o")
    t.write(orders(range(100), price=1.0))
    oracle.write(warehouse, "db.o", orders(range(90, 110), price=2.0))  # level 0: invisible until compacted
    same(t.read(), oracle.read(warehouse, "db.o"), ["order_id", "dt"])
    assert t.read().num_rows == 100
    t.compact()
    ours = t.read()
    same(ours, oracle.read(warehouse, "db.o"), ["order_id", "dt"])
    assert [r["price"] for r in rows(ours)][85:95] == [1.0] * 5 + [2.0] * 5


def test_dynamic_buckets_both_ways(catalog, warehouse):
    """Each side finds the buckets the other gave its keys: updates never duplicate a key."""
    options = {"dynamic-bucket.target-row-num": "30"}
    oracle.create(warehouse, "db.d", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                  options=options)  # fmt: skip
    t = catalog.get_table("db.d")
    dts = ["2024-01-01", "2024-01-02"] * 40
    oracle.write(warehouse, "db.d", orders(range(80), dt=dts, price=1.0))
    t.write(orders(range(0, 120, 2), dt=dts[:60], price=2.0))  # updates and new keys
    same(t.read(), oracle.read(warehouse, "db.d"), ["order_id", "dt"])
    oracle.write(warehouse, "db.d", orders(range(1, 121, 3), dt=dts[:40], price=3.0))
    ours = t.read()
    same(ours, oracle.read(warehouse, "db.d"), ["order_id", "dt"])
    keys = [(r["order_id"], r["dt"]) for r in rows(ours, ["order_id", "dt"])]
    assert len(keys) == len(set(keys))
    assert len({e.bucket for e in t.live_entries()}) > 2


@pytest.mark.parametrize("dv", [False, True], ids=["merge-on-read", "deletion-vectors"])
def test_pypaimon_reads_our_cross_partition_upserts(catalog, warehouse, dv):
    """A table pypaimon created with a key lacking the partition key: keys we move between
    partitions are where we put them, once, for pypaimon too."""
    options = {"dynamic-bucket.target-row-num": "7", "deletion-vectors.enabled": str(dv).lower()}
    oracle.create(warehouse, "db.x", ORDERS, ["order_id"], ["dt"], options)
    t = catalog.get_table("db.x")
    t.write(orders(range(30), dt=["2024-01-01", "2024-01-02", "2024-01-03"] * 10))
    t.write(orders(range(0, 40, 4), dt="2024-01-02", price=2.0))  # moves, stays and new keys
    same(t.read(), oracle.read(warehouse, "db.x"), "order_id")
    t.compact(full=True)
    theirs = oracle.read(warehouse, "db.x")
    same(t.read(), theirs, "order_id")
    assert theirs.num_rows == 32  # 30 keys, 2 of them new in the second write
    assert {r["dt"] for r in rows(theirs) if r["price"] == 2.0} == {"2024-01-02"}
