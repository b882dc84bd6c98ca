"""Filters against a brute-force model: planning may prune files, never matching rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog, col
from lakehouse.predicate import And, Leaf, Not, Or

from .conftest import ORDERS, rows

DTS = ["2024-01-01", "2024-01-02", "2024-01-03"]
STATUSES = ["PAID", "SHIPPED", "NEW", None]


def _batch(rng: random.Random, ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "dt": [rng.choice(DTS) for _ in ids],
            "user_id": pa.array([rng.choice([None, *range(0, 40)]) for _ in ids], pa.int32()),
            "price": [rng.choice([None, rng.uniform(0, 100)]) for _ in ids],
            "status": [rng.choice(STATUSES) for _ in ids],
        },
        schema=ORDERS,
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """An append and a primary-key table with several commits each, and their expected rows."""
    rng = random.Random(7)
    cat = Catalog(str(tmp_path_factory.mktemp("scan")))
    cat.create_database("db")
    append = cat.create_table("db.a", ORDERS, partition_keys=["dt"])
    pk = cat.create_table(
        "db.p",
        ORDERS.remove(1).append(pa.field("dt", pa.string(), False)),
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "3"},
    )
    expected_append, model = [], {}
    for start in range(0, 120, 30):
        batch = _batch(
            rng, list(range(start, start + 30)) + rng.sample(range(0, start + 1), min(10, start + 1))
        )
        append.write(batch)
        expected_append += batch.to_pylist()
        pk_batch = batch.select(pk.schema.field_names)
        # keys are (order_id, dt): drop duplicates inside the batch deterministically, last wins
        pk.write(pk_batch)
        for r in pk_batch.to_pylist():
            model[(r["order_id"], r["dt"])] = r
    return append, expected_append, pk, list(model.values())


def _value(column: str, draw_int: int):
    return {
        "order_id": draw_int % 130,
        "dt": DTS[draw_int % 3],
        "user_id": draw_int % 45,
        "price": float(draw_int % 110),
        "status": STATUSES[draw_int % 3],
    }[column]


@st.composite
def predicates(draw, depth=0):
    if depth < 2 and draw(st.booleans()):
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            return ~draw(predicates(depth=depth + 1))
        a, b = draw(predicates(depth=depth + 1)), draw(predicates(depth=depth + 1))
        return (a & b) if kind == "and" else (a | b)
    column = draw(st.sampled_from(ORDERS.names))
    c = col(column)
    n = draw(st.integers(0, 1000))
    v = _value(column, n)
    op = draw(
        st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge", "in", "null", "notnull", "between", "prefix"])
    )
    if op == "eq":
        return c == v
    if op == "ne":
        return c != v
    if op == "lt":
        return c < v
    if op == "le":
        return c <= v
    if op == "gt":
        return c > v
    if op == "ge":
        return c >= v
    if op == "in":
        return c.isin([v, _value(column, n + 1)])
    if op == "null":
        return c.is_null()
    if op == "notnull":
        return c.is_not_null()
    if op == "prefix" and column in ("dt", "status"):
        return c.startswith(v[:6])
    return c.between(v, _value(column, n + 17))


def evaluate(pred, row) -> bool | None:
    """SQL three-valued logic over one row."""
    if isinstance(pred, And):
        values = [evaluate(c, row) for c in pred.children]
        return False if False in values else (None if None in values else True)
    if isinstance(pred, Or):
        values = [evaluate(c, row) for c in pred.children]
        return True if True in values else (None if None in values else False)
    if isinstance(pred, Not):
        v = evaluate(pred.child, row)
        return None if v is None else not v
    assert isinstance(pred, Leaf)
    x = row[pred.column]
    if pred.op == "is_null":
        return x is None
    if pred.op == "is_not_null":
        return x is not None
    if x is None:
        return None
    lits = pred.literals
    return {
        "eq": lambda: x == lits[0],
        "ne": lambda: x != lits[0],
        "lt": lambda: x < lits[0],
        "le": lambda: x <= lits[0],
        "gt": lambda: x > lits[0],
        "ge": lambda: x >= lits[0],
        "in": lambda: x in lits,
        "starts_with": lambda: x.startswith(lits[0]),
    }[pred.op]()


def _check(table, expected, pred, key):
    want = sorted((r for r in expected if evaluate(pred, r) is True), key=lambda r: [r[k] for k in key])
    got = rows(table.read(filter=pred), key)
    assert got == [{k: r[k] for k in table.schema.field_names} for r in want]
    stats = table.plan(filter=pred).stats
    pruned = ("pruned_by_partition", "pruned_by_bucket", "pruned_by_stats", "pruned_by_index")
    assert stats["files_total"] == sum(stats[k] for k in pruned) + stats["files_selected"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pred=predicates())
def test_append_filters_match_the_model(tables, pred):
    append, expected, _, _ = tables
    _check(append, expected, pred, ["order_id", "dt", "user_id", "price", "status"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pred=predicates())
def test_primary_key_filters_match_the_model(tables, pred):
    _, _, pk, model = tables
    _check(pk, model, pred, ["order_id", "dt"])


def test_pruning_counts(tables):
    append, _, pk, _ = tables
    by_partition = append.plan(filter=col("dt") == "2024-01-02").stats
    assert by_partition["pruned_by_partition"] == 8 and by_partition["files_selected"] == 4
    none = append.plan(filter=col("order_id") > 10_000).stats
    assert none["files_selected"] == 0 and none["pruned_by_stats"] == none["files_total"]
    # primary-key tables prune on key stats only: a value filter never hides an old row version
    value_only = pk.plan(filter=col("price") > 1000).stats
    assert value_only["pruned_by_stats"] == 0
    key = pk.plan(filter=col("order_id") == 5).stats
    assert key["pruned_by_stats"] > 0


def test_a_filter_fixing_the_bucket_key_reads_only_its_buckets(catalog):
    """Equalities, IN lists and ORs of them on every bucket key select the buckets their values hash
    to, per bucket count a file was written with; other filters leave every bucket."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = catalog.create_table("db.buckets", schema, primary_keys=["k"], options={"bucket": "8"})
    t.write(pa.table({"k": range(200), "v": [str(i) for i in range(200)]}, schema=schema))
    written = {s.bucket: {r["k"] for r in rows(t.new_read().to_arrow([s]), ["k"])} for s in t.plan().splits}
    bucket_of = {k: b for b, keys in written.items() for k in keys}
    for pred, keys in [
        (col("k") == 7, {7}),
        (col("k").isin([3, 150, 3]), {3, 150}),
        ((col("k") == 1) | (col("k") == 2), {1, 2}),
        (col("k").isin([1, 2, 5]) & (col("k") == 5) & (col("v") == "5"), {5}),
    ]:
        plan = t.plan(filter=pred)
        assert {s.bucket for s in plan.splits} == {bucket_of[k] for k in keys}, pred
        assert plan.stats["pruned_by_bucket"] == 8 - len({bucket_of[k] for k in keys})
        assert sorted(r["k"] for r in rows(t.read(filter=pred), ["k"])) == sorted(keys)
    for pred in [col("k") > 5, (col("k") == 1) | (col("v") == "2"), col("v") == "3"]:
        assert t.plan(filter=pred).stats["pruned_by_bucket"] == 0
    assert t.plan(filter=col("k") == None).splits == []  # noqa: E711 - SQL: matches nothing


