"""Reading WHERE conditions on the driver: the columns they may use, the conjuncts pushed as filters
(SQL text here; Column trees of both session kinds in ``test_native_read.py``)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from pyspark.sql import datasource as sf

from lakehouse.spark.conditions import pushable_filters, used_columns
from lakehouse.types import AtomicType

TYPES = {
    "dt": AtomicType("VARCHAR", length=2**31 - 1),
    "user_id": AtomicType("INT"),
    "price": AtomicType("DOUBLE"),
    "amount": AtomicType("DECIMAL", precision=10, scale=2),
    "day": AtomicType("DATE"),
    "flag": AtomicType("BOOLEAN"),
}
DT, USER = ("dt",), ("user_id",)


@pytest.mark.parametrize(
    "text, filters",
    [
        ("dt = '2024-01-01' AND user_id = 4242", [sf.EqualTo(DT, "2024-01-01"), sf.EqualTo(USER, 4242)]),
        ("(dt = 'a' AND (user_id > 5)) and price > 1", [sf.EqualTo(DT, "a"), sf.GreaterThan(USER, 5)]),
        ("user_id BETWEEN 1 AND 5 AND dt IN ('a', 'b')",
         [sf.GreaterThanOrEqual(USER, 1), sf.LessThanOrEqual(USER, 5), sf.In(DT, ("a", "b"))]),
        ("NOT dt = 'x'", [sf.Not(sf.EqualTo(DT, "x"))]),
        ("user_id != 4 AND user_id <> 5", [sf.Not(sf.EqualTo(USER, 4)), sf.Not(sf.EqualTo(USER, 5))]),
        ("dt NOT IN ('a')", [sf.Not(sf.In(DT, ("a",)))]),
        ("dt IS NOT NULL AND flag = TRUE AND user_id IS NULL", [sf.IsNotNull(DT), sf.EqualTo(("flag",), True),
                                                                sf.IsNull(USER)]),
        ("5 < user_id AND -3 >= user_id", [sf.GreaterThan(USER, 5), sf.LessThanOrEqual(USER, -3)]),
        ("day >= DATE '2024-01-01'", [sf.GreaterThanOrEqual(("day",), datetime.date(2024, 1, 1))]),
        ("dt LIKE 'ab%' AND dt NOT LIKE 'abc%'", [sf.StringStartsWith(DT, "ab"),
                                                 sf.Not(sf.StringStartsWith(DT, "abc"))]),
        ("amount = 1.5 AND amount > 2",
         [sf.EqualTo(("amount",), Decimal("1.5")), sf.GreaterThan(("amount",), 2)]),
        ("`dt` = 'a' AND DT = 'b' AND user_id <=> NULL",
         [sf.EqualTo(DT, "a"), sf.EqualTo(DT, "b"), sf.IsNull(USER)]),
        ("f(user_id) = 1 AND user_id = 2 AND dt = user_id", [sf.EqualTo(USER, 2)]),
        # literal of another kind than the column's: Spark would cast, so nothing is pushed
        ("user_id = '5' AND dt = 5 AND day = '2024-01-01' AND flag = 1 AND user_id = 1.5", []),
        # not conjunctions, or not read exactly: nothing is pushed (FLOAT/DOUBLE: see filters.py)
        ("dt = 'a' OR user_id = 1", []),
        ("price > 1 AND price = 2.5", []),
        ("user_id = 1 AND dt = 'a' OR user_id = 2", []),
        ("CASE WHEN flag AND user_id = 1 THEN true END AND dt = 'a'", []),
        ("user_id = 1 -- AND dt = 'a'", []),
        ("user_id = 1 /* AND dt = 'a' */", []),
        ("dt = 'it''s' AND user_id = 1", []),
        ("dt = 'a\\'b' AND user_id = 1", []),
        ('dt = "a" AND user_id = 1', []),
        ("dt = 'a' 'b'", []),
        ("dt LIKE 'a_b%' AND dt LIKE '%a' AND dt LIKE 'a' AND user_id = 1e3 AND user_id = 1L", []),
        ("user_id NOT BETWEEN 1 AND 5 AND user_id = NULL AND t.user_id = 1 AND user_id = 1 + 1", []),
        ("day = DATE '2024-1-1' AND day = DATE '2024-02-30'", []),
    ],
)  # fmt: skip
def test_sql_conjuncts_become_filters(text, filters):
    assert pushable_filters(text, TYPES) == filters


def test_ambiguous_names_are_not_pushed():
    types = {**TYPES, "DT": AtomicType("VARCHAR", length=10)}
    assert pushable_filters("Dt = 'a' AND dt = 'b'", types) == [sf.EqualTo(DT, "b")]


def test_used_columns_are_every_column_named_in_the_text():
    columns = list(TYPES)
    assert used_columns("DT = 'x' AND upper(status) = 'y'", columns) == ["dt"]
    assert used_columns("Column<'(price > 1)'>", columns) == ["price"]
    assert used_columns("hash(*) > 0", columns) == columns
    assert used_columns("`day` IS NULL AND flag", columns) == ["day", "flag"]
