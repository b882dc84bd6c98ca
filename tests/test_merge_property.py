"""Every merge engine against a brute-force model over random histories of upserts and deletes,
with write-buffer merges, universal and full compactions happening in between: however the LSM
tree staged the merging, a read equals folding each key's whole history in order. With deletion
vectors, where compaction looks keys up and reads never merge, too."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        pa.field("a", pa.int64()),
        pa.field("b", pa.int64()),
        pa.field("c", pa.int32()),
    ]
)
ENGINES = {
    "deduplicate": ({}, ["+I", "+U", "-D"]),
    "first-row": ({"merge-engine": "first-row", "ignore-delete": "true"}, ["+I", "-D"]),
    "partial-update": (
        {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
        ["+I", "+I", "-U", "-D"],
    ),
    "aggregation": (
        {
            "merge-engine": "aggregation",
            "fields.a.aggregate-function": "sum",
            "fields.b.aggregate-function": "count",
            "fields.c.aggregate-function": "max",
            "fields.c.ignore-retract": "true",
        },
        ["+I", "+I", "-U", "-D"],
    ),
}
# merge on write: the same engines with deletion vectors, read without merging
ENGINES.update(
    {
        f"{name}+dv": ({**options, "deletion-vectors.enabled": "true"}, kinds)
        for name, (options, kinds) in list(ENGINES.items())
        if name != "first-row"
    }
)
# compaction in the background (compaction.async): reads race it and must never tell
ENGINES.update(
    {
        f"{name}+async": ({**ENGINES[name][0], "compaction.async": "true"}, ENGINES[name][1])
        for name in ("deduplicate", "partial-update", "aggregation")
    }
)
_counter = itertools.count()


def fresh_table(tmp_path, schema: pa.Schema, options: dict):
    """A table keyed on ``k`` with two buckets, in a warehouse of its own (hypothesis runs every
    example in the same ``tmp_path``)."""
    catalog = Catalog(str(tmp_path / f"wh{next(_counter)}"))
    catalog.create_database("db")
    return catalog.create_table("db.t", schema, primary_keys=["k"], options={"bucket": "2", **options})


def model(engine: str, events: list[tuple]) -> dict[int, tuple]:
    """Fold every key's events (kind, a, b, c) in write order, the way the engine defines it."""
    out = {}
    by_key: dict[int, list] = {}
    for k, *event in events:
        by_key.setdefault(k, []).append(event)
    for k, history in by_key.items():
        if engine == "deduplicate":
            kind, *values = history[-1]
            if kind in ("+I", "+U"):
                out[k] = tuple(values)
        elif engine == "first-row":
            inserts = [e for e in history if e[0] == "+I"]
            if inserts:
                out[k] = tuple(inserts[0][1:])
        elif engine == "partial-update":
            row, exists = [None, None, None], False
            for kind, *values in history:
                if kind == "+I":
                    row = [v if v is not None else old for v, old in zip(values, row, strict=True)]
                    exists = True
                elif kind == "-D":
                    row, exists = [None, None, None], False
            if exists:
                out[k] = tuple(row)
        else:
            total = count = top = None
            for kind, a, b, c in history:
                sign = -1 if kind in ("-U", "-D") else 1
                if a is not None:
                    total = (total or 0) + sign * a
                if b is not None:
                    count = (count or 0) + sign
                if c is not None and sign == 1:
                    top = c if top is None else max(top, c)
            out[k] = (total, count, top)
    return out


value = st.one_of(st.none(), st.integers(-50, 50))
row = st.tuples(st.integers(0, 5), st.sampled_from(range(4)), value, value, value)
step = st.one_of(
    st.tuples(st.just("write"), st.lists(row, min_size=1, max_size=8)),
    st.tuples(st.just("compact"), st.booleans()),
)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=8), trigger=st.sampled_from(["2", "5"]))
def test_engine_matches_model(tmp_path, engine, steps, trigger):
    options, kinds = ENGINES[engine]
    t = fresh_table(tmp_path, SCHEMA, {"num-sorted-run.compaction-trigger": trigger, **options})
    events = []
    for kind, arg in steps:
        if kind == "compact":
            t.wait_compaction()  # a dedicated compaction and a background round may not both win
            t.compact(full=arg)
            continue
        batch = [(k, kinds[i % len(kinds)], a, b, c) for k, i, a, b, c in arg]
        data = pa.table(
            {
                "k": pa.array([r[0] for r in batch], pa.int32()),
                "a": pa.array([r[2] for r in batch], pa.int64()),
                "b": pa.array([r[3] for r in batch], pa.int64()),
                "c": pa.array([r[4] for r in batch], pa.int32()),
                "_row_kind": [r[1] for r in batch],
            }
        )
        t.write(data)
        events += [(k, kind_, a, b, c) for k, kind_, a, b, c in batch]
        rows = t.read().to_pylist()
        got = {r["k"]: (r["a"], r["b"], r["c"]) for r in rows}
        assert len(got) == len(rows), "a key is visible twice"
        assert got == model(engine.split("+")[0], events)
    t.wait_compaction()
    got = {r["k"]: (r["a"], r["b"], r["c"]) for r in t.read().to_pylist()}
    assert got == model(engine.split("+")[0], events)


