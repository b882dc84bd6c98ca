"""Merge engines through the table API: every example of the primary-key seed, plus the rules
of each engine (ignore-delete, remove-record-on-delete, retraction, sequence fields)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from lakehouse.errors import InvalidOptionError, SchemaMismatchError
from lakehouse.types import DataField


def _table(catalog, name, columns, options, key=("k",)):
    schema = pa.schema([pa.field(c, t, nullable=c not in key) for c, t in columns])
    return catalog.create_table(f"db.{name}", schema=schema, primary_keys=list(key), options=options)


def _insert(table, *rows, kinds=None):
    names = table.arrow_schema.names
    data = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=table.arrow_schema)
    if kinds is not None:
        data = data.append_column("_row_kind", pa.array(kinds))
    return table.write(data)


def _rows(table):
    data = table.read().sort_by([(k, "ascending") for k in table.primary_keys])
    return [tuple(r.values()) for r in data.to_pylist()]


INTS = pa.int32()


def test_seed_sequence_groups(catalog):
    cols = [(c, INTS) for c in ("k", "a", "b", "g_1", "c", "d", "g_2")]
    t = _table(
        catalog,
        "t",
        cols,
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.g_1.sequence-group": "a,b",
            "fields.g_2.sequence-group": "c,d",
        },
    )
    _insert(t, (1, 1, 1, 1, 1, 1, 1))
    _insert(t, (1, 2, 2, 2, 2, 2, None))
    assert _rows(t) == [(1, 2, 2, 2, 1, 1, 1)]
    _insert(t, (1, 3, 3, 1, 3, 3, 3))
    assert _rows(t) == [(1, 2, 2, 2, 3, 3, 3)]


def test_seed_multi_field_sequence_group(catalog):
    cols = [(c, INTS) for c in ("k", "a", "b", "g_1", "c", "d", "g_2", "g_3")]
    t = _table(
        catalog,
        "sg",
        cols,
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.g_1.sequence-group": "a,b",
            "fields.g_2,g_3.sequence-group": "c,d",
        },
    )
    _insert(t, (1, 1, 1, 1, 1, 1, 1, 1))
    _insert(t, (1, 2, 2, 2, 2, 2, 1, None))
    assert _rows(t) == [(1, 2, 2, 2, 1, 1, 1, 1)]
    _insert(t, (1, 3, 3, 1, 3, 3, 3, 1))
    assert _rows(t) == [(1, 2, 2, 2, 3, 3, 3, 1)]


def test_seed_aggregation_in_partial_update(catalog):
    t = _table(
        catalog,
        "pa",
        [(c, INTS) for c in ("k", "a", "b", "c", "d")],
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.a.sequence-group": "b",
            "fields.b.aggregate-function": "first_value",
            "fields.c.sequence-group": "d",
            "fields.d.aggregate-function": "sum",
        },
    )
    _insert(t, (1, 1, 1, None, None))
    _insert(t, (1, None, None, 1, 1))
    _insert(t, (1, 2, 2, None, None))
    _insert(t, (1, None, None, 2, 2))
    assert _rows(t) == [(1, 2, 1, 2, 3)]


def test_seed_aggregation_table(catalog):
    t = _table(
        catalog,
        "my_table",
        [("product_id", pa.int64()), ("price", pa.float64()), ("sales", pa.int64())],
        {
            "bucket": "1",
            "merge-engine": "aggregation",
            "fields.price.aggregate-function": "max",
            "fields.sales.aggregate-function": "sum",
        },
        key=("product_id",),
    )
    _insert(t, (1, 23.0, 15))
    _insert(t, (1, 30.2, 20))
    assert _rows(t) == [(1, 30.2, 35)]


def test_seed_partial_update_non_null(catalog):
    t = _table(
        catalog,
        "pu",
        [("k", INTS), ("price", pa.float64()), ("n", INTS), ("title", pa.string())],
        {"bucket": "1", "merge-engine": "partial-update"},
    )
    _insert(t, (1, 23.0, 10, None))
    _insert(t, (1, None, None, "This is a book"))
    _insert(t, (1, 25.2, None, None))
    assert _rows(t) == [(1, 25.2, 10, "This is a book")]
    # the same three versions inside one write are merged the same way
    _insert(t, (2, 23.0, 10, None), (2, None, None, "This is a book"), (2, 25.2, None, None))
    assert _rows(t)[1] == (2, 25.2, 10, "This is a book")


def test_partial_update_rejects_deletes_unless_configured(catalog):
    t = _table(catalog, "pu", [("k", INTS), ("v", INTS)], {"bucket": "1", "merge-engine": "partial-update"})
    _insert(t, (1, 1))
    with pytest.raises(SchemaMismatchError, match="ignore-delete"):
        _insert(t, (1, None), kinds=["-D"])
    assert t.latest_snapshot_id() == 1
    t.set_options({"ignore-delete": "true"})
    _insert(t, (1, None), kinds=["-D"])
    assert _rows(t) == [(1, 1)]


def test_partial_update_remove_record_on_delete(catalog):
    t = _table(
        catalog,
        "pu",
        [("k", INTS), ("a", INTS), ("b", INTS)],
        {"bucket": "1", "merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    )
    _insert(t, (1, 1, 1), (2, 2, 2))
    _insert(t, (1, None, None), kinds=["-D"])
    assert _rows(t) == [(2, 2, 2)]
    _insert(t, (1, None, 5))
    assert _rows(t) == [(1, None, 5), (2, 2, 2)]


def test_sequence_group_retract_nulls_the_group(catalog):
    t = _table(
        catalog,
        "sg",
        [(c, INTS) for c in ("k", "a", "g1", "b", "g2")],
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.g1.sequence-group": "a",
            "fields.g2.sequence-group": "b",
        },
    )
    _insert(t, (1, 10, 1, 20, 1))
    _insert(t, (1, 10, 2, None, None), kinds=["-U"])  # retract group 1 only
    assert _rows(t) == [(1, None, 2, 20, 1)]
    _insert(t, (1, 11, 1, None, None))  # older sequence than the retract: ignored
    assert _rows(t) == [(1, None, 2, 20, 1)]


@pytest.mark.parametrize("compact", [False, True])
def test_remove_record_on_sequence_group(catalog, compact):
    """A -D that does not lose to its removing group's sequence removes the row; what follows
    applies on top of the -D's values. A -D older than the group, or of another group, retracts."""
    t = _table(
        catalog,
        "sg",
        [(c, INTS) for c in ("k", "a", "g1", "b", "g2", "c")],
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.g1.sequence-group": "a",
            "fields.g2.sequence-group": "b",
            "partial-update.remove-record-on-sequence-group": "g1",
        },
    )

    def step(*rows, kinds):
        _insert(t, *rows, kinds=kinds)
        if compact:
            t.compact(full=True)
        return _rows(t)

    first = [(1, 1, 1, 1, 1, 7), (2, 2, 1, 2, 1, 8)]
    assert step(*first, kinds=["+I", "+I"]) == first
    assert step((1, None, 2, None, None, None), kinds=["-D"]) == [(2, 2, 1, 2, 1, 8)]
    # inserted again: nothing of the removed row comes back
    assert step((1, 4, 3, 5, 3, None), kinds=["+I"]) == [(1, 4, 3, 5, 3, None), (2, 2, 1, 2, 1, 8)]
    # older than group g1's sequence: no removal; group g2's -D retracts g2 only
    assert step((1, 9, 1, None, None, None), (2, None, None, None, 2, None), kinds=["-D", "-D"]) == [
        (1, 4, 3, 5, 3, None),
        (2, 2, 1, None, 2, 8),
    ]
    # removed and inserted again within one write: the row starts as the -D's values
    assert step((2, None, 5, None, None, 6), (2, 3, 6, None, None, None), kinds=["-D", "+I"]) == [
        (1, 4, 3, 5, 3, None),
        (2, 3, 6, None, None, 6),
    ]


