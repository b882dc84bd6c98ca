from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.errors import (
    DatabaseExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidOptionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from lakehouse.types import DataField, parse_type

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


def test_rename_table_within_and_across_databases(catalog, warehouse):
    table = catalog.create_table("db.orders", ORDERS, primary_keys=["order_id", "dt"])
    table.write(orders(range(3)))
    table.create_tag("first")
    catalog.rename_table("db.orders", "db.sales")
    assert catalog.list_tables("db") == ["sales"]
    catalog.create_database("other")
    catalog.rename_table("db.sales", "other.sales")
    moved = Catalog(warehouse).load_table("other.sales")
    assert moved.read().num_rows == 3 and moved.tags() == {"first": 1}
    with pytest.raises(TableNotFoundError, match="nothing to rename"):
        catalog.rename_table("db.sales", "db.x")
    catalog.rename_table("db.sales", "db.x", ignore_if_not_exists=True)
    with pytest.raises(DatabaseNotFoundError, match="'nowhere'"):
        catalog.rename_table("other.sales", "nowhere.sales")
    catalog.create_table("db.taken", ORDERS)
    with pytest.raises(TableExistsError, match="already exists"):
        catalog.rename_table("other.sales", "db.taken")
    assert catalog.list_tables("other") == ["sales"]


@pytest.mark.s3
def test_rename_table_is_refused_on_an_object_store():
    catalog = Catalog("s3://bucket/warehouse", options={"s3.endpoint": "http://127.0.0.1:1"})
    with pytest.raises(UnsupportedFeatureError, match="cannot rename a directory"):  # before any request
        catalog.rename_table("db.orders", "db.sales")


def test_create_table_from_fields_keeps_their_ids_and_validates_as_create_table(catalog):
    fields = [
        DataField(3, "id", parse_type("BIGINT")),
        DataField(7, "tags", parse_type({"type": "ROW", "fields": [{"id": 9, "name": "k", "type": "INT"}]})),
    ]
    table = catalog.create_table_from_fields("db.t", fields, primary_keys=["id"], options={"bucket": "2"})
    assert [f.id for f in table.schema.fields] == [3, 7] and table.schema.highest_field_id == 9
    assert not table.schema.field("id").type.nullable  # a primary key column is NOT NULL
    with pytest.raises(TableExistsError):
        catalog.create_table_from_fields("db.t", fields)
    with pytest.raises(SchemaMismatchError, match="field ids"):
        catalog.create_table_from_fields("db.u", [fields[0], DataField(3, "v", parse_type("INT"))])
    with pytest.raises(SchemaMismatchError, match="primary key"):
        catalog.create_table_from_fields("db.u", fields, primary_keys=["nope"])
    with pytest.raises(InvalidOptionError, match="first-row"):  # the mechanisms' checks too
        options = {"merge-engine": "first-row", "deletion-vectors.enabled": "true", "bucket": "1"}
        catalog.create_table_from_fields("db.u", fields, primary_keys=["id"], options=options)
    assert catalog.list_tables("db") == ["t"]
