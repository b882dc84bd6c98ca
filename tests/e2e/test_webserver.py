"""The Dagster layer as a user runs it: ``dagster-webserver`` and ``dagster-daemon`` serve the
workspace, a run launched through the GraphQL API materializes the example lakehouse for one
day (the asset pages then show each table's schema, its exact row count for the day and its
checks passed for the day), and the compaction sensor, evaluated by the daemon, requests a
``compact_job`` run once ``dws.order_wide``'s buckets hold enough sorted runs, and that run
compacts them. A backfill launched as the UI does is one run with exact metadata per day, and a
deletion committed upstream by another writer reaches the dws tables through the snapshot sensor."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from assets.definitions import PIPELINE
from assets.events import order_events
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
        checks = node["assetChecksOrError"]["checks"]
        # every check per day, but Dagster's of the column schema, which is the table's
        assert {c["name"] for c in checks if c["partitionStatuses"] is None} == {"column_schema_change"}
        for check in [c for c in checks if c["partitionStatuses"] is not None]:
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


BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}"""
BACKFILL_STATUS = """
query($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status runs(limit: 100) { runId status startTime endTime } }
  }
}"""
DAY_METADATA = """
query($path: [String!]!, $day: String!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(partitions: [$day]) {
      runId metadataEntries { label ... on IntMetadataEntry { intValue } }
    } }
  }
}"""


def test_a_backfill_reports_each_day_and_an_upstream_deletion_reaches_dws(dagster: DagsterServer):
    """A two-day backfill launched as the UI's Materialize dialog does is one run whose metadata
    is exact per day; then an order cancelled in ods.orders outside Dagster leaves dwd.orders and
    both dws tables through the snapshot sensor's run."""
    days = ["2026-01-02", "2026-01-03"]
    params = {"partitionNames": days, "assetSelection": [{"path": list(s.key.path)} for s in TABLES],
              "fromFailure": False}  # fmt: skip
    launched = dagster.graphql(BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched

    def done() -> dict | None:
        backfill = dagster.graphql(BACKFILL_STATUS, {"id": launched["backfillId"]})[
            "partitionBackfillOrError"
        ]
        return backfill if backfill["status"] not in ("REQUESTED", "CANCELING", "FAILING") else None

    backfill = dagster.wait_for("the backfill to finish", done, RUN_TIMEOUT)
    assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), backfill
    (run,) = backfill["runs"]  # a single-run backfill policy: every table, both days, one run
    finished(dagster, run["runId"])

    catalog = Catalog(dagster.warehouse)
    for spec in TABLES:
        table = catalog.get_table(spec.name)
        for day in days:
            page = dagster.graphql(DAY_METADATA, {"path": list(spec.key.path), "day": day})
            (materialization,) = page["assetOrError"]["assetMaterializations"]
            assert materialization["runId"] == run["runId"]
            values = {e["label"]: e.get("intValue") for e in materialization["metadataEntries"]}
            day_rows = table.read(filter=col("dt") == day).num_rows
            assert values["dagster/partition_row_count"] == day_rows, (spec.name, day)
            if spec.name == "ods.orders":  # append-only: the day's rows are exactly what the run wrote
                assert values["rows_written"] == order_events(day).num_rows == day_rows

    ods, wide = catalog.get_table("ods.orders"), catalog.get_table("dws.order_wide")
    day = col("dt") == days[0]
    paid = wide.read(filter=day & ~col("pay_method").is_null()).slice(0, 1).to_pylist()[0]
    events = ods.read(filter=col("order_id") == paid["order_id"]).sort_by("event_time").to_pylist()
    cancel = {**events[-1], "event_id": 10**12, "event_type": "cancel", "status": "CANCELLED",
              "event_time": events[-1]["event_time"] + dt.timedelta(minutes=1)}  # fmt: skip
    assert sensor_requests(dagster, "ods_orders_snapshots") is None  # Dagster's own commits so far
    ods.write(pa.Table.from_pylist([cancel], schema=ods.arrow_schema))  # another writer's commit

    (propagation,) = dagster.wait_for(
        "the snapshot sensor to request a run", lambda: sensor_requests(dagster, "ods_orders_snapshots"),
        TICK_TIMEOUT,
    )  # fmt: skip
    run = finished(dagster, propagation)
    assert {t["key"]: t["value"] for t in run["tags"]}["dagster/partition"] == days[0]
    for name in ("dwd.orders", "dws.order_wide"):
        assert catalog.get_table(name).read(filter=col("order_id") == paid["order_id"]).num_rows == 0, name
    dwd = catalog.get_table("dwd.orders").read(filter=day)
    daily = catalog.get_table("dws.user_daily").read(filter=day)
    assert pc.sum(daily.column("order_count")).as_py() == dwd.num_rows
