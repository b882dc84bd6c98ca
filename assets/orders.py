"""The example lakehouse: a layered real-time warehouse (ODS -> DWD -> DWS) over order events.

- ``ods.orders``: the raw order events of a day, append-only (a deterministic generator stands
  in for the source system: creations, updates, payments and cancellations);
- ``dwd.orders``: each order's state after the day's events, a primary-key table with dynamic
  buckets, deletion vectors (cancelled orders are deleted) and file indexes: bloom filter on
  ``user_id``, bitmap on ``status``, bit-slice index on ``price``;
- ``dws.user_daily``: orders and amounts per user and day, summed by the aggregation engine;
- ``dws.order_wide``: one wide row per order filled by two streams - order states from
  ``dwd.orders`` and payments from ``ods.orders`` - merged by partial update, each stream's
  columns under its own sequence group. It is written without compaction (``write-only``), so
  the compaction sensor keeps its LSM trees in shape.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from decimal import Decimal
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.dagster.spec import Inputs, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PRICE = pa.decimal128(10, 2)
ORDERS_PER_DAY = int(os.environ.get("LAKEHOUSE_EXAMPLE_ORDERS_PER_DAY", "400"))  # bench: 100,000
USERS = 50
TARGET_BUCKET_ROWS = max(150, ORDERS_PER_DAY // 3)  # dwd.orders: about three dynamic buckets a day
START = "2024-01-01"


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype, nullable=nullable) for name, dtype, nullable in fields])


EVENTS = _schema(
    ("event_id", pa.int64(), False),
    ("order_id", pa.int64(), False),
    ("user_id", pa.int64(), False),
    ("event_type", pa.string(), False),  # create, update, pay, cancel
    ("status", pa.string(), False),
    ("price", PRICE, False),  # the order's price when the event happened
    ("pay_method", pa.string(), True),
    ("event_time", pa.timestamp("us"), False),
    ("dt", pa.string(), False),
)
ORDERS = _schema(
    ("order_id", pa.int64(), False),
    ("dt", pa.string(), False),
    ("user_id", pa.int64(), True),
    ("status", pa.string(), True),
    ("price", PRICE, True),
    ("updated_at", pa.timestamp("us"), True),
)
USER_DAILY = _schema(
    ("user_id", pa.int64(), False),
    ("dt", pa.string(), False),
    ("order_count", pa.int64(), True),
    ("total_amount", pa.decimal128(18, 2), True),
    ("max_price", PRICE, True),
)
ORDER_WIDE = _schema(
    *[(f.name, f.type, f.nullable) for f in ORDERS],
    ("pay_method", pa.string(), True),
    ("amount_paid", PRICE, True),
    ("paid_at", pa.timestamp("us"), True),
)


def _price(cents: np.ndarray) -> pa.Array:
    """Exact decimal prices from integer cents."""
    hundredth = pa.scalar(Decimal("0.01"), pa.decimal128(3, 2))
    return pc.multiply(pa.array(cents, pa.int32()).cast(pa.decimal128(12, 0)), hundredth).cast(PRICE)


def order_events(day: str, orders: int = ORDERS_PER_DAY) -> pa.Table:
    """The events of one day, the same every time for the same day: every order is created; about
    40% are then updated, 60% paid and 10% cancelled, in that order."""
    index = (dt.date.fromisoformat(day) - dt.date.fromisoformat(START)).days
    rng = np.random.default_rng(index)
    order_id = index * 1_000_000 + np.arange(orders, dtype=np.int64)
    user_id = rng.integers(0, USERS, orders, dtype=np.int64)
    created = rng.integers(100, 50_000, orders, dtype=np.int64)
    updated = np.maximum(created + rng.integers(-500, 500, orders), 100)
    start = np.datetime64(day, "us") + rng.integers(0, 12 * 3600 * 10**6, orders).astype("timedelta64[us]")
    methods = rng.choice(np.array(["card", "wallet", "transfer"]), orders)
    is_updated = rng.random(orders) < 0.4
    steps = [  # (event type, which orders, status, price in cents)
        ("create", np.ones(orders, bool), "NEW", created),
        ("update", is_updated, "CONFIRMED", updated),
        ("pay", rng.random(orders) < 0.6, "PAID", np.where(is_updated, updated, created)),
        ("cancel", rng.random(orders) < 0.1, "CANCELLED", np.where(is_updated, updated, created)),
    ]
    parts = []
    for step, (kind, chosen, status, cents) in enumerate(steps):
        n = int(chosen.sum())
        parts.append(
            pa.table(
                {
                    "order_id": order_id[chosen],
                    "user_id": user_id[chosen],
                    "event_type": pa.array([kind] * n),
                    "status": pa.array([status] * n),
                    "price": _price(cents[chosen]),
                    "pay_method": pa.array(methods[chosen] if kind == "pay" else [None] * n, pa.string()),
                    "event_time": start[chosen] + np.timedelta64(step, "h"),
                }
            )
        )
    events = pa.concat_tables(parts).sort_by([("event_time", "ascending"), ("order_id", "ascending")])
    n = events.num_rows
    events = events.append_column("dt", pa.array([day] * n))
    events = events.append_column("event_id", pa.array(index * 10_000_000 + np.arange(n, dtype=np.int64)))
    return events.select(EVENTS.names).cast(EVENTS)


# ---- transformations (PySpark) -----------------------------------------------------------------


def _ods_orders(inputs: Inputs) -> DataFrame:
    """The events of the run's days, each day generated by a Spark task (a backfill of many days
    never sits in the driver)."""
    from lakehouse.spark.types import spark_schema_of_arrow

    days = list(inputs.days)

    def generate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from order_events(days[i]).to_batches()

    ids = inputs.spark.range(0, len(days), 1, len(days))
    return ids.mapInArrow(generate, spark_schema_of_arrow(EVENTS))


def _dwd_orders(inputs: Inputs) -> DataFrame:
    """The last event of each order: its state, or its deletion when it was cancelled."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest_first = Window.partitionBy("order_id").orderBy(F.desc("event_time"), F.desc("event_id"))
    last = inputs.read("ods.orders").withColumn("n", F.row_number().over(newest_first)).where("n = 1")
    kind = F.when(F.col("event_type") == "cancel", "-D").otherwise("+I")
    return last.select(*ORDERS.names[:-1], F.col("event_time").alias("updated_at"), kind.alias("_row_kind"))


