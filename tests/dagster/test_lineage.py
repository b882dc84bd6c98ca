"""Column lineage from Spark's analyzed plan: each output column traced through the aliases that
make it to the upstream columns it is computed from."""

import pytest
from dagster import AssetKey

from dagster_lakehouse.lineage import column_lineage

pytestmark = pytest.mark.spark


def _deps(lineage) -> dict[str, set[str]]:
    return {
        column: {f"{d.asset_key.to_user_string()}.{d.column_name}" for d in deps}
        for column, deps in lineage.deps_by_column.items()
    }


def test_each_column_is_traced_through_ctes_aggregates_joins_and_expressions(spark):
    orders = spark.createDataFrame(
        [(1, 2, "d", 3.0, "+I")], "order_id bigint, user_id bigint, dt string, price double, _row_kind string"
    )
    pays = spark.createDataFrame([(1, "card")], "order_id bigint, method string")
    query = """
        WITH daily AS (
          SELECT user_id, dt, SUM(CASE WHEN _row_kind = '-D' THEN -price ELSE price END) AS total,
                 COUNT(*) AS n
          FROM {orders} GROUP BY user_id, dt)
        SELECT d.user_id, d.dt, d.total * 2 AS doubled, d.n, p.method, 'fixed' AS label,
               ROW_NUMBER() OVER (PARTITION BY d.dt ORDER BY d.total) AS rank
        FROM daily d JOIN {pays} p ON d.user_id = p.order_id"""
    frame = spark.sql(query, args=None, orders=orders, pays=pays)
    lineage = column_lineage(
        frame, [(AssetKey(["dwd", "orders"]), orders), (AssetKey(["ods", "pays"]), pays)]
    )
    assert _deps(lineage) == {
        "user_id": {"dwd/orders.user_id"},
        "dt": {"dwd/orders.dt"},
        "doubled": {"dwd/orders.price"},  # _row_kind is not a column of the table
        "method": {"ods/pays.method"},
        "rank": {"dwd/orders.dt", "dwd/orders.price"},
    }  # n (a count of rows) and label read no column


def test_dataframe_transformations_keep_their_lineage(spark):
    from pyspark.sql import functions as F

    events = spark.createDataFrame([(1, "a b", 2)], "id bigint, words string, qty int")
    frame = events.select("id", (F.col("qty") + 1).alias("more"), F.upper("words").alias("loud")).where(
        "id > 0"
    )
    assert _deps(column_lineage(frame, [(AssetKey(["ods", "events"]), events)])) == {
        "id": {"ods/events.id"}, "more": {"ods/events.qty"}, "loud": {"ods/events.words"},
    }  # fmt: skip


def test_a_frame_read_twice_is_traced_to_both_reads(spark):
    left = spark.createDataFrame([(1, 5)], "k bigint, v bigint")
    right = spark.createDataFrame([(1, 7)], "k bigint, v bigint")
    frame = left.alias("l").join(right.alias("r"), "k").selectExpr("k", "l.v + r.v AS total")
    assert _deps(column_lineage(frame, [(AssetKey(["db", "a"]), left), (AssetKey(["db", "b"]), right)])) == {
        "k": {"db/a.k"}, "total": {"db/a.v", "db/b.v"},
    }  # fmt: skip
