"""``make stream``: the example lakehouse run continuously, and how fresh it stays.

Rounds of late order events land in ``ods.orders`` (commits of the source system, as a CDC feed
would make them); after each, the incremental job (``dwd.orders`` with its checks and publish,
then ``dws.user_daily`` and ``dws.order_wide``) reads only what changed and commits. Each round
prints the end-to-end freshness: seconds from the events' commit to ``ods.orders`` to
``dws.user_daily``'s commit holding them. In a deployment the snapshot sensor of ``ods.orders``
launches the same runs as foreign commits land (``make dev``, sensors on).

Runs on the embedded warehouse after ``make demo`` (it materializes yesterday first if the example
tables are missing); runs are recorded in ``$DAGSTER_HOME``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

from assets.definitions import PIPELINE, defs
from assets.demo import dagster_instance, log_config
from assets.events import late_events, recent_days
from dagster_lakehouse.definitions import INCREMENTAL
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from lakehouse import Catalog, col
from resources import default_warehouse


@dataclass(frozen=True)
class Round:
    """One round: the events landed, the rows the incremental tables wrote, how fresh they are."""

    events: int
    rows_written: dict[str, int]
    seconds: float  # the incremental run, launch to finish
    freshness: float  # the events' ods.orders commit to dws.user_daily's commit


def land_and_propagate(catalog: Catalog, day: str, batch: int, run) -> Round:
    """Land late batch ``batch`` of ``day`` in ``ods.orders`` and run the incremental job
    (``run(day)``); how fresh ``dws.user_daily`` is once it has them."""
    ods = catalog.get_table("ods.orders")
    events = late_events(day, batch)
    landed = ods.snapshot(ods.write(events)).time_millis
    start = time.perf_counter()
    result = run(day)
    seconds = time.perf_counter() - start
    if not result.success:
        raise SystemExit(f"the incremental run for {day} failed; see it in the Dagster UI (make dev)")
    written = {
        e.materialization.asset_key.to_user_string(): e.materialization.metadata["rows_written"].value
        for e in result.get_asset_materialization_events()
    }
    visible = catalog.get_table("dws.user_daily").snapshot().time_millis
    return Round(events.num_rows, written, seconds, (visible - landed) / 1000)


def main(rounds: int, pause: float, log_level: str = "WARNING", warehouse: str | None = None) -> list[Round]:
    """``rounds`` rounds ``pause`` seconds apart on ``warehouse`` (default: the embedded one)."""
    warehouse = warehouse or default_warehouse()
    catalog, instance, logs = Catalog(warehouse), dagster_instance(), log_config(log_level)
    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    day = recent_days(1)[0]

    def run(job: str, d: str):
        return defs.resolve_job_def(job).execute_in_process(
            partition_key=d, instance=instance, run_config=logs, resources=resources
        )

    ods = catalog.get_table("ods.orders") if catalog.table_exists("dws.user_daily") else None
    if ods is None or not ods.read(columns=["event_id"], filter=col("dt") == day).num_rows:
        print(f"materializing every table for {day} first")
        run(PIPELINE, day)

    done = []
    first = catalog.get_table("ods.orders").latest_snapshot_id() or 0  # batches never repeat
    print(f"{'round':>5} {'events':>7} {'dwd rows':>9} {'dws rows':>9} {'run s':>6} {'freshness s':>12}")
    for i in range(rounds):
        r = land_and_propagate(catalog, day, first + i, lambda d: run(INCREMENTAL, d))
        done.append(r)
        dwd, dws = (r.rows_written.get(k, 0) for k in ("dwd/orders", "dws/user_daily"))
        print(f"{i + 1:>5} {r.events:>7} {dwd:>9} {dws:>9} {r.seconds:>6.1f} {r.freshness:>12.1f}")
        time.sleep(pause)
    print(f"median freshness {statistics.median(r.freshness for r in done):.1f} s over {rounds} rounds")
    return done


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between rounds")
    parser.add_argument("--log-level", default="WARNING", help="Dagster's console log level (e.g. DEBUG)")
    args = parser.parse_args()
    main(args.rounds, args.pause, args.log_level)