def _dws_user_daily(inputs: Inputs) -> DataFrame:
    """One row per order; the aggregation engine sums them per user and day."""
    from pyspark.sql import functions as F

    return inputs.read("dwd.orders").select(
        "user_id", "dt", F.lit(1).cast("bigint").alias("order_count"),
        F.col("price").cast("decimal(18,2)").alias("total_amount"), F.col("price").alias("max_price"),
    )  # fmt: skip


def _dws_order_wide(inputs: Inputs) -> DataFrame:
    """Order states and the payments of live orders as two streams of partial rows; partial update
    joins them."""
    from pyspark.sql import functions as F

    def nulls(*names: str) -> list:
        types = {f.name: f.type for f in ORDER_WIDE}
        return [F.lit(None).cast(_spark_type(types[n])).alias(n) for n in names]

    orders = inputs.read("dwd.orders")
    states = orders.select(*ORDERS.names, *nulls("pay_method", "amount_paid", "paid_at"))
    paid = (
        inputs.read("ods.orders")
        .where("event_type = 'pay'")
        .join(orders.select("order_id", "dt"), ["order_id", "dt"], "left_semi")
    )
    payments = paid.select(
        "order_id", "dt", *nulls("user_id", "status", "price", "updated_at"), "pay_method",
        F.col("price").alias("amount_paid"), F.col("event_time").alias("paid_at"),
    )  # fmt: skip
    return states.unionByName(payments)


def _spark_type(dtype: pa.DataType):
    from lakehouse.spark.types import spark_schema_of_arrow

    return spark_schema_of_arrow(pa.schema([("x", dtype)]))["x"].dataType


TABLES = (
    TableSpec(
        "ods.orders",
        EVENTS,
        _ods_orders,
        write="overwrite",
        description="Raw order events, one partition per day (append-only)",
    ),
    TableSpec(
        "dwd.orders",
        ORDERS,
        _dwd_orders,
        primary_keys=("order_id", "dt"),
        options={
            "bucket": "-1",
            "dynamic-bucket.target-row-num": str(TARGET_BUCKET_ROWS),
            "deletion-vectors.enabled": "true",
            "file-index.bloom-filter.columns": "user_id",
            "file-index.bitmap.columns": "status",
            "file-index.bsi.columns": "price",
        },
        upstream=("ods.orders",),
        description="Orders as of their last event; cancelled orders deleted (deletion vectors, indexed)",
        index_checks=True,
        blocking_checks=True,
    ),
    TableSpec(
        "dws.user_daily",
        USER_DAILY,
        _dws_user_daily,
        primary_keys=("user_id", "dt"),
        options={
            "bucket": "2",
            "merge-engine": "aggregation",
            "fields.order_count.aggregate-function": "sum",
            "fields.total_amount.aggregate-function": "sum",
            "fields.max_price.aggregate-function": "max",
        },
        upstream=("dwd.orders",),
        write="overwrite",
        description="Orders and amounts per user and day (aggregation merge engine)",
    ),
    TableSpec(
        "dws.order_wide",
        ORDER_WIDE,
        _dws_order_wide,
        primary_keys=("order_id", "dt"),
        options={
            "bucket": "2",
            "merge-engine": "partial-update",
            "fields.updated_at.sequence-group": "user_id,status,price",
            "fields.paid_at.sequence-group": "pay_method,amount_paid",
            "write-only": "true",
            "num-sorted-run.compaction-trigger": "3",
        },
        upstream=("dwd.orders", "ods.orders"),
        description="One row per order: its state and its payment, joined by partial update",
    ),
)
