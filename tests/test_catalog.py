from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.errors import (
    DatabaseExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    TableExistsError,
    TableNotFoundError,
)

from .conftest import ORDERS, orders


def test_databases(warehouse):
    cat = Catalog(warehouse)
    assert cat.list_databases() == []
    cat.create_database("b")
    cat.create_database("a")
    cat.create_database("a", ignore_if_exists=True)
    assert cat.list_databases() == ["a", "b"]
    with pytest.raises(DatabaseExistsError, match="'a' already exists"):
        cat.create_database("a")
    cat.drop_database("b")
    assert cat.list_databases() == ["a"]
    with pytest.raises(DatabaseNotFoundError):
        cat.drop_database("b")
    cat.drop_database("b", ignore_if_not_exists=True)


def test_tables(catalog, warehouse):
    t = catalog.create_table(
        "db.orders", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    assert catalog.list_tables("db") == ["orders"]
    same = catalog.create_table("db.orders", ORDERS, ignore_if_exists=True)
    assert same.primary_keys == ["order_id", "dt"]
    with pytest.raises(TableExistsError, match="db.orders already exists"):
        catalog.create_table("db.orders", ORDERS)
    t.write(orders(range(3)))
    again = Catalog(warehouse).get_table("db.orders")
    assert again.read().num_rows == 3 and again.partition_keys == ["dt"]
    catalog.drop_table("db.orders")
    assert catalog.list_tables("db") == []
    with pytest.raises(TableNotFoundError, match="db.orders does not exist"):
        catalog.get_table("db.orders")
    catalog.drop_table("db.orders", ignore_if_not_exists=True)


def test_a_handle_of_a_dropped_table_refuses_schema_changes_and_writes(catalog, warehouse):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    t.write(pa.table({"id": [1]}))
    catalog.drop_table("db.t")
    with pytest.raises(TableNotFoundError, match=r"table db\.t has no schema files .* it was dropped"):
        t.add_column("x", pa.int32())
    with pytest.raises(TableNotFoundError, match=r"table db\.t has no schema files .* it was dropped"):
        t.write(pa.table({"id": [2]}))
    assert [p for p in Path(warehouse).rglob("*") if p.is_file()] == []  # the refused write left nothing


def test_database_with_tables_is_not_dropped_without_cascade(catalog):
    catalog.create_table("db.t", pa.schema([("x", pa.int32())]))
    with pytest.raises(DatabaseNotEmptyError, match=r"\['t'\]"):
        catalog.drop_database("db")
    catalog.drop_database("db", cascade=True)
    assert catalog.list_databases() == []


def test_table_needs_its_database(warehouse):
    cat = Catalog(warehouse)
    with pytest.raises(DatabaseNotFoundError, match="create_database"):
        cat.create_table("nowhere.t", ORDERS)
    with pytest.raises(TableNotFoundError, match="no database 'nowhere'"):
        cat.get_table("nowhere.t")


def test_warehouse_uri_with_file_scheme(tmp_path):
    cat = Catalog(f"file://{tmp_path}/wh")
    cat.create_database("db")
    t = cat.create_table("db.t", ORDERS)
    t.write(orders([1, 2]))
    assert Catalog(str(tmp_path / "wh")).get_table("db.t").read().num_rows == 2


@pytest.mark.parametrize("identifier", ["nodot", "a.b.c", ".t", "db.bad name"])
def test_malformed_identifiers(catalog, identifier):
    with pytest.raises(ValueError):
        catalog.get_table(identifier)
