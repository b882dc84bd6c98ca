"""Table specs to Dagster definitions: one asset per table, materialized by a PySpark job that
reads the upstream tables through the ``paimon`` data source and writes through the engine's
Spark write path (one commit; a compaction may follow as its own snapshot)."""

from datetime import timedelta
from typing import TYPE_CHECKING

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AutomationCondition,
    BackfillPolicy,
    DailyPartitionsDefinition,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    TableColumnDep,
    TableColumnLineage,
    asset,
)

from dagster_lakehouse.incremental import (
    Commit,
    Increment,
    incremental_user,
    plan_increment,
    record_consumers,
)
from dagster_lakehouse.lineage import column_lineage
from dagster_lakehouse.metadata import (
    COLUMN_LINEAGE,
    TABLE_NAME,
    definition_metadata,
    partition_metadata,
    run_commits,
    run_metadata,
)
from dagster_lakehouse.pipes import SparkSubmitPipes, check_submittable, step_extras
from dagster_lakehouse.pipes_step import LINEAGE
from dagster_lakehouse.publish import Publish, audit_branch, open_audit
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.spark_logs import spark_logs
from dagster_lakehouse.spec import PARTITION_COLUMN, Inputs, TableSpec, asset_key
from lakehouse import Overwrite, Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BRANCH = "branch"  # metadata: the audit branch a materialization wrote
COMMIT_USER_PREFIX = "dagster"  # snapshots Dagster commits; the snapshot sensors skip them
DAILY_CRON = "0 1 * * *"  # the pipeline's hour: yesterday's events are complete by then
FRESH_WINDOW = timedelta(days=1)


def commit_user(run_id: str) -> str:
    return f"{COMMIT_USER_PREFIX}-{run_id}"


def materialization_user(spec: TableSpec, run_id: str) -> str:
    """Who commits a spec's materialization: the run, or for an incremental table the one commit
    user of all its incremental commits (their identifiers then make each commit land once)."""
    return incremental_user(spec.name) if spec.incremental else commit_user(run_id)


def automation_condition(spec: TableSpec) -> AutomationCondition:
    """Declarative automation, the alternative to the daily schedule: tables without upstream
    tables (the source layer) on the pipeline's cron, every other table as soon as the days it
    reads are fresh."""
    return AutomationCondition.eager() if spec.upstream else AutomationCondition.on_cron(DAILY_CRON)


def freshness_policy(spec: TableSpec) -> FreshnessPolicy | None:
    """A spec's ``fresh_by`` deadline: materialized within the day before each deadline."""
    if spec.fresh_by is None:
        return None
    return FreshnessPolicy.cron(deadline_cron=spec.fresh_by, lower_bound_delta=FRESH_WINDOW)


