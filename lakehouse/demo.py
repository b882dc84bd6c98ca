"""``make demo``: a short tour of the engine on a local warehouse.

Creates a partitioned primary-key table, writes, upserts, deletes, reads and time-travels, and
prints what happened. The warehouse is ``$LAKEHOUSE_WAREHOUSE`` (default ``./warehouse``).
"""

from __future__ import annotations

import os

import pyarrow as pa

from lakehouse import Catalog, col

SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("user_id", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)


def _orders(rows: list[tuple]) -> pa.Table:
    from decimal import Decimal

    columns = list(zip(*rows, strict=True))
    return pa.table(
        {
            "order_id": columns[0],
            "dt": columns[1],
            "user_id": columns[2],
            "status": columns[3],
            "price": [Decimal(p) for p in columns[4]],
        },
        schema=SCHEMA,
    )


def _show(title: str, table: pa.Table) -> None:
    print(f"\n{title} ({table.num_rows} rows)")
    for row in table.sort_by([("dt", "ascending"), ("order_id", "ascending")]).to_pylist():
        print(
            f"  {row['dt']}  order {row['order_id']:>3}  user {row['user_id']:>3}  "
            f"{row['status']:<8} {row['price']:>8}"
        )


def main() -> None:
    warehouse = os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse")
    catalog = Catalog(warehouse)
    catalog.create_database("shop", ignore_if_exists=True)
    catalog.drop_table("shop.orders", ignore_if_not_exists=True)
    orders = catalog.create_table(
        "shop.orders",
        schema=SCHEMA,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "2"},
    )
    print(
        f"created {orders.name} in {os.path.abspath(warehouse)}: primary key (order_id, dt), "
        f"partitioned by dt, 2 buckets"
    )

    s1 = orders.write(
        _orders(
            [
                (1, "2024-01-01", 10, "NEW", "19.99"),
                (2, "2024-01-01", 11, "NEW", "5.00"),
                (3, "2024-01-02", 10, "NEW", "42.50"),
                (4, "2024-01-02", 12, "NEW", "7.25"),
            ]
        )
    )
    _show(f"snapshot {s1}: four new orders", orders.read())

    s2 = orders.write(
        _orders(
            [
                (1, "2024-01-01", 10, "PAID", "19.99"),
                (3, "2024-01-02", 10, "SHIPPED", "42.50"),
                (5, "2024-01-02", 13, "NEW", "99.00"),
            ]
        )
    )
    _show(f"snapshot {s2}: orders 1 and 3 upserted, order 5 added", orders.read())

    cancelled = _orders([(2, "2024-01-01", 11, "NEW", "5.00")]).append_column("_row_kind", pa.array(["-D"]))
    s3 = orders.write(cancelled)
    _show(f"snapshot {s3}: order 2 deleted", orders.read())

    _show(
        "filter status = 'NEW' or price > 40",
        orders.read(filter=(col("status") == "NEW") | (col("price") > 40)),
    )
    plan = orders.plan(filter=col("dt") == "2024-01-02")
    print(f"\nplan for dt = '2024-01-02': {plan.stats}")

    _show(f"time travel to snapshot {s1}", orders.read(snapshot_id=s1))
    first = orders.snapshots.snapshot(s1)
    _show(f"time travel to timestamp {first.time_millis}", orders.read(timestamp_ms=first.time_millis))

    print("\nsnapshots:")
    for sid in orders.snapshots.snapshot_ids():
        s = orders.snapshots.snapshot(sid)
        print(
            f"  {sid}: {s.commit_kind.value:<9} +{s.delta_record_count} records, "
            f"{s.total_record_count} in data files"
        )
    print(f"\nthe table is a Paimon table: any Paimon reader can open {orders.paths.root}")


if __name__ == "__main__":
    main()
