"""Sensors over the warehouse's snapshot files.

- A snapshot sensor per table: the cursor is the last snapshot id seen. A new snapshot that
  Dagster did not commit (another Spark job, pypaimon, Flink) is recorded as an observation of
  the table's asset and, when it changed data, requests the downstream assets for the days it
  touched; run keys name the table, snapshot and day, so nothing runs twice.
- The compaction sensor: reads each primary-key table's LSM shape in its latest snapshot and
  requests a compaction run for exactly the partitions whose buckets universal compaction would
  pick (sorted runs, size amplification, size ratio, as the table's options set them).
"""

from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetObservation,
    AssetSelection,
    DailyPartitionsDefinition,
    DefaultSensorStatus,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from lakehouse import Table
from lakehouse.dagster.factory import COMMIT_USER_PREFIX
from lakehouse.dagster.maintenance import compact_job, compact_run_config
from lakehouse.dagster.metadata import partitions_touched
from lakehouse.dagster.resources import LakehouseResource
from lakehouse.dagster.spec import PARTITION_COLUMN, TableSpec
from lakehouse.errors import LakehouseError
from lakehouse.snapshot import CommitKind


def _table(lakehouse: LakehouseResource, name: str) -> Table | None:
    try:
        return lakehouse.table(name)
    except LakehouseError:
        return None  # not created yet


def snapshot_sensor(
    spec: TableSpec, downstream: Sequence[AssetKey], partitions: DailyPartitionsDefinition
) -> SensorDefinition:
    """Watch one table's snapshots for commits made outside Dagster."""

    @sensor(
        name=f"{spec.name.replace('.', '_')}_snapshots",
        minimum_interval_seconds=30,
        asset_selection=AssetSelection.assets(*downstream) if downstream else None,
        default_status=DefaultSensorStatus.RUNNING,
        description=f"New snapshots of {spec.name} committed outside Dagster",
    )
    def _sensor(context: SensorEvaluationContext, lakehouse: LakehouseResource):
        table = _table(lakehouse, spec.name)
        latest = table.latest_snapshot_id() if table is not None else None
        if latest is None:
            return SkipReason(f"{spec.name} has no snapshot yet")
        seen = int(context.cursor) if context.cursor else 0
        if latest <= seen:
            return SkipReason(f"no snapshot after {seen}")
        observations, requests = [], []
        known_days = set(partitions.get_partition_keys())
        for snapshot_id in range(seen + 1, latest + 1):
            if not table.snapshots.exists(snapshot_id):
                continue  # expired in between
            snap = table.snapshot(snapshot_id)
            if snap.commit_user.startswith(COMMIT_USER_PREFIX):
                continue
            touched = partitions_touched(table, snap)
            observations.append(
                AssetObservation(
                    spec.key,
                    metadata={
                        "snapshot_id": MetadataValue.int(snap.id),
                        "commit_user": MetadataValue.text(snap.commit_user),
                        "commit_kind": MetadataValue.text(snap.commit_kind.value),
                        "rows_changed": MetadataValue.int(snap.delta_record_count),
                        "total_rows": MetadataValue.int(snap.total_record_count),
                        "partitions_touched": MetadataValue.json(touched),
                    },
                )
            )
            if snap.commit_kind == CommitKind.COMPACT or not downstream:
                continue
            days = sorted({str(p.get(PARTITION_COLUMN)) for p in touched} & known_days)
            tags = {"table": spec.name, "snapshot": str(snap.id)}
            for day in days:
                requests.append(RunRequest(f"{spec.name}:{snap.id}:{day}", partition_key=day, tags=tags))
        return SensorResult(run_requests=requests, asset_events=observations, cursor=str(latest))

    return _sensor


def compaction_sensor(specs: Sequence[TableSpec]) -> SensorDefinition:
    """Request compactions of the partitions whose LSM trees are over their table's thresholds."""
    keyed = [s for s in specs if s.primary_keys]

    @sensor(
        name="compaction_sensor",
        job=compact_job,
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING,
        description="Compacts the partitions whose buckets universal compaction would pick",
    )
    def _sensor(context: SensorEvaluationContext, lakehouse: LakehouseResource):
        requests = []
        for spec in keyed:
            table = _table(lakehouse, spec.name)
            if table is None or table.latest_snapshot_id() is None:
                continue
            due = [s for s in table.lsm_shape() if s.needs_compaction]
            if not due:
                continue
            partitions = list({str(s.partition): s.partition for s in due}.values())
            requests.append(
                RunRequest(
                    run_key=f"compact:{spec.name}:{table.latest_snapshot_id()}",
                    run_config=compact_run_config(spec.name, partitions),
                    tags={"table": spec.name, "buckets_due": str(len(due))},
                )
            )
        return requests or SkipReason("every LSM tree is within its thresholds")

    return _sensor