def test_manifests_outside_the_filtered_partitions_are_not_opened(catalog, monkeypatch):
    from lakehouse.manifest import files
    from lakehouse.manifest.files import ManifestStore

    t = catalog.create_table("db.parts", ORDERS, partition_keys=["dt"])
    for i, day in enumerate(DTS):
        t.write(pa.table({**{c: [None] for c in ORDERS.names}, "order_id": [i], "dt": [day]}, schema=ORDERS))
    t.write(
        pa.table({**{c: [None] for c in ORDERS.names}, "order_id": [9], "dt": [DTS[0]]}, schema=ORDERS),
        overwrite={"dt": DTS[0]},
    )
    files._CACHE.clear()
    opened = []
    original = ManifestStore.read_manifests
    monkeypatch.setattr(
        ManifestStore,
        "read_manifests",
        lambda self, names, *a: opened.extend(names) or original(self, names, *a),
    )
    plan = t.plan(filter=col("dt") == DTS[1])
    assert len(opened) == 1
    assert plan.stats == {
        "files_total": 3,
        "pruned_by_partition": 2,
        "pruned_by_bucket": 0,
        "pruned_by_stats": 0,
        "pruned_by_index": 0,
        "files_selected": 1,
    }
    assert [r["order_id"] for r in rows(t.read(filter=col("dt") == DTS[0]))] == [9]