def test_a_removal_through_one_group_resets_the_sequence_of_the_other(catalog):
    """Two removing groups: a removal makes the row the -D's values, sequences included, so a later
    -D of the other group removes the row again even though that group had seen a higher one."""
    t = _table(
        catalog,
        "sg2",
        [(c, INTS) for c in ("k", "a", "g1", "b", "g2")],
        {
            "bucket": "1",
            "merge-engine": "partial-update",
            "fields.g1.sequence-group": "a",
            "fields.g2.sequence-group": "b",
            "partial-update.remove-record-on-sequence-group": "g1,g2",
        },
    )
    one = [(1, 1, 5, 1, 5), (1, None, 6, None, 1), (1, None, None, 8, 3)]
    two = [(2, 1, 5, 1, 5), (2, None, 6, None, 1), (2, 4, 7, None, None)]
    _insert(t, *one, *two, kinds=["+I", "-D", "-D", "+I", "-D", "+I"])
    assert _rows(t) == [(2, 4, 7, None, 1)]


def test_aggregation_functions(catalog):
    cols = [
        ("k", INTS),
        ("s", pa.int64()),
        ("p", pa.float64()),
        ("cnt", pa.int64()),
        ("mx", pa.string()),
        ("mn", pa.date32()),
        ("lv", INTS),
        ("lnn", INTS),
        ("fv", INTS),
        ("fnn", INTS),
        ("la", pa.string()),
        ("band", pa.bool_()),
        ("bor", pa.bool_()),
        ("dec", pa.decimal128(10, 2)),
    ]
    funcs = {
        "s": "sum", "p": "product", "cnt": "count", "mx": "max", "mn": "min", "lv": "last_value",
        "lnn": "last_non_null_value", "fv": "first_value", "fnn": "first_non_null_value", "la": "listagg",
        "band": "bool_and", "bor": "bool_or", "dec": "sum",
    }  # fmt: skip
    options = {"bucket": "1", "merge-engine": "aggregation"}
    options.update({f"fields.{c}.aggregate-function": f for c, f in funcs.items()})
    options["fields.la.list-agg-delimiter"] = "|"
    t = _table(catalog, "agg", cols, options)
    import datetime as dt
    from decimal import Decimal

    d = dt.date
    _insert(t, (1, 5, 2.0, 7, "b", d(2024, 1, 2), 1, 1, None, None, "x", True, False, Decimal("1.10")))
    _insert(t, (1, None, 3.0, None, "c", d(2024, 1, 1), None, None, 3, 3, "", True, None, Decimal("2.25")))
    _insert(t, (1, 2, None, 9, "a", None, 4, None, 4, 4, "y", False, True, None))
    assert _rows(t) == [
        (1, 7, 6.0, 2, "c", d(2024, 1, 1), 4, 1, None, 3, "x|y", False, True, Decimal("3.35"))
    ]


