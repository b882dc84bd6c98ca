"""Maintenance as Dagster jobs, run through Spark over the storage-engine resource: compaction
(full or not, per table and partitions; primary-key and append tables), clustering of append
tables (``sort_compact``: order, z-order or Hilbert), file-index rewrites, and nightly the
expiration of old partitions (tables that set ``partition.expiration-time``), then snapshot
expiration and orphan-file cleanup. Each op reports what it did as metadata and records an observation on the
table's asset: the table's state in the series materializations share, what the op did in its
own. Their snapshots are committed as the run's commit user, like materializations, so the
snapshot sensors know them for Dagster's. The run config names tables from an enum of the known
tables, so the launchpad offers them and refuses a typo before the run starts."""

import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from dagster import (
    AssetObservation,
    Config,
    In,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Output,
    job,
    op,
)

from dagster_lakehouse.factory import commit_user
from dagster_lakehouse.metadata import table_metadata
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.spark_logs import spark_logs
from dagster_lakehouse.spec import asset_key
from lakehouse import Compaction, SortStrategy


def _observe(context: OpExecutionContext, lakehouse: LakehouseResource, table: str, did: dict[str, Any]):
    """Record on the table's asset what the op did and the table's state after it."""
    metadata = {**table_metadata(lakehouse.table(table)), **did}
    context.log_event(AssetObservation(asset_key(table), metadata=metadata))


def _ints(values: dict[str, int]) -> dict[str, MetadataValue]:
    return {k: MetadataValue.int(v) for k, v in values.items()}


def _compaction_metadata(done: Compaction) -> dict[str, MetadataValue]:
    return _ints(
        {
            "snapshot_id": done.snapshot_id or 0,
            "buckets_compacted": done.buckets,
            "files_rewritten": done.files_before,
            "files_written": done.files_after,
            "bytes_before": done.bytes_before,
            "bytes_after": done.bytes_after,
        }
    )


@dataclass(frozen=True)
class MaintenanceJobs:
    """The maintenance jobs of a set of tables."""

    compact: JobDefinition
    rewrite_index: JobDefinition
    expire: JobDefinition
    sort_compact: JobDefinition

    def __iter__(self) -> Iterator[JobDefinition]:
        return iter((self.compact, self.rewrite_index, self.expire, self.sort_compact))


