from __future__ import annotations

import pyarrow as pa

from assets.definitions import defs
from dagster_lakehouse.resources import LakehouseResource


def test_definitions_load_with_the_engine_resource():
    assert "lakehouse" in defs.resources


def test_resource_hands_back_the_catalog_and_tables(warehouse):
    resource = LakehouseResource(warehouse=warehouse)
    catalog = resource.catalog()
    catalog.create_database("db")
    catalog.create_table("db.t", pa.schema([("x", pa.int32())])).write(
        pa.table({"x": pa.array([1], pa.int32())})
    )
    assert resource.table("db.t").read().num_rows == 1


def test_default_warehouse_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", str(tmp_path))
    from dagster_lakehouse.resources import default_warehouse

    assert default_warehouse() == str(tmp_path)