def test_aggregation_retraction(catalog):
    t = _table(
        catalog,
        "agg",
        [("k", INTS), ("s", pa.int64()), ("c", pa.int64()), ("lv", INTS), ("mx", INTS)],
        {
            "bucket": "1",
            "merge-engine": "aggregation",
            "fields.s.aggregate-function": "sum",
            "fields.c.aggregate-function": "count",
            "fields.lv.aggregate-function": "last_non_null_value",
            "fields.mx.aggregate-function": "max",
        },
    )
    _insert(t, (1, 10, 1, 5, 3), (1, 5, 1, 6, 4))
    with pytest.raises(SchemaMismatchError, match="mx"):
        _insert(t, (1, 5, 1, None, 4), kinds=["-U"])
    t.set_options({"fields.mx.ignore-retract": "true"})
    _insert(t, (1, 5, 1, None, 4), kinds=["-U"])
    assert _rows(t) == [(1, 10, 1, 6, 4)]
    _insert(t, (1, 1, 1, 6, 1), kinds=["-D"])
    assert _rows(t)[0][:3] == (1, 9, 0)
    # a retract meeting its value in the same merge nulls last_non_null_value
    _insert(t, (2, 1, 1, 7, 1), (2, 1, 1, 7, 1), kinds=["+I", "-U"])
    assert _rows(t)[1] == (2, 0, 0, None, 1)


