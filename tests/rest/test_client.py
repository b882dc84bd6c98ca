"""This engine as a REST catalog client: every operation of the public API through a server,
the same files the filesystem catalog sees, and tokens that read but cannot write."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse import Catalog, col
from lakehouse.errors import (
    DatabaseExistsError,
    ForbiddenError,
    InvalidOptionError,
    NotAuthorizedError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
)
from tests.rest.server_process import ServerProcess

READER = "reader-token"
ORDERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("price", pa.float64())])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("rest")
    with ServerProcess(str(root / "warehouse"), root, tokens={READER: {"*": "read"}}) as server:
        yield server


@pytest.fixture
def catalog(server):
    catalog = Catalog(server.uri, options={"token": server.admin})
    for database in catalog.list_databases():
        catalog.drop_database(database, cascade=True)
    catalog.create_database("shop")
    return catalog


def orders(ids, dt="2024-01-01", price=1.0):
    return pa.table({"id": ids, "dt": [dt] * len(ids), "price": [price] * len(ids)}, schema=ORDERS)


def test_databases_and_tables(server, catalog):
    catalog.create_database("shop", ignore_if_exists=True)
    with pytest.raises(DatabaseExistsError):
        catalog.create_database("shop")
    catalog.create_table("shop.orders", ORDERS, partition_keys=["dt"])
    with pytest.raises(TableExistsError):
        catalog.create_table("shop.orders", ORDERS)
    assert catalog.list_databases() == ["shop"]
    assert catalog.list_tables("shop") == ["orders"]
    assert catalog.table_exists("shop.orders") and not catalog.table_exists("shop.nothing")
    catalog.drop_table("shop.orders")
    assert catalog.list_tables("shop") == []
    with pytest.raises(TableNotFoundError):
        catalog.load_table("shop.orders")


def test_writes_reads_and_maintenance_of_a_primary_key_table(server, catalog):
    table = catalog.create_table(
        "shop.orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
        options={"bucket": "2", "file-index.bloom-filter.columns": "price"},
    )  # fmt: skip
    first = table.write(orders([1, 2, 3]))
    table.write(orders([2, 4], price=9.0))
    table.write(orders([5], dt="2024-01-02"), overwrite={"dt": "2024-01-02"})
    assert sorted(table.read(filter=col("price") > 5)["id"].to_pylist()) == [2, 4]
    assert table.read().num_rows == 5
    table.create_tag("first", snapshot_id=first)
    assert table.plan(filter=col("dt") == "2024-01-02").stats["files_selected"] == 1
    table.compact(full=True)
    table.rewrite_file_index()
    assert table.verify_file_indexes().ok
    assert table.read(tag="first").num_rows == 3
    changes = table.read_changes(first, table.latest_snapshot_id())
    assert changes.num_rows > 0
    table.rollback_to(tag="first")
    assert table.read().num_rows == 3
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert table.remove_orphan_files(older_than_ms=0, dry_run=True) is not None
    files = Catalog(server.warehouse)  # the filesystem catalog reads what the server wrote
    assert files.load_table("shop.orders").read().sort_by("id").equals(table.read().sort_by("id"))
    snapshots = catalog.get_table("shop.orders$snapshots").read()
    assert snapshots.num_rows == 1
    options = catalog.get_table("sys.catalog_options").read().to_pydict()
    assert dict(zip(options["key"], options["value"], strict=True))["token"] == "******"


def test_schema_changes_go_through_the_server(server, catalog):
    table = catalog.create_table("shop.orders", ORDERS)
    table.write(orders([1]))
    table.set_options({"snapshot.num-retained.min": "5"})
    table.add_column("note", pa.string())
    table.rename_column("note", "remark")
    table.alter_column_type("remark", pa.large_string())
    table.drop_column("remark")
    table.remove_options(["snapshot.num-retained.min"])
    assert table.schema.id == 6
    with pytest.raises(SchemaMismatchError):
        table.alter_column_type("price", pa.int32())
    again = catalog.load_table("shop.orders")
    assert again.schema.id == 6 and again.arrow_schema.names == ["id", "dt", "price"]


def test_branches_commit_through_the_server(server, catalog):
    table = catalog.create_table("shop.orders", ORDERS)
    table.write(orders([1]))
    table.create_branch("dev", snapshot_id=table.latest_snapshot_id())
    dev = catalog.load_table("shop.orders$branch_dev")
    dev.write(orders([2]))
    assert sorted(dev.read()["id"].to_pylist()) == [1, 2]
    assert table.read()["id"].to_pylist() == [1]


def test_a_read_token_reads_but_cannot_change_anything(server, catalog):
    table = catalog.create_table("shop.orders", ORDERS)
    table.write(orders([1]))
    reader = Catalog(server.uri, options={"token": READER})
    seen = reader.load_table("shop.orders")
    assert seen.read()["id"].to_pylist() == [1]
    for change in (
        lambda: seen.write(orders([2])),
        lambda: seen.set_options({"snapshot.num-retained.min": "3"}),
        lambda: reader.drop_table("shop.orders"),
        lambda: reader.create_table("shop.other", ORDERS),
        lambda: reader.create_database("other"),
    ):
        with pytest.raises(ForbiddenError):
            change()
    assert catalog.load_table("shop.orders").latest_snapshot_id() == table.latest_snapshot_id()
    assert catalog.load_table("shop.orders").schema.id == 0
    assert catalog.list_tables("shop") == ["orders"] and catalog.list_databases() == ["shop"]


def test_the_server_named_by_paimons_options(server, catalog):
    """``metastore=rest`` and ``uri``, the catalog's name as its warehouse (Paimon's options)."""
    named = Catalog("lakehouse", options={"metastore": "rest", "uri": server.uri, "token": server.admin})
    assert named.list_databases() == ["shop"]
    with pytest.raises(InvalidOptionError, match="warehouse"):
        Catalog("elsewhere", options={"metastore": "rest", "uri": server.uri, "token": server.admin})


def test_no_token_or_a_wrong_one_is_refused(server):
    with pytest.raises(InvalidOptionError, match="token"):
        Catalog(server.uri)
    with pytest.raises(NotAuthorizedError):
        Catalog(server.uri, options={"token": "not-a-token"})


def test_a_handle_of_a_dropped_and_recreated_table_cannot_commit_to_the_new_one(server, catalog):
    old = catalog.create_table("shop.orders", ORDERS)
    catalog.drop_table("shop.orders")
    catalog.create_table("shop.orders", ORDERS)
    with pytest.raises(TableNotFoundError):
        old.write(orders([1]))
    assert catalog.load_table("shop.orders").latest_snapshot_id() is None


def test_tables_rename(server, catalog):
    table = catalog.create_table("shop.orders", ORDERS)
    table.write(orders([1]))
    catalog.rename_table("shop.orders", "shop.sales")
    assert catalog.list_tables("shop") == ["sales"]
    assert catalog.load_table("shop.sales").read()["id"].to_pylist() == [1]
