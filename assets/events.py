"""The example's source system: order events, generated deterministically per day with numpy and
pyarrow only (Spark tasks generate days with it, so it imports nothing of Dagster)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PRICE = pa.decimal128(10, 2)
ORDERS_PER_DAY = int(os.environ.get("LAKEHOUSE_EXAMPLE_ORDERS_PER_DAY", "400"))  # bench: 100,000
USERS = 50
START = "2026-01-01"  # the example's first day (its daily partitions start here)
EPOCH = dt.date(2020, 1, 1)  # day numbers seed the generator: a day's events never depend on START
LATE_IDS = 10**15  # late events' ids start here (a day's own events number below 10**7 per day)


def recent_days(count: int) -> list[str]:
    """The ``count`` days up to yesterday (UTC): complete days, the latest partitions the UI shows."""
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    return [str(yesterday - dt.timedelta(days=count - 1 - i)) for i in range(count)]


def table_schema(*fields: tuple[str, pa.DataType, bool, str]) -> pa.Schema:
    """An Arrow schema of (name, type, nullable, description) fields."""
    return pa.schema(
        [
            pa.field(name, dtype, nullable=nullable, metadata={"description": text})
            for name, dtype, nullable, text in fields
        ]
    )


EVENTS = table_schema(
    ("event_id", pa.int64(), False, "unique per event"),
    ("order_id", pa.int64(), False, "the order the event is about"),
    ("user_id", pa.int64(), False, "who placed the order"),
    ("event_type", pa.string(), False, "create, update, pay or cancel"),
    ("status", pa.string(), False, "the order's status after the event"),
    ("price", PRICE, False, "the order's price when the event happened"),
    ("pay_method", pa.string(), True, "card, wallet or transfer (pay events)"),
    ("event_time", pa.timestamp("us"), False, "when the event happened"),
    ("dt", pa.string(), False, "the day of the event (partition)"),
)


def _price(cents: np.ndarray) -> pa.Array:
    """Exact decimal prices from integer cents."""
    hundredth = pa.scalar(Decimal("0.01"), pa.decimal128(3, 2))
    return pc.multiply(pa.array(cents, pa.int32()).cast(pa.decimal128(12, 0)), hundredth).cast(PRICE)


def order_events(day: str, orders: int = ORDERS_PER_DAY) -> pa.Table:
    """The events of one day, the same every time for the same day: every order is created; about
    40% are then updated, 60% paid and 10% cancelled, in that order."""
    index = (dt.date.fromisoformat(day) - EPOCH).days
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


def late_events(day: str, batch: int, share: float = 0.01, orders: int = ORDERS_PER_DAY) -> pa.Table:
    """Events that reach ``day``'s partition after its run (late batch number ``batch`` < 10,000,
    the same every time for the same day and batch): a ``share`` of the day's orders repriced, a
    tenth of those cancelled, timed after the day's own events and earlier batches."""
    index = (dt.date.fromisoformat(day) - EPOCH).days
    rng = np.random.default_rng([index, batch])
    chosen = np.sort(rng.choice(orders, max(1, int(orders * share)), replace=False))
    n = len(chosen)
    user_id = np.random.default_rng(index).integers(0, USERS, orders, dtype=np.int64)[chosen]
    cancel = rng.random(n) < 0.1
    late = np.datetime64(day, "us") + np.timedelta64(1, "D") + np.timedelta64(batch, "h")
    events = pa.table(
        {
            "event_id": LATE_IDS + index * 10**9 + batch * 10**5 + np.arange(n, dtype=np.int64),
            "order_id": index * 1_000_000 + chosen.astype(np.int64),
            "user_id": user_id,
            "event_type": pa.array(np.where(cancel, "cancel", "update")),
            "status": pa.array(np.where(cancel, "CANCELLED", "CONFIRMED")),
            "price": _price(rng.integers(100, 50_000, n)),
            "pay_method": pa.nulls(n, pa.string()),
            "event_time": late + rng.integers(0, 3600 * 10**6, n).astype("timedelta64[us]"),
            "dt": pa.array([day] * n),
        }
    )
    return events.cast(EVENTS)
