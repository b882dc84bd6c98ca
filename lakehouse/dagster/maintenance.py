"""Maintenance as Dagster jobs, run through Spark over the storage-engine resource: compaction
(full or universal, per table and partitions), file-index rewrites, snapshot expiration and
orphan-file cleanup. Each op reports what it did as metadata and records an observation on the
table's asset: the table's state in the series materializations share, what the op did in its
own. Their snapshots are committed as the run's commit user, like materializations, so the
snapshot sensors know them for Dagster's."""

import time
from typing import Any

from dagster import (
    AssetObservation,
    Config,
    MetadataValue,
    OpExecutionContext,
    Output,
    job,
    op,
)

from lakehouse.dagster.factory import commit_user
from lakehouse.dagster.metadata import table_metadata
from lakehouse.dagster.resources import LakehouseResource, SparkResource
from lakehouse.dagster.spec import asset_key


class TableConfig(Config):
    table: str  # "db.table"
    partitions: list[dict[str, str]] | None = None  # None: every partition


class CompactConfig(TableConfig):
    full: bool = False


class ExpireConfig(Config):
    tables: list[str] | None = None  # None: every table of the warehouse
    orphan_min_age_ms: int | None = None  # orphan files younger than this stay (default one day)


def _observe(context: OpExecutionContext, lakehouse: LakehouseResource, table: str, did: dict[str, Any]):
    """Record on the table's asset what the op did and the table's state after it."""
    metadata = {**table_metadata(lakehouse.table(table)), **did}
    context.log_event(AssetObservation(asset_key(table), metadata=metadata))


@op(description="Compact a table's buckets (universal, or full) as a Spark job")
def compact_table(context: OpExecutionContext, config: CompactConfig, lakehouse: LakehouseResource,
                  spark: SparkResource):  # fmt: skip
    from lakehouse.spark import compact

    done = compact(spark.spark_session, config.table, full=config.full, partitions=config.partitions,
                   warehouse=lakehouse.warehouse, options=lakehouse.storage(),
                   commit_user=commit_user(context.run_id))  # fmt: skip
    did = {
        "snapshot_id": MetadataValue.int(done.snapshot_id or 0),
        "buckets_compacted": MetadataValue.int(done.buckets),
        "files_rewritten": MetadataValue.int(done.files_before),
        "files_written": MetadataValue.int(done.files_after),
        "bytes_before": MetadataValue.int(done.bytes_before),
        "bytes_after": MetadataValue.int(done.bytes_after),
    }
    _observe(context, lakehouse, config.table, did)
    return Output(did, metadata=did)


@op(description="Build or refresh a table's file indexes as a Spark job (data files untouched)")
def rewrite_file_index(context: OpExecutionContext, config: TableConfig, lakehouse: LakehouseResource,
                       spark: SparkResource):  # fmt: skip
    from lakehouse.spark import rewrite_file_index as rewrite

    done = rewrite(spark.spark_session, config.table, partitions=config.partitions,
                   warehouse=lakehouse.warehouse, options=lakehouse.storage(),
                   commit_user=commit_user(context.run_id))  # fmt: skip
    did = {
        "snapshot_id": MetadataValue.int(done.snapshot_id or 0),
        "files_checked": MetadataValue.int(done.files_checked),
        "files_rewritten": MetadataValue.int(done.files_rewritten),
        "index_bytes_written": MetadataValue.int(done.index_bytes_written),
    }
    _observe(context, lakehouse, config.table, did)
    return Output(did, metadata=did)


@op(description="Expire old snapshots and delete orphan files of every table, as Spark jobs")
def expire_and_clean(context: OpExecutionContext, config: ExpireConfig, lakehouse: LakehouseResource,
                     spark: SparkResource):  # fmt: skip
    from lakehouse.spark import expire_snapshots, remove_orphan_files

    catalog = lakehouse.catalog()
    names = config.tables or [f"{db}.{t}" for db in catalog.list_databases() for t in catalog.list_tables(db)]
    totals = {"snapshots_expired": 0, "files_deleted": 0, "orphan_files_deleted": 0}
    session, where = spark.spark_session, {"warehouse": lakehouse.warehouse, "options": lakehouse.storage()}
    age = config.orphan_min_age_ms
    older = None if age is None else int(time.time() * 1000) - age
    for name in names:
        expired = expire_snapshots(session, name, **where)
        orphans = remove_orphan_files(session, name, older_than_ms=older, **where)
        did = {
            "snapshots_expired": MetadataValue.int(expired.snapshots_expired),
            "files_deleted": MetadataValue.int(expired.files_deleted),
            "earliest_snapshot_id": MetadataValue.int(expired.earliest_snapshot_id or 0),
            "orphan_files_deleted": MetadataValue.int(orphans.files),
            "orphan_bytes_deleted": MetadataValue.int(orphans.bytes),
        }
        _observe(context, lakehouse, name, did)
        totals["snapshots_expired"] += expired.snapshots_expired
        totals["files_deleted"] += expired.files_deleted
        totals["orphan_files_deleted"] += orphans.files
    return Output(totals, metadata={k: MetadataValue.int(v) for k, v in totals.items()})


@job(description="Compact one table (run config: table, partitions, full)")
def compact_job():
    compact_table()


@job(description="Rewrite one table's file indexes (run config: table, partitions)")
def rewrite_index_job():
    rewrite_file_index()


@job(description="Expire snapshots and remove orphan files of every table")
def expire_job():
    expire_and_clean()


def compact_run_config(table: str, partitions: list[dict[str, Any]] | None, full: bool = False) -> dict:
    """The run config of :func:`compact_job` for one table."""
    return {"ops": {"compact_table": {"config": {"table": table, "partitions": partitions, "full": full}}}}