def test_aggregation_collections(catalog):
    row = pa.struct([("id", INTS), ("v", pa.string())])
    t = _table(
        catalog,
        "coll",
        [
            ("k", INTS),
            ("tags", pa.list_(pa.string())),
            ("m", pa.map_(pa.string(), INTS)),
            ("items", pa.list_(row)),
            ("bm", pa.binary()),
        ],
        {
            "bucket": "1",
            "merge-engine": "aggregation",
            "fields.tags.aggregate-function": "collect",
            "fields.tags.distinct": "true",
            "fields.m.aggregate-function": "merge_map",
            "fields.items.aggregate-function": "nested_update",
            "fields.items.nested-key": "id",
            "fields.bm.aggregate-function": "rbm32",
            "fields.bm.ignore-retract": "true",
        },
    )
    _insert(t, (1, ["a", "b"], [("x", 1)], [{"id": 1, "v": "one"}], BitMap([1, 2]).serialize()))
    _insert(t, (1, ["b", "c"], [("x", 2), ("y", 3)], [{"id": 1, "v": "uno"}, {"id": 2, "v": "two"}],
                BitMap([5]).serialize()))  # fmt: skip
    (got,) = t.read().to_pylist()
    assert got["tags"] == ["a", "b", "c"]
    assert dict(got["m"]) == {"x": 2, "y": 3}
    assert sorted(got["items"], key=lambda e: e["id"]) == [{"id": 1, "v": "uno"}, {"id": 2, "v": "two"}]
    assert BitMap.deserialize(got["bm"]) == BitMap([1, 2, 5])
    # retraction applies to what the same merge accumulated (Paimon: best effort)
    _insert(
        t,
        (2, ["a", "b"], [("x", 1), ("y", 2)], [{"id": 1, "v": "one"}, {"id": 2, "v": "two"}], None),
        (2, ["a"], [("x", 0)], [{"id": 2, "v": "two"}], None),
        kinds=["+I", "-U"],
    )
    got = t.read().to_pylist()[1]
    assert got["tags"] == ["b"] and dict(got["m"]) == {"y": 2}
    assert got["items"] == [{"id": 1, "v": "one"}]


def test_theta_sketch(catalog):
    from datasketches import compact_theta_sketch, update_theta_sketch

    def sketch(values):
        s = update_theta_sketch()
        for v in values:
            s.update(v)
        return s.compact().serialize()

    t = _table(
        catalog,
        "theta",
        [("k", INTS), ("users", pa.binary())],
        {"bucket": "1", "merge-engine": "aggregation", "fields.users.aggregate-function": "theta_sketch"},
    )
    _insert(t, (1, sketch(range(100))))
    _insert(t, (1, sketch(range(50, 150))))
    (got,) = t.read().to_pylist()
    assert compact_theta_sketch.deserialize(got["users"]).get_estimate() == 150


def test_first_row(catalog):
    t = _table(catalog, "fr", [("k", INTS), ("v", pa.string())], {"bucket": "1", "merge-engine": "first-row"})
    _insert(t, (1, "first"), (1, "second"), (2, "a"))
    _insert(t, (1, "third"), (3, "b"))
    assert _rows(t) == [(1, "first"), (2, "a"), (3, "b")]
    with pytest.raises(SchemaMismatchError, match="first-row"):
        _insert(t, (1, None), kinds=["-D"])
    t.set_options({"ignore-delete": "true"})
    _insert(t, (1, None), kinds=["-D"])
    assert _rows(t)[0] == (1, "first")


