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
import warnings
from collections.abc import Callable
from pathlib import Path

from dagster import BetaWarning, DagsterInstance, ExecuteInProcessResult, PreviewWarning

# the definitions use Dagster features it labels beta or preview (single-run backfills, partitioned
# checks) on purpose: the demo does not repeat that on every start
warnings.filterwarnings("ignore", category=BetaWarning)
warnings.filterwarnings("ignore", category=PreviewWarning)

from assets.definitions import PIPELINE, defs  # noqa: E402 - after the warning filters
from assets.events import recent_days  # noqa: E402 - after the warning filters
from assets.orders import TABLES  # noqa: E402 - after the warning filters
from lakehouse import Catalog  # noqa: E402 - after the warning filters
from resources import default_warehouse  # noqa: E402 - after the warning filters

DAYS = 3  # the days up to yesterday, the latest partitions (the UI's default window shows them)
MAINTENANCE = ("compact_job", "rewrite_index_job", "expire_job")
INSTANCE = Path(__file__).resolve().parents[1] / "dagster.yaml"  # the instance settings make dev uses


def dagster_instance() -> DagsterInstance:
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


def log_config(level: str) -> dict:
    """Run config of Dagster's console logger (its DEBUG events are in the UI either way)."""
    return {"loggers": {"console": {"config": {"log_level": level}}}}


def main(days: int = DAYS, log_level: str = "WARNING") -> None:
    warehouse = default_warehouse()
    catalog = Catalog(warehouse)
    for spec in TABLES:
        catalog.drop_table(spec.name, ignore_if_not_exists=True)
    instance = dagster_instance()
    where = warehouse if "://" in warehouse else os.path.abspath(warehouse)
    print(f"warehouse {where}, DAGSTER_HOME {os.environ['DAGSTER_HOME']}")
    pipeline, logs = defs.resolve_job_def(PIPELINE), log_config(log_level)
    checks: dict[str, bool] = {}
    for day in recent_days(days):
        run = _timed(
            f"materialize every table for {day}",
            lambda d=day: pipeline.execute_in_process(partition_key=d, instance=instance, run_config=logs),
        )
        for evaluation in run.get_asset_check_evaluations():
            name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
            checks[name] = checks.get(name, True) and evaluation.passed
    resources = dict(defs.resources)
    compact_job, rewrite_index_job, expire_job = (defs.resolve_job_def(j) for j in MAINTENANCE)
    for spec in TABLES:
        if spec.primary_keys:
            config = {"ops": {"compact_table": {"config": {"table": spec.name, "full": True}}}, **logs}
            _timed(f"full compaction of {spec.name}", lambda c=config: compact_job.execute_in_process(
                run_config=c, instance=instance, resources=resources))  # fmt: skip
    config = {"ops": {"rewrite_file_index": {"config": {"table": "dwd.orders"}}}, **logs}
    _timed("file-index rewrite of dwd.orders", lambda: rewrite_index_job.execute_in_process(
        run_config=config, instance=instance, resources=resources))  # fmt: skip
    _timed("snapshot expiration and orphan cleanup", lambda: expire_job.execute_in_process(
        run_config=logs, instance=instance, resources=resources))  # fmt: skip

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
    parser.add_argument("--log-level", default="WARNING", help="Dagster's console log level (e.g. DEBUG)")
    args = parser.parse_args()
    main(args.days, args.log_level)