def maintenance_jobs(tables: Sequence[str]) -> MaintenanceJobs:
    """Compaction, clustering, index-rewrite and expiration jobs over ``tables`` (``db.table`` names)."""
    # Dagster keeps config enums by name for the process: each table set gets its own name
    digest = hashlib.sha1("\n".join(sorted(tables)).encode()).hexdigest()[:8]
    # config types (N806), built at run time: mypy reads only Enum() calls that spell out their members
    members = {t: t for t in tables}
    TableName = Enum(f"TableName_{digest}", members, type=str)  # type: ignore[misc]  # noqa: N806

    class TableConfig(Config):
        table: TableName  # type: ignore[valid-type]
        partitions: list[dict[str, str]] | None = None  # None: every partition

    class CompactConfig(TableConfig):
        full: bool = False

    # Paimon's strategy names as the launchpad's choices (Dagster config enums go by member name)
    Strategy = Enum("Strategy", {s.value: s.value for s in SortStrategy}, type=str)  # type: ignore[misc]  # noqa: N806

    class SortCompactConfig(TableConfig):
        order_by: list[str]
        strategy: Strategy = Strategy(SortStrategy.ZORDER.value)  # type: ignore[valid-type]

    class TablesConfig(Config):
        tables: list[TableName] | None = None  # type: ignore[valid-type]  # None: every table

    class ExpireConfig(TablesConfig):
        orphan_min_age_ms: int | None = None  # orphan files younger than this stay (default one day)

    def chosen(config: TablesConfig, lakehouse: LakehouseResource) -> list[str]:
        """The tables a run config names, else every table of the warehouse."""
        if config.tables:
            return [t.value for t in config.tables]
        catalog = lakehouse.catalog()
        return [f"{db}.{t}" for db in catalog.list_databases() for t in catalog.list_tables(db)]

    @op(description="Compact a table's buckets (universal, or full) as a Spark job")
    def compact_table(context: OpExecutionContext, config: CompactConfig, lakehouse: LakehouseResource,
                      spark: SparkResource):  # fmt: skip
        from lakehouse.spark import compact

        table = config.table.value
        with spark_logs(context.log, spark.spark_session):
            done = compact(spark.spark_session, table, full=config.full, partitions=config.partitions,
                           warehouse=lakehouse.warehouse, options=lakehouse.storage(),
                           commit_user=commit_user(context.run_id))  # fmt: skip
        did = _compaction_metadata(done)
        _observe(context, lakehouse, table, did)
        return Output(did, metadata=did)

    @op(
        description="Cluster an append table: rewrite its partitions sorted by columns (order, z-order "
        "or Hilbert curve) as a Spark job"
    )
    def sort_compact_table(context: OpExecutionContext, config: SortCompactConfig,
                           lakehouse: LakehouseResource, spark: SparkResource):  # fmt: skip
        from lakehouse.spark import sort_compact

        table = config.table.value
        with spark_logs(context.log, spark.spark_session):
            done = sort_compact(spark.spark_session, table, config.order_by, config.strategy.value,
                                config.partitions, warehouse=lakehouse.warehouse, options=lakehouse.storage(),
                                commit_user=commit_user(context.run_id))  # fmt: skip
        did = _compaction_metadata(done)
        _observe(context, lakehouse, table, did)
        return Output(did, metadata=did)

    @op(description="Build or refresh a table's file indexes as a Spark job (data files untouched)")
    def rewrite_file_index(context: OpExecutionContext, config: TableConfig, lakehouse: LakehouseResource,
                           spark: SparkResource):  # fmt: skip
        from lakehouse.spark import rewrite_file_index as rewrite

        table = config.table.value
        with spark_logs(context.log, spark.spark_session):
            done = rewrite(spark.spark_session, table, partitions=config.partitions,
                           warehouse=lakehouse.warehouse, options=lakehouse.storage(),
                           commit_user=commit_user(context.run_id))  # fmt: skip
        did = _ints(
            {
                "snapshot_id": done.snapshot_id or 0,
                "files_checked": done.files_checked,
                "files_rewritten": done.files_rewritten,
                "index_bytes_written": done.index_bytes_written,
            }
        )
        _observe(context, lakehouse, table, did)
        return Output(did, metadata=did)

    @op(description="Expire the old partitions of every table that sets partition.expiration-time")
    def expire_partitions(context: OpExecutionContext, config: TablesConfig, lakehouse: LakehouseResource,
                          spark: SparkResource):  # fmt: skip
        from lakehouse.spark import expire_partitions as expire

        totals = {"tables": 0, "partitions_expired": 0, "files_dropped": 0, "rows_dropped": 0}
        for name in chosen(config, lakehouse):
            table = lakehouse.table(name)
            if table.partition_expiration_time is None or not table.partition_keys:
                continue
            done = expire(spark.spark_session, name, warehouse=lakehouse.warehouse,
                          options=lakehouse.storage(), commit_user=commit_user(context.run_id))  # fmt: skip
            did = {
                "snapshot_id": done.snapshot_id or 0,
                "partitions_expired": done.partitions_expired,
                "files_dropped": done.files,
                "rows_dropped": done.rows,
            }
            partitions = MetadataValue.json([dict(p) for p in done.partitions])
            _observe(context, lakehouse, name, {**_ints(did), "expired_partitions": partitions})
            totals["tables"] += 1
            for key in ("partitions_expired", "files_dropped", "rows_dropped"):
                totals[key] += did[key]
        return Output(totals, metadata=_ints(totals))

    @op(
        description="Expire old snapshots and delete orphan files of every table, as Spark jobs",
        ins={"after": In(Nothing)},
    )
    def expire_and_clean(context: OpExecutionContext, config: ExpireConfig, lakehouse: LakehouseResource,
                         spark: SparkResource):  # fmt: skip
        from lakehouse.spark import expire_snapshots, remove_orphan_files

        names = chosen(config, lakehouse)
        totals = {"snapshots_expired": 0, "files_deleted": 0, "orphan_files_deleted": 0}
        session, warehouse, storage = spark.spark_session, lakehouse.warehouse, lakehouse.storage()
        age = config.orphan_min_age_ms
        older = None if age is None else int(time.time() * 1000) - age
        for name in names:
            with spark_logs(context.log, session):
                expired = expire_snapshots(session, name, warehouse=warehouse, options=storage)
                orphans = remove_orphan_files(
                    session, name, older_than_ms=older, warehouse=warehouse, options=storage
                )
            did = {
                "snapshots_expired": expired.snapshots_expired,
                "files_deleted": expired.files_deleted,
                "earliest_snapshot_id": expired.earliest_snapshot_id or 0,
                "orphan_files_deleted": orphans.files,
                "orphan_bytes_deleted": orphans.bytes,
            }
            _observe(context, lakehouse, name, _ints(did))
            for key in totals:
                totals[key] += did[key]
        return Output(totals, metadata=_ints(totals))

    @job(description="Compact one table (run config: table, partitions, full)")
    def compact_job():
        compact_table()

    @job(description="Cluster one append table (run config: table, partitions, order_by, strategy)")
    def sort_compact_job():
        sort_compact_table()

    @job(description="Rewrite one table's file indexes (run config: table, partitions)")
    def rewrite_index_job():
        rewrite_file_index()

    @job(description="Expire old partitions, then snapshots, and remove orphan files of every table")
    def expire_job():
        expire_and_clean(after=expire_partitions())

    return MaintenanceJobs(compact_job, rewrite_index_job, expire_job, sort_compact_job)


def compact_run_config(table: str, partitions: list[dict[str, Any]] | None, full: bool = False) -> dict:
    """The run config of the ``compact_job`` for one table."""
    return {"ops": {"compact_table": {"config": {"table": table, "partitions": partitions, "full": full}}}}


def sort_compact_run_config(
    table: str, order_by: list[str], strategy: str = "zorder", partitions: list[dict[str, Any]] | None = None
) -> dict:
    """The run config of the ``sort_compact_job`` for one table."""
    config = {"table": table, "partitions": partitions, "order_by": order_by, "strategy": strategy}
    return {"ops": {"sort_compact_table": {"config": config}}}
