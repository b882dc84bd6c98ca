"""pypaimon, the official Paimon Python client, against the REST catalog server: it creates,
writes, reads and alters a table through the server, and this engine's filesystem catalog reads
the same rows and schema from the same files."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse import Catalog
from lakehouse.rest.grants import Grants
from lakehouse.rest.server import create_app
from tests.rest.live_server import LiveServer

pytestmark = pytest.mark.interop

TOKEN = "pypaimon-token"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string())])


@pytest.fixture
def server(warehouse):
    with LiveServer(create_app(warehouse, Grants.single(TOKEN), name="wh")) as server:
        yield server


@pytest.fixture
def pypaimon_catalog(server):
    """pypaimon's REST catalog on the server (pypaimon is imported here: this module collects
    where it is not installed)."""
    from pypaimon import CatalogFactory

    options = {"metastore": "rest", "uri": server.uri, "warehouse": "wh", "token.provider": "bear"}
    return CatalogFactory.create({**options, "token": TOKEN})


def write(table, data: pa.Table) -> None:
    builder = table.new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(data)
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


def read(table) -> pa.Table:
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits()).sort_by("id")


def batch(ids: list[int], dt: str) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "dt": [dt] * len(ids)}, schema=SCHEMA)


def test_pypaimon_writes_and_reads_through_the_server_and_the_engine_reads_the_files(
    pypaimon_catalog, warehouse
):
    from pypaimon import Schema

    pypaimon_catalog.create_database("db", False)
    pypaimon_catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"]), False)
    table = pypaimon_catalog.get_table("db.t")
    assert read(table).num_rows == 0  # no snapshot yet: a 404 SNAPSHOT, an empty table
    write(table, batch([1, 2], "2024-01-01"))
    write(table, batch([3], "2024-01-02"))
    expected = pa.concat_tables([batch([1, 2], "2024-01-01"), batch([3], "2024-01-02")])
    assert read(pypaimon_catalog.get_table("db.t")).equals(expected)
    ours = Catalog(warehouse).load_table("db.t")
    assert ours.latest_snapshot_id() == 2
    assert ours.read().sort_by("id").select(SCHEMA.names).cast(SCHEMA).equals(expected)
    partitions = pypaimon_catalog.list_partitions_paged("db.t").elements
    assert sorted((p.spec["dt"], p.record_count) for p in partitions) == [
        ("2024-01-01", 2),
        ("2024-01-02", 1),
    ]
    assert pypaimon_catalog.list_databases() == ["db"] and pypaimon_catalog.list_tables("db") == ["t"]


def test_pypaimon_alters_the_table_and_both_see_it(pypaimon_catalog, warehouse):
    from pypaimon import Schema
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    pypaimon_catalog.create_database("db", False)
    pypaimon_catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA), False)
    write(pypaimon_catalog.get_table("db.t"), batch([1], "d"))
    changes = [
        SchemaChange.add_column("score", AtomicType("INT")),
        SchemaChange.set_option("snapshot.num-retained.min", "4"),
    ]
    pypaimon_catalog.alter_table("db.t", changes, False)
    theirs = pypaimon_catalog.get_table("db.t")
    assert [f.name for f in theirs.table_schema.fields] == ["id", "name", "dt", "score"]
    write(theirs, pa.table({**batch([2], "d").to_pydict(), "score": pa.array([7], pa.int32())}))
    ours = Catalog(warehouse).load_table("db.t")
    assert ours.schema.id == 1 and ours.options["snapshot.num-retained.min"] == "4"
    assert ours.read().sort_by("id")["score"].to_pylist() == [None, 7]
    assert read(theirs)["score"].to_pylist() == [None, 7]
    pypaimon_catalog.rename_table("db.t", "db.u")
    assert Catalog(warehouse).list_tables("db") == ["u"]
    pypaimon_catalog.drop_table("db.u", False)
    assert Catalog(warehouse).list_tables("db") == []


def test_both_engines_share_a_table_through_the_server(pypaimon_catalog, server):
    """Our engine and pypaimon, both clients of the server, commit in turn to one table and read
    the same rows."""
    from pypaimon import Schema

    pypaimon_catalog.create_database("db", False)
    pypaimon_catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA), False)
    ours = Catalog(server.uri, options={"warehouse": "wh", "token": TOKEN}).load_table("db.t")
    write(pypaimon_catalog.get_table("db.t"), batch([1], "d"))
    ours.write(batch([2], "d"))
    write(pypaimon_catalog.get_table("db.t"), batch([3], "d"))
    ours.write(batch([4], "d"))
    expected = batch([1, 2, 3, 4], "d")
    assert read(pypaimon_catalog.get_table("db.t")).equals(expected)
    assert ours.read().sort_by("id").cast(SCHEMA).equals(expected)
    assert [s.commit_kind for s in ours.list_snapshots()] == ["APPEND"] * 4
