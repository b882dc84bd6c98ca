"""The README's quickstart runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse import Catalog
from lakehouse.store import consumers

README = Path(__file__).resolve().parents[1] / "README.md"


def run_sections(*headings: str) -> dict:
    """Run the first Python block under each README heading (``## Quickstart``...), in order, in
    one scope (in the current directory); the scope."""
    text = README.read_text()
    scope: dict = {}
    for heading in headings:
        code = re.search(rf"{re.escape(heading)}\n\n.*?```python\n(.*?)```", text, re.S).group(1)
        exec(compile(code, str(README), "exec"), scope)
    return scope


def test_quickstart_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_sections("## Quickstart")
    rows = scope["orders"].read().to_pylist()
    assert rows == [{"order_id": 1, "dt": "2024-01-01", "status": "PAID", "price": 9.5, "remark": None}]
    assert scope["orders"].latest_snapshot_id() == 5  # the last one swaps in indexed file metadata


@pytest.mark.iceberg
def test_the_iceberg_section_runs_after_the_quickstart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_sections("## Quickstart", "## Reading from Iceberg engines")
    assert scope["ones"]["user_id"].to_list() == [1, 1]
    assert sorted(scope["per_day"]) == [("2024-01-01", 3), ("2024-01-02", 1)]
    assert scope["first_day"].num_rows == 3  # Iceberg time travel to the tag
    assert scope["location"].endswith("/shop.db/visits/metadata/v2.metadata.json")


@pytest.mark.spark
def test_spark_section_runs_after_the_quickstart(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_sections("## Quickstart", "## Spark")
    assert scope["spark"] is spark
    assert scope["orders"].snapshot(scope["orders"].latest_snapshot_id()).commit_kind.name == "COMPACT"
    assert scope["catalog"].get_table("shop.events").read().num_rows == 1


@pytest.mark.spark
def test_streaming_writes_section_runs_after_the_spark_one(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_sections("## Quickstart", "## Spark", "### Streaming writes")
    latest = scope["orders"].snapshot()
    assert (latest.commit_user, latest.commit_identifier) == (scope["query"].id, 0)
    assert [r["order_id"] for r in scope["orders"].read().to_pylist() if r["dt"] == "2024-01-02"] == [7]


@pytest.mark.spark
def test_streaming_reads_section_runs_after_the_quickstart(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = run_sections("## Quickstart", "## Streaming reads")
    got = spark.read.parquet(str(tmp_path / "order_changes")).collect()
    assert [(r.order_id, r.status, r._row_kind) for r in got] == [(1, "PAID", "+I")]
    assert list(consumers.consumers(scope["orders"].store)) == ["audit"]


@pytest.mark.dagster
def test_io_manager_section_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_sections("### Plain assets: the IO manager")
    catalog = Catalog(str(tmp_path / "warehouse"))
    assert catalog.get_table("shop.low_stock").read().to_pylist() == [
        {"dt": "2026-01-02", "sku": "apple", "units": 3}
    ]
    assert catalog.get_table("shop.stock").primary_keys == ["dt", "sku"]
