"""The Dagster layer end to end, in-process on a temp warehouse with the shared SparkSession: the
definitions load, the example graph materializes with its metadata and checks, reruns are
idempotent, sensors react to foreign snapshots and LSM pressure, and injected corruption makes
the right check fail."""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest
from dagster import (
    AssetCheckSeverity,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_sensor_context,
    materialize,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from assets.definitions import PIPELINE, defs
from assets.orders import TABLES, order_events
from dagster_lakehouse.checks import index_result
from dagster_lakehouse.resources import LakehouseResource, SparkResource
from lakehouse import Catalog, col
from lakehouse.bucket import hash_index
from lakehouse.fileindex import bitmap, format
from lakehouse.snapshot import CommitKind
from lakehouse.types import parse_type

pytestmark = pytest.mark.spark

DAYS = ["2026-01-01", "2026-01-02"]
SPECS = {s.name: s for s in TABLES}


def resources(warehouse: str) -> dict:
    return {"lakehouse": LakehouseResource(warehouse=warehouse), "spark": SparkResource()}


def run_day(warehouse: str, day: str):
    return materialize([*defs.assets, *defs.asset_checks], resources=resources(warehouse), partition_key=day)


@pytest.fixture(scope="module")
def lakehouse(spark, tmp_path_factory) -> tuple[str, dict]:
    """The example graph materialized for two days; the warehouse and each day's run result."""
    warehouse = str(tmp_path_factory.mktemp("lakehouse") / "warehouse")
    return warehouse, {day: run_day(warehouse, day) for day in DAYS}


@pytest.fixture
def copy(lakehouse, tmp_path) -> str:
    """A private copy of the materialized warehouse, to change or corrupt."""
    target = tmp_path / "warehouse"
    shutil.copytree(lakehouse[0], target)
    return str(target)


def test_definitions_load():
    repo = defs.get_repository_def()
    jobs = {j.name for j in repo.get_all_jobs()}
    assert {PIPELINE, "compact_job", "sort_compact_job", "rewrite_index_job", "expire_job"} <= jobs
    assert {s.name for s in repo.sensor_defs} == {
        "compaction_sensor", "ods_orders_snapshots", "dwd_orders_snapshots", "dws_user_daily_snapshots",
        "dws_order_wide_snapshots", "lakehouse_automation",
    }  # fmt: skip
    assert {s.name for s in repo.schedule_defs} == {f"{PIPELINE}_schedule", "nightly_expiration"}
    checks = {(k.asset_key.to_user_string(), k.name) for c in defs.asset_checks for k in c.check_keys}
    assert ("dwd/orders", "indexes_match_data") in checks
    assert ("dws/user_daily", "primary_key_unique") in checks
    assert ("ods/orders", "dagster_partition_row_count_bounds_check") in checks  # a day without rows fails
    assert ("ods/orders", "column_schema_change") in checks
    assert set(defs.resources) == {"lakehouse", "spark"}


def test_the_graph_materializes_with_metadata_and_passing_checks(lakehouse):
    warehouse, runs = lakehouse
    catalog = Catalog(warehouse)
    for day, run in runs.items():
        assert run.success
        evaluations = run.get_asset_check_evaluations()
        assert evaluations and all(c.passed for c in evaluations), [c for c in evaluations if not c.passed]
        # every check per day, but Dagster's of the column schema, which is the table's
        assert {c.partition for c in evaluations if c.check_name != "column_schema_change"} == {day}
        assert all(c.target_materialization_data is not None for c in evaluations)
        metadata = {m.asset_key.to_user_string(): m.metadata for m in _materializations(run)}
        assert set(metadata) == {"ods/orders", "dwd/orders", "dws/user_daily", "dws/order_wide"}
        # column lineage, of a SQL table and of one written by a Python transformation
        lineage = metadata["dws/user_daily"]["dagster/column_lineage"].value.deps_by_column
        assert {(d.asset_key.to_user_string(), d.column_name) for d in lineage["total_amount"]} == {
            ("dwd/orders", "price")
        }
        lineage = metadata["dwd/orders"]["dagster/column_lineage"].value.deps_by_column
        assert ("ods/orders", "user_id") in {
            (d.asset_key.to_user_string(), d.column_name) for d in lineage["user_id"]
        }
        for key, values in metadata.items():
            assert {"snapshot_id", "rows_written", "data_files", "bytes", "dagster/row_count",
                    "dagster/partition_row_count", "dagster/column_schema"} <= set(values)  # fmt: skip
            name = key.replace("/", ".")
            assert values["dagster/table_name"].value == name
            assert values["dagster/uri"].value.startswith("file://")
            assert values["rows_written"].value > 0
            table = catalog.get_table(name)
            day_rows = table.read(filter=col("dt") == day, snapshot_id=values["snapshot_id"].value).num_rows
            assert values["dagster/partition_row_count"].value == day_rows
            assert (
                values["dagster/row_count"].value
                == table.read(snapshot_id=values["snapshot_id"].value).num_rows
            )
            columns = values["dagster/column_schema"].value.columns
            assert [c.name for c in columns] == table.arrow_schema.names
    events = [order_events(day) for day in DAYS]
    assert catalog.get_table("ods.orders").read().num_rows == sum(e.num_rows for e in events)
    # dwd: every order once, in the state of its last event; cancelled orders deleted
    expected = {}
    for e in events:
        for row in e.to_pylist():
            expected[row["order_id"]] = row
    live = {k: r for k, r in expected.items() if r["event_type"] != "cancel"}
    dwd = catalog.get_table("dwd.orders").read().to_pylist()
    assert {r["order_id"]: (r["status"], r["price"]) for r in dwd} == {
        k: (r["status"], r["price"]) for k, r in live.items()
    }
    # dws.user_daily: the aggregation engine summed one row per order
    counts, sums = Counter(), Counter()
    for r in live.values():
        counts[(r["user_id"], r["dt"])] += 1
        sums[(r["user_id"], r["dt"])] += r["price"]
    daily = catalog.get_table("dws.user_daily").read().to_pylist()
    assert {(r["user_id"], r["dt"]): (r["order_count"], r["total_amount"]) for r in daily} == {
        k: (counts[k], sums[k]) for k in counts
    }
    # dws.order_wide: both streams joined per order by partial update
    wide = {r["order_id"]: r for r in catalog.get_table("dws.order_wide").read().to_pylist()}
    assert set(wide) == set(live)
    paid = {r["order_id"]: r for e in events for r in e.to_pylist() if r["event_type"] == "pay"}
    for order_id, row in wide.items():
        assert row["status"] == live[order_id]["status"]
        assert (row["pay_method"], row["amount_paid"]) == (
            (paid[order_id]["pay_method"], paid[order_id]["price"]) if order_id in paid else (None, None)
        )


@pytest.mark.iceberg
def test_iceberg_readers_read_the_example_table_that_has_iceberg_metadata(lakehouse):
    """ods.orders declares ``iceberg=True``: its asset names its Iceberg metadata, from which
    pyiceberg reads the rows our engine reads."""
    from pyiceberg.table import StaticTable

    from dagster_lakehouse.metadata import ICEBERG_METADATA

    warehouse, runs = lakehouse
    table = Catalog(warehouse).get_table("ods.orders")
    ods = [m for m in _materializations(runs[DAYS[-1]]) if m.asset_key.path == ["ods", "orders"]]
    location = ods[0].metadata[ICEBERG_METADATA].value
    assert location == table.iceberg_metadata_location()
    ours = table.read()
    theirs = StaticTable.from_metadata(location).scan().to_arrow().select(ours.column_names).cast(ours.schema)
    order = [(c, "ascending") for c in ours.column_names]
    assert theirs.sort_by(order).equals(ours.sort_by(order))


def test_rerunning_a_day_is_idempotent(copy):
    catalog = Catalog(copy)
    before = {s: _sorted(catalog.get_table(s).read()) for s in SPECS}
    assert run_day(copy, DAYS[0]).success
    assert {s: _sorted(catalog.get_table(s).read()) for s in SPECS} == before


def test_a_backfill_is_one_run_with_one_commit_per_table(lakehouse, tmp_path):
    """Both days as one ranged run (single-run backfill policy): the same tables as the daily runs,
    each written by one snapshot."""
    warehouse = str(tmp_path / "warehouse")
    tags = {ASSET_PARTITION_RANGE_START_TAG: DAYS[0], ASSET_PARTITION_RANGE_END_TAG: DAYS[1]}
    run = materialize([*defs.assets, *defs.asset_checks], resources=resources(warehouse), tags=tags)
    assert run.success and all(c.passed for c in run.get_asset_check_evaluations())
    backfilled, daily = Catalog(warehouse), Catalog(lakehouse[0])
    for name in SPECS:
        table = backfilled.get_table(name)
        assert _sorted(table.read()) == _sorted(daily.get_table(name).read()), name
        kinds = [table.snapshot(i).commit_kind for i in table.snapshots.snapshot_ids()]
        assert len([k for k in kinds if k != CommitKind.COMPACT]) == 1, (name, kinds)
    assert all(policy.max_partitions_per_run is None for policy in _backfill_policies())
    # each day gets its own check evaluations and exact row counts
    evaluated = Counter(
        (c.asset_key.to_user_string(), c.check_name, c.partition)
        for c in run.get_asset_check_evaluations()
        if c.check_name != "column_schema_change"
    )
    assert set(evaluated.values()) == {1} and {p for *_, p in evaluated} == set(DAYS)
    for m in _materializations(run):
        table = backfilled.get_table(m.asset_key.to_user_string().replace("/", "."))
        day_rows = table.read(filter=col("dt") == m.partition).num_rows
        assert m.metadata["dagster/partition_row_count"].value == day_rows, m.asset_key


def _backfill_policies() -> list:
    return [a.backfill_policy for a in defs.assets if a.partitions_def is not None]


def test_snapshot_sensor_reacts_to_foreign_commits_once(copy):
    sensor = next(s for s in defs.sensors if s.name == "ods_orders_snapshots")
    table = Catalog(copy).get_table("ods.orders")
    latest = table.latest_snapshot_id()
    engine = {"lakehouse": LakehouseResource(warehouse=copy)}
    context = build_sensor_context(cursor=str(latest), resources=engine, definitions=defs)
    assert isinstance(sensor(context), SkipReason)  # Dagster's own snapshots are not news
    foreign = table.write(order_events(DAYS[1]).slice(0, 5))  # e.g. another Spark job or pypaimon
    result = sensor(context)
    assert isinstance(result, SensorResult) and result.cursor == str(foreign)
    (request,) = result.run_requests
    assert (
        request.run_key == f"ods.orders:{foreign}..{foreign}:{DAYS[1]}" and request.partition_key == DAYS[1]
    )
    downstream = {"dwd/orders", "dws/user_daily", "dws/order_wide"}  # transitively, not only children
    assert {k.to_user_string() for k in request.asset_selection} == downstream
    (observation,) = result.asset_events
    assert observation.metadata["snapshot_id"].value == foreign
    assert observation.metadata["rows_changed"].value == 5


def test_a_deletion_upstream_reaches_every_downstream_table(copy):
    """A foreign commit cancels a paid order: the sensor's run removes it from dwd.orders and both
    dws tables."""
    catalog = Catalog(copy)
    ods, wide = catalog.get_table("ods.orders"), catalog.get_table("dws.order_wide")
    paid = wide.read(filter=(col("dt") == DAYS[1]) & ~col("pay_method").is_null()).slice(0, 1).to_pylist()[0]
    events = order_events(DAYS[1])
    last = events.filter(np.asarray(events.column("order_id")) == paid["order_id"]).to_pylist()[-1]
    cancel = {**last, "event_id": 10**12, "event_type": "cancel", "status": "CANCELLED",
              "event_time": last["event_time"] + dt.timedelta(minutes=1)}  # fmt: skip
    ods.write(pa.Table.from_pylist([cancel], schema=ods.arrow_schema))
    sensor = next(s for s in defs.sensors if s.name == "ods_orders_snapshots")
    context = build_sensor_context(cursor=str(ods.latest_snapshot_id() - 1), definitions=defs,
                                   resources={"lakehouse": LakehouseResource(warehouse=copy)})  # fmt: skip
    (request,) = sensor(context).run_requests
    # the requested assets with their checks, as the daemon runs them (dwd.orders is published by its audit)
    selected = [a for a in defs.assets if a.key in request.asset_selection]
    requested = set(request.asset_selection)
    selected += [c for c in defs.asset_checks if {k.asset_key for k in c.check_keys} & requested]
    run = materialize(selected, resources=resources(copy), partition_key=request.partition_key)
    assert run.success
    for name in ("dwd.orders", "dws.order_wide"):
        rows = catalog.get_table(name).read(filter=col("order_id") == paid["order_id"])
        assert rows.num_rows == 0, name
    day = col("dt") == DAYS[1]
    dwd = catalog.get_table("dwd.orders").read(filter=day)
    daily = catalog.get_table("dws.user_daily").read(filter=day)
    assert pa.compute.sum(daily.column("order_count")).as_py() == dwd.num_rows


def test_compaction_sensor_requests_exactly_the_partitions_over_threshold(copy):
    sensor = next(s for s in defs.sensors if s.name == "compaction_sensor")
    context = build_sensor_context(resources={"lakehouse": LakehouseResource(warehouse=copy)})
    assert isinstance(sensor(context), SkipReason)  # one sorted run per bucket so far
    wide = Catalog(copy).get_table("dws.order_wide")
    rows = wide.read().filter(np.asarray(wide.read().column("dt")) == DAYS[0])
    for _ in range(2):  # two more sorted runs in every bucket of the first day (write-only table)
        wide.write(rows)
    (request,) = sensor(context)
    config = request.run_config["ops"]["compact_table"]["config"]
    assert config == {"table": "dws.order_wide", "partitions": [{"dt": DAYS[0]}], "full": False}
    with DagsterInstance.ephemeral() as instance:
        compact = defs.resolve_job_def("compact_job")
        done = compact.execute_in_process(
            run_config=request.run_config, instance=instance, resources=resources(copy)
        )
    assert done.success
    compacted = wide.refresh().snapshot()
    assert compacted.commit_kind == CommitKind.COMPACT and compacted.commit_user == f"dagster-{done.run_id}"
    assert isinstance(sensor(context), SkipReason)
    assert not any(s.needs_compaction for s in wide.refresh().lsm_shape())
    observed = [
        e.event_specific_data.asset_observation
        for e in done.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    assert all(v.value >= 0 for o in observed for v in o.metadata.values() if isinstance(v.value, int))


def test_expire_job_expires_snapshots_and_removes_orphans(copy):
    table = Catalog(copy).get_table("dwd.orders")
    bucket = table.bucket_path(table.live_entries()[0].partition, 0)
    orphan = Path(table.paths.root) / bucket / "data-orphan.parquet"
    orphan.write_bytes(b"left by a crashed writer")
    config = {"ops": {"expire_and_clean": {"config": {"tables": ["dwd.orders"], "orphan_min_age_ms": 0}}}}
    table.set_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    with DagsterInstance.ephemeral() as instance:
        done = defs.resolve_job_def("expire_job").execute_in_process(
            run_config=config, instance=instance, resources=resources(copy)
        )
    assert done.success and not orphan.exists()
    totals = done.output_for_node("expire_and_clean")
    assert totals["snapshots_expired"] > 0 and totals["orphan_files_deleted"] == 1
    assert len(table.refresh().snapshots.snapshot_ids()) == 1
    observed = [e for e in done.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    assert len(observed) == 1


def test_expire_job_expires_the_partitions_of_tables_that_set_an_expiration_time(copy):
    table = Catalog(copy).get_table("dwd.orders")
    table.set_options({"partition.expiration-time": "1 d"})  # both days are long past
    rows_before = table.read().num_rows
    with DagsterInstance.ephemeral() as instance:
        done = defs.resolve_job_def("expire_job").execute_in_process(
            instance=instance, resources=resources(copy)
        )
    assert done.success
    totals = done.output_for_node("expire_partitions")
    assert (totals["tables"], totals["partitions_expired"]) == (1, 2)
    assert totals["files_dropped"] > 0 and totals["rows_dropped"] >= rows_before > 0
    assert table.read().num_rows == 0
    snap = table.refresh().snapshot()
    assert snap.commit_kind == CommitKind.OVERWRITE and snap.commit_user == f"dagster-{done.run_id}"
    observed = [
        e.event_specific_data.asset_observation
        for e in done.all_events
        if e.event_type_value == "ASSET_OBSERVATION" and e.step_key == "expire_partitions"
    ]
    assert [o.asset_key.to_user_string() for o in observed] == ["dwd/orders"]
    assert observed[0].metadata["expired_partitions"].value == [{"dt": d} for d in DAYS]


def test_a_failing_dwd_check_blocks_the_downstream_tables(copy, monkeypatch):
    from lakehouse.ops.file_index import IndexReport
    from lakehouse.table.table import Table

    failing = IndexReport(False, 1, ["injected: a key visible twice"])
    monkeypatch.setattr(Table, "verify_primary_key", lambda self, snapshot_id=None, partitions=None: failing)
    run = materialize([*defs.assets, *defs.asset_checks], resources=resources(copy), partition_key=DAYS[1],
                      raise_on_error=False)  # fmt: skip
    written = {m.asset_key.to_user_string() for m in _materializations(run)}
    assert written == {"ods/orders", "dwd/orders"}  # dws tables wait for a passing check
    failed = [c for c in run.get_asset_check_evaluations() if not c.passed]
    assert failed and all("injected" in str(c.metadata["problems"].value) for c in failed)


# ---- injected corruption: the index check of dwd.orders fails, naming the problem ---------------


def _index_container(table, nth: int = 0) -> tuple[Path, dict]:
    entry = table.live_entries()[nth]
    directory = Path(table.paths.root) / table.bucket_path(entry.partition, entry.bucket)
    path = directory / entry.file.extra_files[0]
    return path, format.read(path.read_bytes())


def _check(copy: str):
    result = index_result(Catalog(copy).get_table("dwd.orders"))
    return result.passed, result.metadata["problems"].value


def test_a_zeroed_bloom_filter_fails_the_index_check(copy):
    assert _check(copy)[0]
    path, container = _index_container(Catalog(copy).get_table("dwd.orders"))
    stored = container["user_id"]["bloom-filter"]
    container["user_id"]["bloom-filter"] = stored[:4] + bytes(len(stored) - 4)  # keep the hash count
    path.write_bytes(format.write(container))
    passed, problems = _check(copy)
    assert not passed and any("bloom" in p and "user_id" in p for p in problems)


def test_an_edited_bitmap_fails_the_index_check(copy):
    table = Catalog(copy).get_table("dwd.orders")
    path, container = _index_container(table, 1)
    import pyarrow.parquet as pq

    statuses = pq.ParquetFile(str(path).removesuffix(".index")).read(columns=["status"]).column("status")
    edited = statuses.to_pylist()
    edited[0] = "CANCELLED"
    container["status"]["bitmap"] = bitmap.build(__import__("pyarrow").array(edited), parse_type("STRING"))
    path.write_bytes(format.write(container))
    passed, problems = _check(copy)
    assert not passed and any("bitmap" in p and "status" in p for p in problems)


def test_an_index_configured_after_the_files_is_a_warning_until_rewritten(copy):
    table = Catalog(copy).get_table("dwd.orders")
    table.set_options({"file-index.bloom-filter.columns": "user_id,order_id"})
    stale = index_result(table)
    assert not stale.passed and stale.severity == AssetCheckSeverity.WARN  # downstream still runs
    assert stale.metadata["problems"].value == [] and stale.metadata["file_indexes_coverage"].value < 1
    assert all("order_id" in m for m in stale.metadata["file_indexes_missing"].value)
    table.rewrite_file_index()
    rewritten = index_result(table.refresh())
    assert rewritten.passed and rewritten.metadata["file_indexes_coverage"].value == 1.0


def test_a_runs_index_check_proves_the_files_the_run_wrote(copy):
    table = Catalog(copy).get_table("dwd.orders")
    first_day = next(
        i for i, e in enumerate(table.live_entries()) if DAYS[0] in table.bucket_path(e.partition, 0)
    )
    path, container = _index_container(table, first_day)  # a file of an earlier run's day
    stored = container["user_id"]["bloom-filter"]
    container["user_id"]["bloom-filter"] = stored[:4] + bytes(len(stored) - 4)
    path.write_bytes(format.write(container))
    run = run_day(copy, DAYS[1])  # writes the second day's files again
    [evaluation] = [
        c
        for c in run.get_asset_check_evaluations()
        if c.asset_key.to_user_string() == "dwd/orders" and c.check_name == "indexes_match_data"
    ]
    assert evaluation.passed and 0 < evaluation.metadata["file_indexes_checked"].value < len(
        table.live_entries()
    )
    assert not _check(copy)[0]  # invoked outside a run, the check proves every file, and finds it


def test_a_key_in_the_wrong_bucket_fails_the_index_check(copy):
    table = Catalog(copy).get_table("dwd.orders")
    first, second = [e for e in table.index_entries() if e.index_file.index_type == hash_index.HASH_INDEX][:2]
    a, b = (hash_index.read(table.io, table.paths, e.index_file) for e in (first, second))
    a[0], b[0] = b[0], a[0]  # each bucket's index now claims a key of the other
    for entry, hashes in ((first, a), (second, b)):
        Path(table.paths.index_file(entry.index_file.file_name)).write_bytes(hash_index.encode(hashes))
    passed, problems = _check(copy)
    assert not passed and any("not in its HASH file" in p for p in problems)


def _materializations(run):
    return [e.event_specific_data.materialization for e in run.get_asset_materialization_events()]


def _sorted(table) -> list[dict]:
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def test_generator_is_deterministic():
    assert order_events(DAYS[0]).equals(order_events(DAYS[0]))
    assert order_events(DAYS[0]).column("price").type.scale == 2
    assert all(isinstance(v, Decimal) for v in order_events(DAYS[0]).column("price").to_pylist()[:3])


def test_launchpad_refuses_an_unknown_table_before_the_run_starts():
    from dagster import DagsterInvalidConfigError

    config = {"ops": {"compact_table": {"config": {"table": "dws.order_wid"}}}}
    with pytest.raises(DagsterInvalidConfigError, match="not in enum"):
        defs.resolve_job_def("compact_job").execute_in_process(
            run_config=config, resources=resources("/nowhere")
        )
    schema = defs.resolve_job_def("compact_job").run_config_schema.config_type
    table = schema.fields["ops"].config_type.fields["compact_table"].config_type.fields["config"]
    assert {v.config_value for v in table.config_type.fields["table"].config_type.enum_values} == set(SPECS)


def test_every_job_runs_in_one_process():
    """Backfills and UI launches run implicit asset jobs: they share the definitions' executor."""
    repo = defs.get_repository_def()
    assert {j.executor_def.name for j in repo.get_all_jobs()} == {"in_process"}
