"""Routes computed by Spark (lakehouse.spark.row_hash) are the engine's, for every key type it spells."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import RowRouter
from lakehouse.schema import new_schema
from lakehouse.spark import write
from lakehouse.spark.row_hash import with_route
from lakehouse.spark.types import spark_schema_of_arrow

from ..conftest import rows

KEYS = pa.schema(
    [
        ("id", pa.int64(), False),
        ("n", pa.int32()),
        ("small", pa.int16()),
        ("tiny", pa.int8()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
    ]
)
VALUES = {
    "n": st.integers(-(2**31), 2**31 - 1),
    "small": st.integers(-(2**15), 2**15 - 1),
    "tiny": st.integers(-128, 127),
    "flag": st.booleans(),
    "day": st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1)),
}
ROWS = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(-(2**63), 2**63 - 1), **{k: st.none() | v for k, v in VALUES.items()}}
    ),
    min_size=1,
    max_size=80,
)
FORMULAS = [  # (primary key, partition keys, options): fixed and dynamic buckets over every type
    (["id"], [], {"bucket": "7"}),
    (["id", "n", "small", "tiny", "flag"], [], {"bucket": "5", "bucket-key": "n,small,tiny,flag"}),
    (["id", "day"], [], {"bucket": "3", "bucket-key": "day,id"}),
    (["id", "day"], ["day"], {"bucket": "-1"}),
    (["id", "n", "small", "day"], ["day", "n"], {"bucket": "-1", "dynamic-bucket.initial-buckets": "2"}),
]


def _routes(df, routers: list[RowRouter]) -> list[list[int]]:
    """Each router's routes of the rows of ``df``, computed by Spark."""
    for i, router in enumerate(routers):
        df = with_route(df, router.formula, f"r{i}")
        assert df is not None
    got = df.select(*(f"r{i}" for i in range(len(routers)))).collect()
    return [[row[i] for row in got] for i in range(len(routers))]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ROWS)
def test_spark_routes_rows_as_the_engine_does(spark, data):
    table = pa.Table.from_pylist(data, schema=KEYS)
    df = spark.createDataFrame(table.to_pylist(), spark_schema_of_arrow(KEYS))
    routers = [RowRouter(new_schema("db.t", KEYS, *formula), 3) for formula in FORMULAS]
    for formula, router, got in zip(FORMULAS, routers, _routes(df, routers), strict=True):
        want = router.route(*(table.column(c).combine_chunks() for c in router.columns))
        assert got == want.tolist(), formula


def test_the_null_bits_of_many_fields(spark):
    """Keys of more than 24 fields: their null bits reach the header's second word."""
    rng = np.random.default_rng(7)
    names = [f"k{i}" for i in range(40)]
    schema = pa.schema([("id", pa.int64(), False), *((n, pa.int32()) for n in names)])
    values = {n: pa.array(rng.integers(-9, 9, 200), pa.int32(), mask=rng.random(200) < 0.3) for n in names}
    table = pa.table({"id": np.arange(200), **values}, schema=schema)
    df = spark.createDataFrame(table.to_pylist(), spark_schema_of_arrow(schema))
    options = {"bucket": "11", "bucket-key": ",".join(names)}
    router = RowRouter(new_schema("db.t", schema, ["id", *names], [], options), 2)
    want = router.route(*(table.column(c).combine_chunks() for c in router.columns))
    assert _routes(df, [router]) == [want.tolist()]


def test_keys_spark_cannot_hash_are_routed_by_the_engine(any_spark, catalog, warehouse):
    schema = pa.schema([("at", pa.timestamp("us"), False), ("id", pa.string(), False), ("v", pa.float64())])
    t = catalog.create_table("db.t", schema, primary_keys=["at", "id"], options={"bucket": "4"})
    data = pa.table(
        {"at": pa.array(list(range(0, 400_000, 1000)), pa.timestamp("us")),
         "id": [f"#{i}" for i in range(400)], "v": [float(i) for i in range(400)]},
        schema=schema,
    )  # fmt: skip
    df = any_spark.createDataFrame(data.to_pylist(), spark_schema_of_arrow(schema)).repartition(3)
    assert with_route(df, t.new_row_router(2).formula, "r") is None  # hashed by the engine
    by_id = RowRouter(new_schema("db.t", schema, ["at", "id"], [], {"bucket": "4", "bucket-key": "id"}), 2)
    assert with_route(df, by_id.formula, "r") is None  # strings too
    write(df, "db.t", warehouse=warehouse, num_tasks=2)  # refused if a bucket reached two tasks
    assert rows(t.read(), ["id"]) == rows(data, ["id"])
    assert len({e.bucket for e in t.live_entries()}) == 4


def test_a_column_not_of_the_tables_type_is_routed_by_the_engine(spark):
    router = RowRouter(new_schema("db.t", KEYS, ["id"], [], {"bucket": "4"}), 2)
    as_int = spark.createDataFrame([(1,)], "id INT")  # the engine casts it to BIGINT its own way
    assert with_route(as_int, router.formula, "r") is None
    assert with_route(spark.createDataFrame([(1,)], "id BIGINT"), router.formula, "r") is not None


@pytest.mark.parametrize("bucket", ["4", "-1"])
def test_spark_routes_the_example_keys(any_spark, catalog, warehouse, bucket):
    """The example's keys: a fixed-bucket table routed by Spark, a dynamic-bucket one (its string
    partitions) by the engine; every row written once."""
    schema = pa.schema([("order_id", pa.int64(), False), ("dt", pa.string(), False), ("x", pa.int64())])
    t = catalog.create_table(
        "db.t", schema, primary_keys=["order_id", "dt"], partition_keys=["dt"],
        options={"bucket": bucket, "dynamic-bucket.target-row-num": "50"},
    )  # fmt: skip
    data = pa.table({"order_id": list(range(500)), "dt": ["2024-01-0" + str(i % 3 + 1) for i in range(500)],
                     "x": list(range(500))}, schema=schema)  # fmt: skip
    df = any_spark.createDataFrame(data.to_pylist(), spark_schema_of_arrow(schema)).repartition(3)
    assert (with_route(df, t.new_row_router(2).formula, "r") is None) == (bucket == "-1")
    write(df, "db.t", warehouse=warehouse, num_tasks=2)
    assert rows(t.read(), ["order_id"]) == rows(data, ["order_id"])