def test_deduplicate_sequence_field_and_ignore_delete(catalog):
    t = _table(
        catalog,
        "dd",
        [("k", INTS), ("ts", pa.int64()), ("v", pa.string())],
        {"bucket": "2", "sequence.field": "ts"},
    )
    _insert(t, (1, 10, "new"), (2, 5, "x"))
    _insert(t, (1, 3, "late and old"))  # written later, but older by sequence.field
    assert _rows(t) == [(1, 10, "new"), (2, 5, "x")]
    _insert(t, (2, 6, None), kinds=["-D"])
    assert _rows(t) == [(1, 10, "new")]
    t.set_options({"ignore-delete": "true"})
    _insert(t, (1, 99, None), kinds=["-D"])
    assert _rows(t) == [(1, 10, "new")]


@pytest.mark.parametrize(
    "options",
    [
        {"merge-engine": "nope"},
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "median"},
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "bool_and"},
        {"merge-engine": "partial-update", "fields.k.sequence-group": "v"},
        {"merge-engine": "partial-update", "fields.g.sequence-group": "nope"},
        {"merge-engine": "first-row", "sequence.field": "g"},
        {"merge-engine": "partial-update", "partial-update.remove-record-on-sequence-group": "g"},
        {
            "merge-engine": "partial-update",
            "fields.g.sequence-group": "v",
            "partial-update.remove-record-on-sequence-group": "v",
        },
        {
            "merge-engine": "partial-update",
            "fields.g.sequence-group": "v",
            "partial-update.remove-record-on-sequence-group": "g",
            "ignore-delete": "true",
        },
    ],
)
def test_bad_engine_options(catalog, options):
    """Refused when the table is created (nothing is created) and when options are changed."""
    with pytest.raises(InvalidOptionError):
        _table(catalog, "bad", [("k", INTS), ("v", INTS), ("g", INTS)], {"bucket": "1", **options})
    assert catalog.list_tables("db") == []
    t = _table(catalog, "good", [("k", INTS), ("v", INTS), ("g", INTS)], {"bucket": "1"})
    with pytest.raises(InvalidOptionError):
        t.set_options(options)
    assert t.schema.id == 0


# ---- merge_map and nested_update: the vectorized merge against a one-row-at-a-time fold ---------

_MAPS = st.one_of(st.none(), st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 9)), max_size=3))
_ENTRY = st.fixed_dictionaries({"id": st.integers(0, 3), "v": st.integers(0, 9)})
_NESTED = st.one_of(st.none(), st.lists(_ENTRY, max_size=3))


@settings(max_examples=200, deadline=None)
@given(
    history=st.lists(st.tuples(st.integers(0, 3), _MAPS, _NESTED), min_size=1, max_size=12),
    keyed=st.booleans(),
)
def test_collection_merges_equal_folding_each_key_in_order(history, keyed):
    from lakehouse.mergetree import aggregate
    from lakehouse.mergetree.groups import KeyGroups
    from lakehouse.types import from_arrow

    history = [(k, None if m is None else list(dict(m).items()), n) for k, m, n in history]
    types = {"m": pa.map_(pa.string(), pa.int32()), "n": pa.list_(pa.struct([("id", INTS), ("v", INTS)]))}
    data = pa.table(
        {
            "k": pa.array([h[0] for h in history], INTS),
            "m": pa.array([h[1] for h in history], types["m"]),
            "n": pa.array([h[2] for h in history], types["n"]),
            "kind": pa.array([0] * len(history), pa.int8()),
        }
    )
    groups = KeyGroups.of(data, ["k"], [], "kind")
    rows, retract = np.ones(len(history), bool), np.zeros(len(history), bool)
    functions = (("m", "merge_map", ()), ("n", "nested_update", ("id",) if keyed else ()))
    for column, function, nested in functions:
        field = DataField(0, column, from_arrow(types[column]))
        agg = aggregate.FieldAgg(function, field, nested_key=nested)
        fold = aggregate._map_fold if function == "merge_map" else aggregate._nested_fold
        values = groups.column(column)
        expected = aggregate._folded(fold)(agg, values, groups, rows, retract)
        assert agg.reduce(values, groups, rows, retract).to_pylist() == expected.to_pylist()
