"""Table specs to Dagster definitions: one asset per table, materialized by a PySpark job that
reads the upstream tables through the ``paimon`` data source and writes through the engine's
Spark write path (one commit; a compaction may follow as its own snapshot)."""

from datetime import timedelta

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AutomationCondition,
    BackfillPolicy,
    DailyPartitionsDefinition,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    asset,
)

from lakehouse.dagster.metadata import TABLE_NAME, definition_metadata, partition_metadata, run_metadata
from lakehouse.dagster.publish import Publish, audit_branch, open_audit
from lakehouse.dagster.resources import LakehouseResource, SparkResource
from lakehouse.dagster.spark_logs import spark_logs
from lakehouse.dagster.spec import Inputs, TableSpec, asset_key

BRANCH = "branch"  # metadata: the audit branch a materialization wrote
COMMIT_USER_PREFIX = "dagster"  # snapshots Dagster commits; the snapshot sensors skip them
DAILY_CRON = "0 1 * * *"  # the pipeline's hour: yesterday's events are complete by then
FRESH_WINDOW = timedelta(days=1)


def commit_user(run_id: str) -> str:
    return f"{COMMIT_USER_PREFIX}-{run_id}"


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


def table_asset(spec: TableSpec, partitions: DailyPartitionsDefinition) -> AssetsDefinition:
    """The asset of one table; daily partitions write the table's ``dt`` partition of that day. A
    backfill is one run (single-run backfill policy) that reads the upstream days of its range and
    writes them in one Spark job and one commit."""

    @asset(
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

        table = spec.ensure(lakehouse.catalog())
        days = tuple(context.partition_keys) if spec.daily else None
        storage = lakehouse.storage()
        target, audit = spec.name, {}
        if spec.publish is Publish.AUDITED:  # written to the run's branch; its checks publish it
            branch = audit_branch(context.run.run_id)
            table = open_audit(table, branch)
            target = f"{spec.name}$branch_{branch}"
            audit = {BRANCH: MetadataValue.text(branch), TABLE_NAME: MetadataValue.text(spec.name)}
        before = table.latest_snapshot_id() or 0
        mode = "overwrite" if spec.write == "overwrite" else "append"
        user = commit_user(context.run.run_id)
        with spark_logs(context.log, spark.spark_session):
            frame = spec.transform(Inputs(spark.spark_session, days, lakehouse.warehouse, storage))
            write(frame, target, mode=mode, warehouse=lakehouse.warehouse,
                  options={**storage, "commit.user": user})  # fmt: skip
        table = table.refresh()
        for day, metadata in partition_metadata(table, days or (), user, before).items():
            context.add_asset_metadata(metadata, partition_key=day)
        return MaterializeResult(metadata={**run_metadata(table, user, before), **audit})

    return _asset
