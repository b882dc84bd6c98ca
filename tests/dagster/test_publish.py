"""Write-audit-publish: an audited table's materialization writes to a branch of its run, its
checks run there, and only passing data reaches main; failing data stays on the branch and stops
downstream assets."""

from __future__ import annotations

import pyarrow as pa
import pytest
from dagster import AssetCheckResult, DailyPartitionsDefinition, materialize

import dagster_lakehouse.checks as checks
from dagster_lakehouse.checks import PRIMARY_KEY_CHECK, table_checks
from dagster_lakehouse.factory import commit_user, table_asset
from dagster_lakehouse.publish import Publish, audit_branch, open_audit, publish
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from dagster_lakehouse.spec import TableSpec
from lakehouse import Catalog, col
from lakehouse.errors import CommitConflictError, InvalidArgumentError

DAY = "2026-01-05"
DAYS = DailyPartitionsDefinition(start_date="2026-01-01")
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string())])  # fmt: skip


def _rows(inputs):
    return inputs.spark.createDataFrame(
        [(i, d, f"v{i}") for d in inputs.days for i in range(3)], "id long, dt string, v string"
    )


def _copy(inputs):
    return inputs.read("db.audited")


AUDITED = TableSpec("db.audited", SCHEMA, _rows, primary_keys=("id", "dt"), options={"bucket": "1"},
                    publish=Publish.AUDITED)  # fmt: skip
DOWNSTREAM = TableSpec("db.downstream", SCHEMA, _copy, primary_keys=("id", "dt"), options={"bucket": "1"},
                       upstream=("db.audited",))  # fmt: skip


def run(warehouse: str, day: str = DAY):
    definitions = [table_asset(s, DAYS) for s in (AUDITED, DOWNSTREAM)] + table_checks(AUDITED, DAYS)
    resources = {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}
    return materialize(definitions, resources=resources, partition_key=day, raise_on_error=False)


@pytest.mark.spark
def test_passing_data_is_published_to_main(spark, warehouse):
    result = run(warehouse)
    assert result.success
    table = Catalog(warehouse).get_table("db.audited")
    assert sorted(table.read().column("id").to_pylist()) == [0, 1, 2]
    assert table.branches() == []  # the run's branch is gone once published
    assert table.snapshot().commit_user == commit_user(result.run_id)
    (materialization,) = [m for m in result.asset_materializations_for_node("db__audited")]
    assert materialization.metadata["branch"].value == audit_branch(result.run_id)
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == PRIMARY_KEY_CHECK]
    assert evaluation.passed and evaluation.metadata["published_from"].value == audit_branch(result.run_id)
    assert Catalog(warehouse).get_table("db.downstream").read().num_rows == 3


@pytest.mark.spark
def test_failing_data_stays_on_its_branch_and_stops_downstream(spark, warehouse, monkeypatch):
    assert run(warehouse, "2026-01-04").success  # main holds a day already
    monkeypatch.setattr(checks, "primary_key_result", lambda *a, **k: AssetCheckResult(passed=False))
    result = run(warehouse)
    assert not result.success
    catalog = Catalog(warehouse)
    table = catalog.get_table("db.audited")
    assert table.read().column("dt").unique().to_pylist() == ["2026-01-04"]  # main untouched
    branch = audit_branch(result.run_id)
    assert table.branches() == [branch]
    assert table.on_branch(branch).read(filter=col("dt") == DAY).num_rows == 3  # kept for inspection
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == PRIMARY_KEY_CHECK]
    assert not evaluation.passed and evaluation.metadata["unpublished_branch"].value == branch
    assert catalog.get_table("db.downstream").read(filter=col("dt") == DAY).num_rows == 0


def test_a_commit_to_main_during_the_audit_refuses_the_publish(catalog):
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["id", "dt"], options={"bucket": "1"})
    table.write(pa.table({"id": [1], "dt": [DAY], "v": ["main"]}, schema=SCHEMA))
    audit = open_audit(table, "audit-run")
    audit.write(
        pa.table({"id": [2], "dt": [DAY], "v": ["audited"]}, schema=SCHEMA), commit_user="dagster-run"
    )
    table.write(pa.table({"id": [3], "dt": [DAY], "v": ["meanwhile"]}, schema=SCHEMA))
    with pytest.raises(CommitConflictError, match="main moved from snapshot 1 to 2"):
        publish(table, "audit-run")
    assert sorted(table.refresh().read().column("id").to_pylist()) == [1, 3]
    assert table.branches() == ["audit-run"]


def test_an_audit_of_an_empty_table_and_of_nothing_written(catalog):
    table = catalog.create_table("db.t", SCHEMA, primary_keys=["id", "dt"], options={"bucket": "1"})
    audit = open_audit(table, "audit-a")
    audit.write(pa.table({"id": [1], "dt": [DAY], "v": ["x"]}, schema=SCHEMA), commit_user="dagster-a")
    assert publish(table, "audit-a") == 1
    assert table.refresh().read().column("v").to_pylist() == ["x"]
    open_audit(table, "audit-b")  # a run that wrote nothing publishes nothing
    assert publish(table, "audit-b") == 1 and table.branches() == []


def test_an_audited_table_needs_checks():
    spec = TableSpec("db.append", SCHEMA, _rows, publish=Publish.AUDITED)
    with pytest.raises(InvalidArgumentError, match="no checks to audit it with"):
        table_checks(spec, DAYS)