# ---- partial update with sequence groups, one of which removes the row --------------------------

VALUES = ("a", "s1", "b", "s2", "c")
GROUPED = pa.schema([pa.field("k", pa.int32(), nullable=False), *[pa.field(c, pa.int64()) for c in VALUES]])
GROUPS = (("s1", ("a",)), ("s2", ("b",)))  # (sequence field, its columns); s1's -D removes the row


def grouped_model(events: list[tuple]) -> dict[int, tuple]:
    """Paimon's partial-update merge function, one version at a time: a -D retracts the groups it
    does not lose to, and removes the whole row through s1 (the row becomes the -D's values); the
    key is deleted if the last version removed it or no insert came."""
    out = {}
    by_key: dict[int, list] = {}
    for k, kind, *values in events:
        by_key.setdefault(k, []).append((kind, dict(zip(VALUES, values, strict=True))))
    for k, history in by_key.items():
        row, filled, inserted, removed = dict.fromkeys(VALUES), False, False, False
        for kind, v in history:
            removed = False
            if kind == "-D" and not filled:
                row, filled = dict(v), True
            for seq, fields in GROUPS:
                if v[seq] is None or (row[seq] is not None and v[seq] < row[seq]):
                    continue
                if kind == "-D" and seq == "s1":
                    row, removed = dict(v), True
                    break
                row[seq] = v[seq]
                for f in fields:
                    row[f] = v[f] if kind == "+I" else None
            if kind == "+I":
                if v["c"] is not None:
                    row["c"] = v["c"]
                inserted = filled = True
        if inserted and not removed:
            out[k] = tuple(row[f] for f in VALUES)
    return out


what = st.sampled_from(["+I", "+I", "remove", "retract"])
grouped_row = st.tuples(st.integers(0, 4), what, value, value, value, st.booleans(), st.booleans())
grouped_step = st.one_of(
    st.tuples(st.just("write"), st.lists(grouped_row, min_size=1, max_size=8)),
    st.tuples(st.just("compact"), st.booleans()),
)


@pytest.mark.parametrize("dv", [False, True])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(grouped_step, min_size=1, max_size=8), trigger=st.sampled_from(["2", "5"]))
def test_remove_record_on_sequence_group_matches_model(tmp_path, dv, steps, trigger):
    """Sequences rise with time (event times), as they do where rows are removed: a removal is
    followed by an insert carrying s1, a group is retracted only from a live row, and -D rows
    carry nothing that the compaction which drops a deleted key would have to remember."""
    t = fresh_table(
        tmp_path,
        GROUPED,
        {
            "num-sorted-run.compaction-trigger": trigger,
            "merge-engine": "partial-update",
            "fields.s1.sequence-group": "a",
            "fields.s2.sequence-group": "b",
            "partial-update.remove-record-on-sequence-group": "s1",
            "deletion-vectors.enabled": str(dv).lower(),
        },
    )
    events, clock, removed, live = [], itertools.count(1), set(), set()
    for kind, arg in steps:
        if kind == "compact":
            t.compact(full=arg)
            continue
        batch = []
        for k, what, a, b, c, has_s1, has_s2 in arg:
            tick = next(clock)
            if what == "+I" or k in removed or (what == "retract" and k not in live):
                s1 = tick if has_s1 or k in removed else None
                batch.append((k, "+I", a, s1, b, tick if has_s2 else None, c))
                removed.discard(k)
                live.add(k)
            elif what == "remove":
                batch.append((k, "-D", None, tick, None, None, None))
                removed.add(k)
                live.discard(k)
            else:
                batch.append((k, "-D", None, None, None, tick, None))
        columns = ["k", "_row_kind", *VALUES]
        data = pa.table({n: [r[i] for r in batch] for i, n in enumerate(columns)})
        kinds = GROUPED.append(pa.field("_row_kind", pa.string()))
        data = data.select(kinds.names).cast(kinds)
        t.write(data)
        events += batch
        got = {r["k"]: tuple(r[f] for f in VALUES) for r in t.read().to_pylist()}
        assert got == grouped_model(events)
