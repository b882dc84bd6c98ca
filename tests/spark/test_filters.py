"""Spark filters -> engine predicates: exact ones pushed, the rest handed back to Spark."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import datasource as sf

from lakehouse.predicate import bind, to_expression
from lakehouse.spark.filters import to_predicate

TYPES = {
    "id": pa.int64(),
    "dt": pa.string(),
    "price": pa.float64(),
    "ts": pa.timestamp("us", tz="UTC"),
    "amount": pa.decimal128(10, 2),
}
DATA = pa.table(
    {
        "id": pa.array([1, 2, 3, None], pa.int64()),
        "dt": ["a", "ab", "b", None],
        "price": [1.0, float("nan"), 3.0, None],
        "ts": pa.array(
            [datetime.datetime(2024, 1, d, tzinfo=datetime.UTC) for d in (1, 2, 3, 4)], TYPES["ts"]
        ),
        "amount": pa.array([1, 2, 3, 4], pa.decimal128(10, 2)),
    }
)


def matching_ids(filters: list[sf.Filter]) -> list[int | None]:
    pred, rejected = to_predicate(filters, pa.schema(TYPES))
    assert not rejected
    return DATA.filter(to_expression(bind(pred, TYPES, "db.t"))).column("id").to_pylist()


def test_exact_filters_are_pushed_with_sql_semantics():
    assert matching_ids([sf.EqualTo(("dt",), "a")]) == [1]
    assert matching_ids([sf.GreaterThan(("id",), 1), sf.LessThanOrEqual(("id",), 3)]) == [2, 3]
    assert matching_ids([sf.In(("id",), (1, 3, None))]) == [1, 3]  # NULL in the list matches nothing
    assert matching_ids([sf.Not(sf.EqualTo(("id",), 1))]) == [2, 3]  # NOT keeps nulls out
    assert matching_ids([sf.Not(sf.In(("id",), (1, 2)))]) == [3]
    assert matching_ids([sf.IsNull(("id",))]) == [None]
    assert matching_ids([sf.Not(sf.IsNull(("dt",)))]) == [1, 2, 3]
    assert matching_ids([sf.StringStartsWith(("dt",), "a")]) == [1, 2]
    assert matching_ids([sf.Not(sf.StringStartsWith(("dt",), "a"))]) == [3]
    assert matching_ids([sf.EqualNullSafe(("id",), None)]) == [None]
    assert matching_ids([sf.EqualNullSafe(("id",), 2)]) == [2]
    day3 = datetime.datetime(2024, 1, 3, tzinfo=datetime.UTC)
    assert matching_ids([sf.GreaterThanOrEqual(("ts",), day3)]) == [3, None]
    assert matching_ids([sf.GreaterThan(("amount",), Decimal("2.50"))]) == [3, None]


def test_inexact_filters_go_back_to_spark():
    inexact = [
        sf.GreaterThan(("price",), 1.0),  # NaN sorts above numbers in Spark, never matches in Arrow
        sf.StringEndsWith(("dt",), "b"),
        sf.StringContains(("dt",), "b"),
        sf.EqualTo(("nested", "field"), 1),
        sf.EqualTo(("unknown",), 1),
        sf.Not(sf.EqualNullSafe(("id",), 1)),  # true for NULL in Spark
        sf.Not(sf.In(("id",), (1, None))),  # NOT IN with NULL matches nothing in SQL
        sf.EqualTo(("id",), "not a number"),  # literal does not fit the column
        sf.StringStartsWith(("id",), "1"),
    ]
    pred, rejected = to_predicate([sf.EqualTo(("dt",), "a"), *inexact], pa.schema(TYPES))
    assert rejected == inexact
    assert pred is not None and pred.columns() == {"dt"}
    assert to_predicate(inexact, pa.schema(TYPES)) == (None, inexact)
