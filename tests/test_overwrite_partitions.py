"""Overwriting a list of partitions: exactly those are replaced, also the ones the data has no rows
for; by ``Table.write`` and by Spark's ``mode("overwrite")`` with ``overwrite.partitions``."""

from __future__ import annotations

import json

import pytest

from lakehouse.errors import ArgumentTypeError, InvalidArgumentError, SchemaMismatchError
from lakehouse.snapshot import CommitKind

from .conftest import ORDERS, orders, rows

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(6), dt=DAYS * 2))
    return t


def days_of(table) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows(table.read()):
        out.setdefault(r["dt"], []).append(r["order_id"])
    return out


def test_listed_partitions_are_replaced_even_without_rows(table):
    snapshot = table.write(orders([10], dt=DAYS[0]), overwrite=[{"dt": DAYS[0]}, {"dt": DAYS[1]}])
    assert table.snapshot(snapshot).commit_kind == CommitKind.OVERWRITE
    assert days_of(table) == {DAYS[0]: [10], DAYS[2]: [2, 5]}
    table.write(orders([]), overwrite=[{"dt": DAYS[2]}])  # no rows at all: the partition is emptied
    assert days_of(table) == {DAYS[0]: [10]}


@pytest.mark.parametrize(
    "overwrite, error, message",
    [
        ([], InvalidArgumentError, "lists no partitions"),
        ([{"dt": DAYS[0]}, "x"], ArgumentTypeError, "or a list of them"),
        ([{"day": DAYS[0]}], SchemaMismatchError, "'day', which is not a partition key"),
    ],
)
def test_bad_lists_are_refused_before_writing(table, overwrite, error, message):
    with pytest.raises(error, match=message):
        table.write(orders([10], dt=DAYS[0]), overwrite=overwrite)
    assert table.latest_snapshot_id() == 1


def test_rows_outside_the_listed_partitions_are_refused(table):
    with pytest.raises(SchemaMismatchError, match=r"overwrite of partitions \[\{'dt': '2024-01-01'\}\]"):
        table.write(orders([10], dt=DAYS[1]), overwrite=[{"dt": DAYS[0]}])
    assert table.latest_snapshot_id() == 1


@pytest.mark.spark
def test_spark_overwrites_the_listed_partitions(spark, table, warehouse):
    from lakehouse.spark import write
    from lakehouse.spark.options import OVERWRITE_PARTITIONS

    listed = json.dumps([{"dt": DAYS[0]}, {"dt": DAYS[1]}])
    df = spark.createDataFrame(orders([10], dt=DAYS[0]))
    write(df, "db.t", mode="overwrite", warehouse=warehouse, options={OVERWRITE_PARTITIONS: listed})
    assert days_of(table) == {DAYS[0]: [10], DAYS[2]: [2, 5]}
    with pytest.raises(Exception, match="must be a JSON list of partitions"):
        write(df, "db.t", mode="overwrite", warehouse=warehouse, options={OVERWRITE_PARTITIONS: "{}"})
    assert table.latest_snapshot_id() == 2
