"""Run metadata from a run's own snapshots (other runs committing in between change nothing),
exact per-partition counts, and the column schema Dagster shows on the asset page."""

import pyarrow as pa
import pytest

from assets.definitions import defs
from dagster_lakehouse.metadata import column_schema, partition_metadata, run_commits, run_metadata
from dagster_lakehouse.spec import asset_key
from lakehouse import Catalog, Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), False, metadata={"description": "the order"}),
        pa.field("dt", pa.string(), False),
        pa.field("v", pa.int64()),
    ]
)


def _table(tmp_path):
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    return catalog.create_table(
        "db.t", schema=SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "1"}
    )


def _rows(n: int, dt: str) -> pa.Table:
    return pa.table({"id": list(range(n)), "dt": [dt] * n, "v": [1] * n})


def test_a_runs_metadata_counts_only_its_own_snapshots(tmp_path):
    table = _table(tmp_path)
    since = table.write(_rows(5, "2024-01-01"), commit_user="other")
    table.write(_rows(3, "2024-01-02"), commit_user="dagster-run-a")
    table.write(_rows(7, "2024-01-03"), commit_user="dagster-run-b")  # an overlapping run
    table.write(_rows(4, "2024-01-02"), commit_user="dagster-run-a")
    metadata = run_metadata(table, "dagster-run-a", since)
    assert metadata["rows_written"].value == 7
    assert metadata["partitions_touched"].value == [{"dt": "2024-01-02"}]
    assert metadata["snapshot_id"].value == table.latest_snapshot_id()
    assert metadata["dagster/row_count"].value == 5 + 4 + 7
    days = partition_metadata(table, ["2024-01-02", "2024-01-04"], "dagster-run-a", since)
    counts = {d: (m["rows_written"].value, m["dagster/partition_row_count"].value) for d, m in days.items()}
    assert counts == {"2024-01-02": (7, 4), "2024-01-04": (0, 0)}
    assert run_metadata(table, "dagster-run-c", since)["rows_written"].value == 0


def test_a_materialization_counts_the_tables_rows_once(tmp_path, monkeypatch):
    """The run's snapshots, listed once, and the partitions' rows as of its last, counted once,
    give both the days' and the table's counts; another run's later commit is not in them."""
    table = _table(tmp_path)
    since = table.write(_rows(5, "2024-01-01"), commit_user="other")
    table.write(_rows(3, "2024-01-02"), commit_user="dagster-run-a")
    table.write(_rows(7, "2024-01-02"), commit_user="dagster-run-b")  # after the run's last commit
    run = run_commits(table, "dagster-run-a", since)
    assert run.counts == {("2024-01-01",): 5, ("2024-01-02",): 3}
    monkeypatch.setattr(Table, "partition_row_counts", lambda *a, **k: pytest.fail("counted twice"))
    monkeypatch.setattr(Table, "list_snapshots", lambda *a, **k: pytest.fail("listed twice"))
    days = partition_metadata(table, ["2024-01-02"], "dagster-run-a", since, run)
    assert days["2024-01-02"]["dagster/partition_row_count"].value == 3
    assert run_metadata(table, "dagster-run-a", since, run)["dagster/row_count"].value == 8


def test_the_column_schema_names_keys_and_comments(tmp_path):
    schema = column_schema(_table(tmp_path).schema)
    columns = {c.name: c for c in schema.columns}
    assert columns["id"].type == "BIGINT" and columns["id"].description == "the order"
    assert not columns["id"].constraints.nullable and columns["v"].constraints.nullable
    assert columns["id"].constraints.other == ["primary key"]
    assert columns["dt"].constraints.other == ["primary key, partition key"]
    assert schema.constraints.other == ["primary key: id, dt", "partitioned by: dt"]


def test_assets_show_their_schema_before_the_first_run():
    for name in ("ods.orders", "dwd.orders", "dws.user_daily", "dws.order_wide"):
        metadata = defs.get_assets_def(asset_key(name)).metadata_by_key[asset_key(name)]
        assert metadata["dagster/table_name"].value == name
        assert [c.name for c in metadata["dagster/column_schema"].value.columns]
