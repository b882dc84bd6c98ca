from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse import col
from lakehouse.errors import SchemaMismatchError
from lakehouse.predicate import And, ColumnStats, Leaf, Or, bind, may_match, only_columns, push_not_down


def test_not_is_pushed_to_the_leaves_with_sql_semantics():
    pred = ~((col("a") == 1) & (col("b").isin([1, 2]) | col("c").is_null()))
    assert push_not_down(pred) == Or(
        (Leaf("ne", "a", (1,)), And((Leaf("not_in", "b", (1, 2)), Leaf("is_not_null", "c"))))
    )
    assert push_not_down(~col("a").between(1, 5)) == Or((Leaf("lt", "a", (1,)), Leaf("gt", "a", (5,))))


def test_only_columns_widens_never_narrows():
    pred = push_not_down((col("dt") == "x") & (col("price") > 1) | (col("dt") == "y"))
    assert only_columns(pred, {"dt"}) == Or((Leaf("eq", "dt", ("x",)), Leaf("eq", "dt", ("y",))))
    assert only_columns(push_not_down((col("dt") == "x") | (col("price") > 1)), {"dt"}) is None


def test_literals_are_cast_to_the_column_type():
    bound = bind(col("d") == "2024-01-02", {"d": pa.date32()}, "db.t")
    assert bound.literals[0] == pa.scalar("2024-01-02").cast(pa.date32())
    assert bind(col("p") > 40, {"p": pa.decimal128(10, 2)}, "db.t").literals[0].type == pa.decimal128(10, 2)


@pytest.mark.parametrize(
    ("literal", "atype"),
    [
        (1.5, pa.int32()),
        (Decimal("1.5"), pa.int64()),
        (1.25, pa.decimal128(10, 1)),
        (Decimal("2.245"), pa.decimal128(10, 2)),
    ],
)
def test_a_literal_that_would_lose_its_value_is_refused(literal, atype):
    with pytest.raises(SchemaMismatchError, match="does not fit column 'x'"):
        bind(col("x") == literal, {"x": atype}, "db.t")
    assert bind(col("x") == 2, {"x": atype}, "db.t").literals[0].as_py() == 2


def test_stats_decide_whether_a_file_may_match():
    s = {"x": ColumnStats(10, 20, 0, 100), "n": ColumnStats(None, None, 100, 100)}.get

    def may(pred):
        return may_match(bind(pred, {"x": pa.int64(), "n": pa.int64()}, "t"), s, lambda c, v: v.as_py())

    assert may(col("x") == 15) and not may(col("x") == 21)
    assert not may(col("x") > 20) and may(col("x") >= 20)
    assert not may(col("x").isin([1, 2, 30])) and may(col("x").isin([1, 12]))
    assert not may(col("n") == 1) and may(col("n").is_null()) and not may(col("n").is_not_null())
    assert not may(col("x").is_null())
    assert may(~(col("x") == 15))  # other values remain
