"""``make demo``: the example lakehouse from scratch, run by Dagster on the embedded local warehouse.

Drops the example tables, materializes the whole graph (with its asset checks) for a few days
through the pipeline job, runs one round of maintenance (compaction of every primary-key table,
the file-index rewrite of ``dwd.orders``, snapshot expiration and orphan cleanup), then prints
a summary. Runs are recorded in ``$DAGSTER_HOME`` (SQLite), so ``make dev`` shows them.
"""

import argparse
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from dagster import DagsterInstance, ExecuteInProcessResult

from assets.definitions import PIPELINE, defs
from assets.events import recent_days
from assets.orders import TABLES
from lakehouse import Catalog
from resources import default_warehouse

DAYS = 3  # the days up to yesterday, the latest partitions (the UI's default window shows them)
MAINTENANCE = ("compact_job", "rewrite_index_job", "expire_job")
INSTANCE = Path(__file__).resolve().parents[1] / "dagster.yaml"  # the instance settings make dev uses


def _instance() -> DagsterInstance:
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path(".dagster_home").resolve())))
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():  # the instance make dev runs
        shutil.copyfile(INSTANCE, settings)
    return DagsterInstance.get()


def _timed(label: str, run: Callable[[], ExecuteInProcessResult]) -> ExecuteInProcessResult:
    start = time.perf_counter()
    result = run()
    status = "ok" if result.success else "FAILED"
    print(f"  {label:<44} {status} in {time.perf_counter() - start:5.1f} s")
    if not result.success:
        raise SystemExit(f"{label} failed; see the run in the Dagster UI (make dev)")
    return result


def main(days: int = DAYS) -> None:
    warehouse = default_warehouse()
    catalog = Catalog(warehouse)
    for spec in TABLES:
        catalog.drop_table(spec.name, ignore_if_not_exists=True)
    instance = _instance()
    where = warehouse if "://" in warehouse else os.path.abspath(warehouse)
    print(f"warehouse {where}, DAGSTER_HOME {os.environ['DAGSTER_HOME']}")
    pipeline = defs.resolve_job_def(PIPELINE)
    checks: dict[str, bool] = {}
    for day in recent_days(days):
        run = _timed(
            f"materialize every table for {day}",
            lambda d=day: pipeline.execute_in_process(partition_key=d, instance=instance),
        )
        for evaluation in run.get_asset_check_evaluations():
            name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
            checks[name] = checks.get(name, True) and evaluation.passed
    resources = dict(defs.resources)
    compact_job, rewrite_index_job, expire_job = (defs.resolve_job_def(j) for j in MAINTENANCE)
    for spec in TABLES:
        if spec.primary_keys:
            config = {"ops": {"compact_table": {"config": {"table": spec.name, "full": True}}}}
            _timed(f"full compaction of {spec.name}", lambda c=config: compact_job.execute_in_process(
                run_config=c, instance=instance, resources=resources))  # fmt: skip
    config = {"ops": {"rewrite_file_index": {"config": {"table": "dwd.orders"}}}}
    _timed("file-index rewrite of dwd.orders", lambda: rewrite_index_job.execute_in_process(
        run_config=config, instance=instance, resources=resources))  # fmt: skip
    _timed("snapshot expiration and orphan cleanup", lambda: expire_job.execute_in_process(
        instance=instance, resources=resources))  # fmt: skip

    print(f"\n{'table':<16} {'snapshots':>9} {'rows':>7} {'files':>6}")
    for spec in TABLES:
        table = catalog.get_table(spec.name)
        snapshots, rows = len(table.snapshots.snapshot_ids()), table.read().num_rows
        print(f"{spec.name:<16} {snapshots:>9} {rows:>7} {len(table.live_entries()):>6}")
    print(f"\nsteps of the {day} run")
    for stat in instance.get_run_step_stats(run.run_id):
        if stat.end_time is not None and stat.start_time is not None:
            print(f"  {stat.step_key:<40} {stat.end_time - stat.start_time:5.1f} s")
    print("\nchecks")
    for name, passed in sorted(checks.items()):
        print(f"  {name:<40} {'passed' if passed else 'FAILED'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=DAYS, choices=range(1, 31))
    main(parser.parse_args().days)
