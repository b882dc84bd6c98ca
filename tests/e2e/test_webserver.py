"""The Dagster layer as a user runs it: ``dagster-webserver`` and ``dagster-daemon`` serve the
workspace, a run launched through the GraphQL API materializes the example lakehouse for one
day (the asset pages then show each table's schema, its exact row count for the day and its
checks passed for the day), and the compaction sensor, evaluated by the daemon, requests a
``compact_job`` run once ``dws.order_wide``'s buckets hold enough sorted runs, and that run
compacts them."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from assets.definitions import PIPELINE
from assets.orders import TABLES
from lakehouse import Catalog, col
from tests.e2e.server import REPOSITORY, DagsterServer

pytestmark = pytest.mark.e2e

DAY = "2026-01-01"
RUN_TIMEOUT = 900.0  # a run starts Spark on a loaded 2-core machine
TICK_TIMEOUT = 300.0  # the compaction sensor is evaluated every 60 s
DONE = {"SUCCESS", "FAILURE", "CANCELED"}

LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
RUN = """
query($id: ID!) {
  runOrError(runId: $id) {
    __typename
    ... on Run {
      status jobName tags { key value }
      eventConnection(limit: 5000) { events { __typename ... on MessageEvent { message level } } }
    }
  }
}"""
MATERIALIZED = """
query($path: [String!]!, $day: String!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(partitions: [$day]) { runId } }
  }
}"""
ASSET_PAGE = """
query($path: [String!]!, $day: String!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode {
      metadataEntries { label __typename }
      assetChecksOrError { ... on AssetChecks { checks { name partitionStatuses {
        __typename ... on AssetCheckTimePartitionStatuses { ranges { startKey endKey status } }
      } } } }
    }
  }
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(partitions: [$day]) {
      metadataEntries { label ... on IntMetadataEntry { intValue } }
    } }
  }
}"""
TICKS = """
query($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { status ticks(limit: 20) { status runIds skipReason error { message } } } }
  }
}"""


def launch(dagster: DagsterServer, job: str, partition: str) -> str:
    """Launch ``job`` for one partition, as the UI's Materialize button does; its run id."""
    params = {
        "selector": {**REPOSITORY, "jobName": job},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    result = dagster.graphql(LAUNCH, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", f"launching {job} failed: {result}"
    return result["run"]["runId"]


def finished(dagster: DagsterServer, run_id: str) -> dict:
    """The run once it has finished; fails with the run's error messages unless it succeeded."""

    def done() -> dict | None:
        run = dagster.graphql(RUN, {"id": run_id})["runOrError"]
        assert run["__typename"] == "Run", f"run {run_id}: {run}"
        return run if run["status"] in DONE else None

    run = dagster.wait_for(f"run {run_id} to finish", done, RUN_TIMEOUT)
    errors = [e["message"] for e in run["eventConnection"]["events"] if e.get("level") == "ERROR"]
    assert run["status"] == "SUCCESS", f"{run['jobName']} run {run_id} ended {run['status']}: {errors}"
    return run


def sensor_requests(dagster: DagsterServer, sensor: str) -> list[str] | None:
    """The runs requested by the sensor's ticks so far (None while there are none)."""
    selector = {**REPOSITORY, "sensorName": sensor}
    state = dagster.graphql(TICKS, {"selector": selector})["sensorOrError"]["sensorState"]
    assert state["status"] == "RUNNING", f"{sensor} is {state['status']}, its default is RUNNING"
    failed = [t["error"]["message"] for t in state["ticks"] if t["status"] == "FAILURE"]
    assert not failed, f"{sensor} ticks failed: {failed}"
    return [run_id for t in state["ticks"] for run_id in t["runIds"]] or None


def test_a_launched_run_materializes_and_the_compaction_sensor_compacts(dagster: DagsterServer):
    run_id = launch(dagster, PIPELINE, DAY)
    finished(dagster, run_id)
    for spec in TABLES:
        variables = {"path": list(spec.key.path), "day": DAY}
        events = dagster.graphql(MATERIALIZED, variables)["assetOrError"]["assetMaterializations"]
        assert [e["runId"] for e in events] == [run_id], f"{spec.name} for {DAY}: {events}"

    catalog = Catalog(dagster.warehouse)
    for spec in TABLES:  # what the asset page shows: schema, exact row counts, checks passed that day
        page = dagster.graphql(ASSET_PAGE, {"path": list(spec.key.path), "day": DAY})
        node = page["assetNodeOrError"]
        definition = {e["label"]: e["__typename"] for e in node["metadataEntries"]}
        assert definition.get("dagster/column_schema") == "TableSchemaMetadataEntry", spec.name
        (materialization,) = page["assetOrError"]["assetMaterializations"]
        values = {e["label"]: e.get("intValue") for e in materialization["metadataEntries"]}
        day_rows = catalog.get_table(spec.name).read(filter=col("dt") == DAY).num_rows
        assert values["dagster/partition_row_count"] == day_rows, spec.name
        for check in node["assetChecksOrError"]["checks"]:
            ranges = check["partitionStatuses"]["ranges"]
            assert [(r["startKey"], r["status"]) for r in ranges] == [(DAY, "SUCCEEDED")], (spec.name, check)

    wide = catalog.get_table("dws.order_wide")
    assert not any(s.needs_compaction for s in wide.lsm_shape())
    assert sensor_requests(dagster, "compaction_sensor") is None
    table = wide.read()
    rows = table.filter(pc.equal(table.column("dt"), DAY))
    for _ in range(2):  # the write-only table now holds three sorted runs in each of the day's buckets
        wide.write(rows)
    assert any(s.needs_compaction for s in wide.refresh().lsm_shape())

    (compaction,) = dagster.wait_for(
        "the compaction sensor to request a run", lambda: sensor_requests(dagster, "compaction_sensor"),
        TICK_TIMEOUT,
    )  # fmt: skip
    run = finished(dagster, compaction)
    assert run["jobName"] == "compact_job"
    assert {t["key"]: t["value"] for t in run["tags"]}["table"] == "dws.order_wide"
    assert not any(s.needs_compaction for s in wide.refresh().lsm_shape())
    assert wide.read().num_rows == rows.num_rows
