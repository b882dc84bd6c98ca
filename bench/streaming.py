"""Streaming and incremental benchmark: one run, same machine, same data.

- streaming throughput: a Structured Streaming query reads ``--batches`` Parquet files of
  ``--batch-rows`` order rows (one file per micro-batch) and writes them with
  ``writeStream.format("paimon")`` into an append table and a primary-key table (bucket 4), and
  with Spark's native ``parquet`` sink, each ``trigger(availableNow=True)`` on a fresh checkpoint;
  rows per second and the ratio to the native sink;
- the example at ``--orders`` orders a day: one day materialized, then its incremental tables
  (dwd.orders, dws.user_daily, dws.order_wide) by the incremental job as a full recomputation
  (the tables dropped first) and incrementally after 1% of the day's orders changed (late
  events), ratio full / incremental;
- end-to-end freshness of the example's streaming mode (``make stream``): ``--rounds`` rounds of
  1% late events, seconds from their ``ods.orders`` commit to ``dws.user_daily``'s commit.

    .venv/bin/python bench/streaming.py [--batches N] [--batch-rows R] [--orders N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ORDERS = pa.schema([pa.field("order_id", pa.int64(), nullable=False), pa.field("user_id", pa.int64()),
                    pa.field("status", pa.string()), pa.field("price", pa.float64()),
                    pa.field("qty", pa.int32()), pa.field("region", pa.string()),
                    pa.field("note", pa.string()), pa.field("dt", pa.string(), nullable=False)])  # fmt: skip
STATUSES = np.array(["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"])
REGIONS = np.array(["eu-west", "eu-north", "us-east", "us-west", "ap-south"])


def batch(i: int, rows: int) -> pa.Table:
    """Micro-batch ``i``: new order ids, and upserts of earlier ones (a fifth of the rows)."""
    rng = np.random.default_rng(i)
    ids = i * rows + np.arange(rows, dtype=np.int64)
    again = rng.random(rows) < 0.2
    ids[again] = rng.integers(0, max(1, i * rows), int(again.sum())) if i else ids[again]
    return pa.table(
        {
            "order_id": ids,
            "user_id": rng.integers(0, 100_000, rows),
            "status": STATUSES[rng.integers(0, len(STATUSES), rows)],
            "price": rng.random(rows) * 500,
            "qty": rng.integers(1, 10, rows, dtype=np.int32),
            "region": REGIONS[rng.integers(0, len(REGIONS), rows)],
            "note": np.char.add("order note ", rng.integers(0, 1000, rows).astype(str)),
            "dt": np.array(["2026-01-01", "2026-01-02"])[rng.integers(0, 2, rows)],
        },
        schema=ORDERS,
    )


def streaming_throughput(spark, batches: int, rows: int) -> dict[str, float]:
    """Seconds of each sink's availableNow query over the same input files: the second of two
    queries per sink, each on a fresh checkpoint and table (the first warms Spark up)."""
    from lakehouse import Catalog
    from lakehouse.spark import write_stream
    from lakehouse.spark.types import spark_schema_of_arrow

    work = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    source = work / "input"
    source.mkdir()
    for i in range(batches):
        pq.write_table(batch(i, rows), source / f"part-{i:05d}.parquet")
    catalog = Catalog(str(work / "warehouse"))
    catalog.create_database("db")

    def run(name: str, sink) -> float:
        frame = spark.readStream.schema(spark_schema_of_arrow(ORDERS)).option("maxFilesPerTrigger", 1)
        query = sink(frame.parquet(str(source))).option("checkpointLocation", str(work / f"cp-{name}"))
        start = time.perf_counter()
        query.trigger(availableNow=True).start().awaitTermination()
        return time.perf_counter() - start

    def paimon(name: str, **layout) -> float:
        catalog.create_table(f"db.{name}", ORDERS, partition_keys=["dt"], **layout)
        return run(name, lambda f: write_stream(f, f"db.{name}", warehouse=catalog.warehouse))

    timings = {}
    for attempt in (1, 2):
        native = work / f"out-{attempt}"
        timings = {
            "native parquet sink": run(
                f"parquet-{attempt}",
                lambda f, out=native: f.writeStream.format("parquet").option("path", str(out)),
            ),  # fmt: skip
            "paimon append table": paimon(f"append_{attempt}"),
            "paimon primary-key table": paimon(
                f"pk_{attempt}", primary_keys=["order_id", "dt"], options={"bucket": "4"}
            ),  # fmt: skip
        }
    assert catalog.get_table("db.append_2").read(columns=["order_id"]).num_rows == batches * rows
    return timings


def incremental_vs_full(warehouse: str, day: str) -> tuple[float, float, int]:
    """Seconds of the incremental job recomputing one day in full, then after 1% late events
    (each the second of two such runs: the first warms Spark's workers up); and the late
    events' count."""
    from assets.definitions import PIPELINE, defs
    from assets.demo import dagster_instance, log_config
    from assets.events import late_events
    from assets.orders import TABLES
    from dagster_lakehouse.definitions import INCREMENTAL
    from dagster_lakehouse.resources import LakehouseResource, SparkResource
    from lakehouse import Catalog

    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    instance = dagster_instance()

    def run(job: str) -> float:
        start = time.perf_counter()
        result = defs.resolve_job_def(job).execute_in_process(
            partition_key=day, instance=instance, resources=resources, run_config=log_config("WARNING")
        )
        assert result.success
        return time.perf_counter() - start

    run(PIPELINE)
    catalog = Catalog(warehouse)
    for _ in range(2):
        for spec in TABLES:
            if spec.incremental:
                catalog.drop_table(spec.name)
        full = run(INCREMENTAL)
    for batch in (1, 2):
        late = late_events(day, batch)
        catalog.get_table("ods.orders").write(late)
        incremental = run(INCREMENTAL)
    return full, incremental, late.num_rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-rows", type=int, default=100_000)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["LAKEHOUSE_EXAMPLE_ORDERS_PER_DAY"] = str(args.orders)  # before the example loads
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="bench-dagster-"))

    from assets import streaming
    from assets.events import recent_days
    from lakehouse.spark import session

    spark = session()
    rows = args.batches * args.batch_rows
    timings = streaming_throughput(spark, args.batches, args.batch_rows)
    native = timings["native parquet sink"]
    print(f"\nstreaming: {args.batches} micro-batches of {args.batch_rows:,} rows (availableNow)")
    print(f"  {'sink':<26} {'seconds':>8} {'rows/s':>10} {'vs native':>10}")
    for name, seconds in timings.items():
        print(f"  {name:<26} {seconds:>8.1f} {rows / seconds:>10,.0f} {native / seconds:>9.2f}x")

    day = recent_days(1)[0]
    warehouse = tempfile.mkdtemp(prefix="bench-example-")
    full, incremental, late = incremental_vs_full(warehouse, day)
    print(f"\nexample, {args.orders:,} orders a day: dwd.orders, dws.user_daily, dws.order_wide for {day}")
    print(f"  full recomputation       {full:6.1f} s")
    print(f"  incremental, 1% changed  {incremental:6.1f} s ({late:,} late events)  full / incremental "
          f"{full / incremental:.2f}x")  # fmt: skip

    rounds = streaming.main(args.rounds, 0.0, warehouse=warehouse)
    freshness = [r.freshness for r in rounds]
    print(f"\nend-to-end freshness (ods.orders commit -> dws.user_daily commit), {args.rounds} rounds: "
          f"median {statistics.median(freshness):.1f} s, max {max(freshness):.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
