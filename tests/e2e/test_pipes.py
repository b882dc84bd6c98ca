"""A table's Spark step through Dagster Pipes: ``spark-submit`` of the step script to a standalone
cluster on loopback (a master, one worker), the materialization reported back with the metadata an
in-process one has, and the table's checks run on what the step committed. Over a minute (a
cluster and a submitted driver start), hence in ``make e2e``."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest
from dagster import DailyPartitionsDefinition, materialize

from dagster_lakehouse import LakehouseResource, TableSpec, table_asset, table_checks
from dagster_lakehouse.pipes import SparkSubmitPipes
from dagster_lakehouse.yaml_spec import SqlTransform
from lakehouse import Catalog
from lakehouse.errors import InvalidArgumentError
from lakehouse.spark.standalone import StandaloneCluster

pytestmark = pytest.mark.e2e

DAY = "2026-01-02"
SOURCE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("price", pa.float64())])  # fmt: skip
SPEC = TableSpec(
    "db.doubled",
    SOURCE,
    SqlTransform("SELECT id, dt, price * 2 AS price FROM {db_source}", ("db.source",)),
    primary_keys=("id", "dt"),
    options={"bucket": "1"},
    upstream=("db.source",),
    pipes=True,
)


def test_a_spark_step_through_pipes_on_a_cluster(tmp_path):
    warehouse = str(tmp_path / "warehouse")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    source = catalog.create_table("db.source", SOURCE, partition_keys=["dt"])
    source.write(pa.table({"id": [1, 2, 3], "dt": [DAY] * 3, "price": [1.0, 2.5, 4.0]}, schema=SOURCE))
    days = DailyPartitionsDefinition(start_date="2026-01-01")
    python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cluster = StandaloneCluster(workers=1, cores=1, root=str(tmp_path / "cluster")).start()
    try:
        pipes = SparkSubmitPipes(master=cluster.url, env={**os.environ, **python},
                                 conf={"spark.sql.shuffle.partitions": "2"})  # fmt: skip
        run = materialize(
            [table_asset(SPEC, days), *table_checks(SPEC, days)],
            resources={"lakehouse": LakehouseResource(warehouse=warehouse), "pipes": pipes},
            partition_key=DAY,
        )
    finally:
        cluster.stop()
    assert run.success
    assert list(
        (tmp_path / "cluster" / "worker-0").glob("app-*/*/stderr")
    )  # the cluster ran the step's tasks
    table = catalog.get_table("db.doubled")
    assert sorted(table.read().column("price").to_pylist()) == [2.0, 5.0, 8.0]
    assert table.snapshot().commit_user == f"dagster-{run.run_id}"
    (materialization,) = run.asset_materializations_for_node("db__doubled")
    metadata = materialization.metadata
    assert metadata["dagster/row_count"].value == 3 and metadata["dagster/partition_row_count"].value == 3
    assert metadata["snapshot_id"].value == table.latest_snapshot_id()
    lineage = metadata["dagster/column_lineage"].value.deps_by_column
    assert [(d.asset_key.to_user_string(), d.column_name) for d in lineage["price"]] == [
        ("db/source", "price")
    ]
    checks = {e.check_name: e.passed for e in run.get_asset_check_evaluations()}
    assert checks == {"primary_key_unique": True, "column_schema_change": True,
                      "dagster_partition_row_count_bounds_check": True}  # fmt: skip


def test_a_step_pipes_cannot_run_is_refused_at_definition():
    days = DailyPartitionsDefinition(start_date="2026-01-01")
    with pytest.raises(InvalidArgumentError, match="module-level function"):
        table_asset(TableSpec("db.t", SOURCE, lambda inputs: inputs.read("db.source"), pipes=True), days)
    with pytest.raises(InvalidArgumentError, match="drop incremental"):
        table_asset(TableSpec("db.t", SOURCE, SPEC.transform, primary_keys=("id", "dt"), incremental=True,
                              pipes=True), days)  # fmt: skip
