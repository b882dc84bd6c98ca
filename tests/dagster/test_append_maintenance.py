"""Append tables in the Dagster layer: the compaction sensor requests them once small files pile
up, ``compact_job`` merges them and ``sort_compact_job`` clusters them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster import DagsterInstance, SkipReason, build_sensor_context

from dagster_lakehouse.maintenance import maintenance_jobs, sort_compact_run_config
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.sensors import compaction_sensor
from dagster_lakehouse.spec import TableSpec
from lakehouse import Catalog
from lakehouse.snapshot import CommitKind

pytestmark = pytest.mark.spark

EVENTS = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("user_id", pa.int64()),
                    pa.field("amount", pa.float64())])  # fmt: skip
SPEC = TableSpec("db.events", EVENTS, transform=lambda inputs: None)
JOBS = maintenance_jobs([SPEC.name])


def events(i: int) -> pa.Table:
    ids = list(range(i * 30, i * 30 + 30))
    return pa.table({"dt": ["2026-01-01", "2026-01-02", "2026-01-03"] * 10, "user_id": ids,
                     "amount": [float(v % 11) for v in ids]}, schema=EVENTS)  # fmt: skip


@pytest.fixture
def warehouse(spark, tmp_path) -> str:
    wh = str(tmp_path / "warehouse")
    table = SPEC.ensure(Catalog(wh))
    for i in range(4):
        table.write(events(i))
    return wh


def run(job, run_config: dict, warehouse: str):
    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    with DagsterInstance.ephemeral() as instance:
        return job.execute_in_process(run_config=run_config, instance=instance, resources=resources)


def test_compaction_sensor_requests_append_partitions_with_enough_small_files(warehouse):
    sensor = compaction_sensor([SPEC], JOBS.compact)
    context = build_sensor_context(resources={"lakehouse": LakehouseResource(warehouse=warehouse)})
    assert isinstance(sensor(context), SkipReason)  # 4 small files per partition < compaction.min.file-num
    table = Catalog(warehouse).get_table(SPEC.name)
    extra = events(4)
    table.write(extra.filter(pc.equal(extra.column("dt"), "2026-01-02")))
    (request,) = sensor(context)
    config = request.run_config["ops"]["compact_table"]["config"]
    assert config == {"table": SPEC.name, "partitions": [{"dt": "2026-01-02"}], "full": False}
    done = run(JOBS.compact, request.run_config, warehouse)
    assert done.success
    compacted = table.snapshot()
    assert compacted.commit_kind == CommitKind.COMPACT and compacted.commit_user == f"dagster-{done.run_id}"
    assert len(table.live_entries()) == 4 + 4 + 1
    assert isinstance(sensor(context), SkipReason)


def test_sort_compact_job_clusters_an_append_table(warehouse):
    table = Catalog(warehouse).get_table(SPEC.name)
    before = table.read().sort_by("user_id")
    config = sort_compact_run_config(SPEC.name, ["amount", "user_id"], "hilbert", [{"dt": "2026-01-01"}])
    done = run(JOBS.sort_compact, config, warehouse)
    assert done.success
    output = done.output_for_node("sort_compact_table")
    assert output["files_rewritten"].value == 4 and output["files_written"].value == 1
    assert table.snapshot().commit_kind == CommitKind.COMPACT
    assert table.read().sort_by("user_id") == before
