"""A branch through the ``paimon`` data source: ``db.t$branch_<b>`` or the option ``branch``."""

from __future__ import annotations

import pytest

from ..conftest import orders, pk_orders_table, rows

pytestmark = pytest.mark.spark


def test_spark_writes_and_reads_a_branch_leaving_main_alone(spark, catalog, warehouse):
    t = pk_orders_table(catalog)
    t.write(orders(range(5)))
    t.create_tag("base")
    t.create_branch("b", tag="base")
    main = rows(t.read())
    df = spark.createDataFrame(orders(range(3, 8), price=2.0)).coalesce(1)  # one task per bucket
    df.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t$branch_b")
    b = t.on_branch("b")
    assert b.latest_snapshot_id() == 2 and rows(t.read()) == main
    read = spark.read.format("paimon").option("warehouse", warehouse)
    assert rows(read.load("db.t$branch_b").toArrow()) == rows(b.read())
    assert rows(read.option("branch", "b").load("db.t").toArrow()) == rows(b.read())
    snapshots = read.load("db.t$branch_b$snapshots").toArrow()
    assert snapshots.column("snapshot_id").to_pylist() == [1, 2]