def table_asset(spec: TableSpec, partitions: DailyPartitionsDefinition | None) -> AssetsDefinition:
    """The asset of one table; daily partitions write the table's ``dt`` partition of that day. A
    backfill is one run (single-run backfill policy) that reads the upstream days of its range and
    writes them in one Spark job and one commit. A ``pipes`` spec's Spark step runs on a cluster
    through the ``pipes`` resource (:mod:`dagster_lakehouse.pipes`)."""
    decorate = asset(
        key=spec.key,
        deps=[asset_key(u) for u in spec.upstream],
        partitions_def=partitions if spec.daily else None,
        backfill_policy=BackfillPolicy.single_run() if spec.daily else None,
        group_name=spec.name.split(".")[0],
        kinds={"paimon", "spark"},
        description=spec.description,
        owners=list(spec.owners),
        automation_condition=automation_condition(spec),
        freshness_policy=freshness_policy(spec),
        metadata=definition_metadata(spec.name, spec.table_schema),
    )

    def _asset(context: AssetExecutionContext, lakehouse: LakehouseResource, spark: SparkResource):
        from lakehouse.spark import write

        catalog = lakehouse.catalog()
        table = spec.ensure(catalog)
        days = tuple(context.partition_keys) if spec.daily else None
        storage = lakehouse.storage()
        increment = (
            plan_increment(catalog, spec.name, spec.upstream, PARTITION_COLUMN) if spec.incremental else None
        )
        target, audit = spec.name, {}
        if spec.publish is Publish.AUDITED:  # written to the run's branch; its checks publish it
            branch = audit_branch(context.run.run_id)
            table = open_audit(table, branch)
            target = f"{spec.name}$branch_{branch}"
            audit = {BRANCH: MetadataValue.text(branch), TABLE_NAME: MetadataValue.text(spec.name)}
        before = table.latest_snapshot_id() or 0
        user = materialization_user(spec, context.run.run_id)
        inputs = Inputs(spark.spark_session, days, lakehouse.warehouse, storage, spec.name, increment)
        with spark_logs(context.log, spark.spark_session):
            frame = spec.transform(inputs)
            lineage = column_lineage(frame, [(asset_key(t), f) for t, f in inputs.reads if t != spec.name])
            if increment is None:
                mode = "overwrite" if spec.write == "overwrite" else "append"
                write(
                    frame, target, mode=mode, warehouse=lakehouse.warehouse, options=storage, commit_user=user
                )
            else:
                for part, overwrite, commit in _incremental_writes(frame, increment, context.run.run_id):
                    write(part, target, warehouse=lakehouse.warehouse, options=storage, overwrite=overwrite,
                          commit_user=commit.user, commit_identifier=commit.identifier,
                          commit_properties=commit.properties)  # fmt: skip
                record_consumers(catalog, increment)
        progress = _increment_metadata(increment) if increment is not None else {}
        return _materialized(context, table.refresh(), days, user, before, lineage, {**audit, **progress})

    def _pipes_asset(context: AssetExecutionContext, lakehouse: LakehouseResource, pipes: SparkSubmitPipes):
        table = spec.ensure(lakehouse.catalog())
        days = tuple(context.partition_keys) if spec.daily else None
        before = table.latest_snapshot_id() or 0
        user = materialization_user(spec, context.run.run_id)
        extras = step_extras(spec, days, lakehouse.warehouse, lakehouse.storage(), user)
        reported = pipes.run(context, extras).get_materialize_result().metadata or {}
        traced = getattr(reported.get(LINEAGE), "value", None) or {}
        lineage = TableColumnLineage(
            deps_by_column={
                column: [
                    TableColumnDep(asset_key=AssetKey.from_user_string(k), column_name=n) for k, n in deps
                ]
                for column, deps in traced.items()
            }
        )
        return _materialized(context, table.refresh(), days, user, before, lineage, {})

    if spec.pipes:
        check_submittable(spec)
        return decorate(_pipes_asset)
    return decorate(_asset)


def _materialized(
    context: AssetExecutionContext,
    table: Table,
    days: tuple[str, ...] | None,
    user: str,
    before: int,
    lineage: TableColumnLineage,
    extra: dict[str, MetadataValue],
) -> MaterializeResult:
    """What a materialization reports: the run's commits to the table (after snapshot
    ``before``, as ``user``), per day and in all, and the column ``lineage``."""
    run = run_commits(table, user, before)  # the days' rows and the table's, counted once
    for day, metadata in partition_metadata(table, days or (), user, before, run).items():
        context.add_asset_metadata(metadata, partition_key=day)
    traced = {COLUMN_LINEAGE: MetadataValue.column_lineage(lineage)} if lineage.deps_by_column else {}
    return MaterializeResult(metadata={**run_metadata(table, user, before, run), **extra, **traced})


def _incremental_writes(
    frame: "DataFrame", increment: Increment, run_id: str
) -> list[tuple["DataFrame", Overwrite, Commit]]:
    """The writes of an incremental run, in order: in a full run the frame replacing the table;
    else the frame's rows of replaced days replacing those days (as the run), then its other
    rows upserted - the commit that records the positions, exactly once."""
    from lakehouse.spark import functions_for

    if increment.full:
        return [(frame, True, increment.commit)]
    replaced = list(increment.replaced)
    if not replaced:
        return [(frame, None, increment.commit)]
    days = functions_for(frame).col(PARTITION_COLUMN).isin(replaced)
    partitions = [{PARTITION_COLUMN: d} for d in replaced]
    return [
        (frame.where(days), partitions, Commit(commit_user(run_id))),
        (frame.where(~days), None, increment.commit),
    ]


def _increment_metadata(increment: Increment) -> dict[str, MetadataValue]:
    """What an incremental run read: full or changes, and from which snapshot of each upstream."""
    out: dict[str, MetadataValue] = {
        "incremental": MetadataValue.text("full" if increment.full else "changes")
    }
    for name, p in increment.positions.items():
        out[f"{name} snapshots"] = MetadataValue.text(f"{p.start or 0}..{p.end}")
    if increment.replaced:
        out["replaced_days"] = MetadataValue.text(", ".join(increment.replaced))
    return out
