"""A ``Definitions`` object for a set of table specs: the tables as assets with their checks (and
freshness policies where a spec gives a deadline), the pipeline job and its daily schedule, or
declarative automation in its place, the maintenance jobs and the nightly expiration, the snapshot
and compaction sensors, and the resources; every run executes in one process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DailyPartitionsDefinition,
    DefaultSensorStatus,
    Definitions,
    ScheduleDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
)

from dagster_lakehouse.checks import table_checks
from dagster_lakehouse.factory import table_asset
from dagster_lakehouse.maintenance import maintenance_jobs
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.sensors import compaction_sensor, snapshot_sensor
from dagster_lakehouse.spec import TableSpec
from lakehouse.errors import InvalidArgumentError

PIPELINE = "lakehouse_pipeline"
INCREMENTAL = "lakehouse_incremental"  # the incremental tables (and their checks): what changes feed
AUTOMATION = "lakehouse_automation"


def build_definitions(
    specs: Sequence[TableSpec],
    partitions: DailyPartitionsDefinition,
    resources: Mapping[str, Any] | None = None,
) -> Definitions:
    """Assets, checks, jobs, schedules and sensors for a set of table specs; ``resources``
    (default: a ``LakehouseResource`` and a ``SparkResource``) under the keys ``lakehouse`` and
    ``spark``."""
    return Definitions.merge(
        table_definitions(specs, partitions),
        operations_definitions(specs),
        Definitions(
            resources=dict(resources or {"lakehouse": LakehouseResource(), "spark": SparkResource()}),
            # every job, the asset jobs of backfills and UI launches included, runs its steps in
            # one process: they share one Spark session (or Spark Connect client) per run
            executor=in_process_executor,
        ),
    )


def table_definitions(
    specs: Sequence[TableSpec], partitions: DailyPartitionsDefinition | None
) -> Definitions:
    """The tables' assets and their checks (``partitions``: those of the daily tables)."""
    if partitions is None and any(s.daily for s in specs):
        raise InvalidArgumentError(
            f"tables {[s.name for s in specs if s.daily]} have daily partitions: give their first day"
        )
    return Definitions(
        assets=[table_asset(s, partitions) for s in specs],
        asset_checks=[c for s in specs for c in table_checks(s, partitions)],
    )


def operations_definitions(specs: Sequence[TableSpec], pipeline: bool = True) -> Definitions:
    """What runs the tables: the maintenance jobs and the nightly expiration, the snapshot and
    compaction sensors and, with ``pipeline``, the job of every asset with its daily schedule, a
    job of the incremental tables and the declarative-automation sensor."""
    maintenance = maintenance_jobs([s.name for s in specs])
    downstream = {s.name: [d.key for d in specs if s.name in d.upstream] for s in specs}
    jobs: list[Any] = [*maintenance]
    schedules: list[Any] = [
        ScheduleDefinition(name="nightly_expiration", job=maintenance.expire, cron_schedule="0 3 * * *")
    ]
    sensors: list[Any] = [
        *(snapshot_sensor(s, downstream[s.name]) for s in specs),
        compaction_sensor(specs, maintenance.compact),
    ]
    if pipeline:
        job = define_asset_job(PIPELINE, selection=AssetSelection.all())
        incremental = [s.key for s in specs if s.incremental]
        if incremental:
            jobs.append(define_asset_job(INCREMENTAL, selection=AssetSelection.assets(*incremental)))
        jobs.append(job)
        if any(s.daily for s in specs):
            schedules.append(build_schedule_from_partitioned_job(job, hour_of_day=1))
        sensors.append(
            AutomationConditionSensorDefinition(
                AUTOMATION,
                target=AssetSelection.all(),
                default_status=DefaultSensorStatus.STOPPED,
                description="Declarative automation instead of the daily schedule: the source layer on "
                "cron, every other table once the days it reads are fresh (start one of the two)",
            )  # fmt: skip
        )
    return Definitions(jobs=jobs, schedules=schedules, sensors=sensors)
