"""Sensors over the warehouse's snapshot files.

- A snapshot sensor per table: the cursor is the last snapshot id seen. A new snapshot that
  Dagster did not commit (another Spark job, pypaimon, Flink; Dagster's runs and maintenance
  commit as ``dagster-<run id>``) is recorded as an observation of the table's asset and, when
  it changed data, requests every asset downstream of it - transitively, through the asset
  graph's partition mappings - for the days it touched, one run per day; run keys name the
  table, snapshots and day, so nothing runs twice.
- The compaction sensor: reads each table's shape in its latest snapshot and requests a
  compaction run for exactly the partitions whose buckets need it: primary-key buckets that
  universal compaction would pick (sorted runs, size amplification, size ratio, as the table's
  options set them), append buckets with small files that append compaction would pick (at least
  ``compaction.min.file-num`` of them).
"""

from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetObservation,
    AssetSelection,
    DefaultSensorStatus,
    JobDefinition,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

# the graph a sensor's repository resolves: how a partition of one table maps to partitions of
# every table downstream
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph

from dagster_lakehouse.factory import COMMIT_USER_PREFIX
from dagster_lakehouse.maintenance import compact_run_config
from dagster_lakehouse.metadata import partitions_touched
from dagster_lakehouse.resources import LakehouseResource
from dagster_lakehouse.spec import PARTITION_COLUMN, TableSpec
from lakehouse import CommitKind, Snapshot, Table
from lakehouse.errors import LakehouseError


def _table(lakehouse: LakehouseResource, name: str) -> Table | None:
    try:
        return lakehouse.table(name)
    except LakehouseError:
        return None  # not created yet


def snapshot_sensor(spec: TableSpec, children: Sequence[AssetKey]) -> SensorDefinition:
    """Watch one table's snapshots for commits made outside Dagster."""

    @sensor(
        name=f"{spec.name.replace('.', '_')}_snapshots",
        minimum_interval_seconds=30,
        asset_selection=AssetSelection.assets(*children).downstream() if children else None,
        default_status=DefaultSensorStatus.RUNNING,
        description=f"New snapshots of {spec.name} committed outside Dagster: every downstream table "
        "is refreshed for the days they touched",
    )
    def _sensor(context: SensorEvaluationContext, lakehouse: LakehouseResource):
        table = _table(lakehouse, spec.name)
        latest = table.latest_snapshot_id() if table is not None else None
        if table is None or latest is None:
            return SkipReason(f"{spec.name} has no snapshot yet")
        seen = int(context.cursor) if context.cursor else 0
        if latest <= seen:
            return SkipReason(f"no snapshot after {seen}")
        foreign = [  # of those not expired in between
            snap
            for snap in table.list_snapshots(after=seen)
            if not snap.commit_user.startswith(COMMIT_USER_PREFIX)
        ]
        if not foreign:
            return SensorResult(
                skip_reason=f"snapshots {seen + 1}..{latest} were Dagster's own", cursor=str(latest)
            )
        observations: list[AssetObservation] = []
        days: set[str | None] = set()
        for snap in foreign:
            touched = partitions_touched(table, snap)
            observations.append(_observation(spec, snap, touched))
            if snap.commit_kind != CommitKind.COMPACT:
                days |= {str(p.get(PARTITION_COLUMN)) for p in touched} if spec.daily else {None}
        ids = f"{foreign[0].id}..{foreign[-1].id}"
        requests: list[RunRequest] = []
        if children:
            assert context.repository_def is not None  # Dagster runs a sensor with its code location's
            requests = _refreshes(context.repository_def.asset_graph, spec, days, ids)
        reason = (
            None if requests else f"recorded snapshots {ids} of {spec.name}: nothing downstream to refresh"
        )
        return SensorResult(run_requests=requests, asset_events=observations, cursor=str(latest),
                            skip_reason=reason)  # fmt: skip

    return _sensor


def _observation(spec: TableSpec, snap: Snapshot, touched: list[dict]) -> AssetObservation:
    """A foreign snapshot as an observation of the table's asset."""
    return AssetObservation(
        spec.key,
        metadata={
            "snapshot_id": MetadataValue.int(snap.id),
            "commit_user": MetadataValue.text(snap.commit_user),
            "commit_kind": MetadataValue.text(snap.commit_kind.value),
            "rows_changed": MetadataValue.int(snap.delta_record_count),
            "partitions_touched": MetadataValue.json(touched),
        },
    )


def _refreshes(graph: BaseAssetGraph, spec: TableSpec, days: set[str | None], ids: str) -> list[RunRequest]:
    """One run per downstream partition key: every asset downstream of the table (transitively,
    through the graph's partition mappings) that depends on the touched days."""
    known = set(graph.get(spec.key).partitions_def.get_partition_keys()) if spec.daily else None
    touched = [d for d in days if known is None or d in known]
    frontier = {c for d in touched for c in graph.get_children_partitions(spec.key, d)}
    reached = set(frontier)
    while frontier:
        found = {c for p in frontier for c in graph.get_children_partitions(p.asset_key, p.partition_key)}
        frontier = found - reached
        reached |= found
    by_partition: dict[str | None, set[AssetKey]] = {}
    for p in reached:
        by_partition.setdefault(p.partition_key, set()).add(p.asset_key)
    tags = {"table": spec.name, "snapshots": ids}
    return [
        RunRequest(
            f"{spec.name}:{ids}:{key}", asset_selection=sorted(keys, key=str), partition_key=key, tags=tags
        )
        for key, keys in sorted(by_partition.items(), key=lambda kv: str(kv[0]))
    ]


def compaction_sensor(specs: Sequence[TableSpec], compact_job: JobDefinition) -> SensorDefinition:
    """Request compactions of the partitions whose buckets are over their table's thresholds."""

    @sensor(
        name="compaction_sensor",
        job=compact_job,
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING,
        description="Compacts the partitions whose buckets universal compaction would pick, and those "
        "of append tables with too many small files",
    )
    def _sensor(context: SensorEvaluationContext, lakehouse: LakehouseResource):
        requests = []
        for spec in specs:
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
        return requests or SkipReason("every bucket is within its table's compaction thresholds")

    return _sensor
