"""Incremental reads between snapshots, with row kinds, and consumers recording progress."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse.errors import CorruptFileError, InvalidArgumentError, SnapshotNotFoundError
from lakehouse.read.changes import replaced_partitions
from lakehouse.store import consumers
from lakehouse.store.partitions import partition_values

from .conftest import ORDERS, orders, pk_orders_table


def changes(t, start, end=None, **kw) -> list[tuple]:
    got = t.read_changes(start, end, **kw)
    return sorted(zip(*[got.column(c).to_pylist() for c in ("order_id", "price", "_row_kind")], strict=True))


def test_upserts_and_deletes_come_back_with_their_kinds(catalog):
    t = pk_orders_table(catalog)
    t.write(orders(range(3), price=1.0))
    t.write(orders([1], price=2.0).append_column("_row_kind", pa.array(["+U"])))
    t.write(orders([2]).append_column("_row_kind", pa.array(["-D"])))
    assert changes(t, 0, 1) == [(0, 1.0, "+I"), (1, 1.0, "+I"), (2, 1.0, "+I")]
    assert changes(t, 1) == [(1, 2.0, "+U"), (2, 1.0, "-D")]
    assert t.read_changes(3).column_names == [*ORDERS.names, "_row_kind"]
    assert t.read_changes(3).num_rows == 0


def test_compactions_change_nothing_and_appends_are_inserts(catalog):
    t = pk_orders_table(catalog)
    t.write(orders(range(4)))
    t.compact(full=True)
    assert t.snapshots.latest().commit_kind == "COMPACT"
    assert changes(t, 1) == []
    a = catalog.create_table("db.a", ORDERS)
    a.write(orders([5, 6]))
    a.write(orders([7]))
    assert changes(a, 1) == [(7, 1.0, "+I")]


def test_consumers_record_progress_and_hold_snapshots(catalog):
    t = pk_orders_table(catalog, **{"consumer-id": "etl"})
    for i in range(5):
        t.write(orders([i]))
    t.read_changes(0, 2)
    assert consumers.next_snapshot(t, "etl") == 3
    t.expire_snapshots(retain_min=1, older_than_ms=2**62)
    assert t.snapshots.earliest_id() == 3
    assert changes(t, 2) == [(2, 1.0, "+I"), (3, 1.0, "+I"), (4, 1.0, "+I")]


@pytest.mark.parametrize(
    "damage", [b'{"nextSnapshot": 1e999}', b'{"nextSnapshot": "3"}', b"[3]", b"{", b'{"nextSnapshot": true}']
)
def test_a_damaged_consumer_file_is_corrupt_naming_it(catalog, damage):
    t = pk_orders_table(catalog, **{"consumer-id": "etl"})
    t.write(orders([1]))
    t.read_changes(0, 1)
    Path(t.paths.consumer_dir, "consumer-etl").write_bytes(damage)
    with pytest.raises(CorruptFileError, match="consumer file .*consumer-etl is corrupt"):
        consumers.next_snapshot(t, "etl")


def test_bad_ranges(catalog):
    t = pk_orders_table(catalog)
    t.write(orders([1]))
    with pytest.raises(SnapshotNotFoundError):
        t.read_changes(0, 5)
    with pytest.raises(InvalidArgumentError):
        t.read_changes(1, 0)


def test_overwrites_are_skipped_as_in_paimon_delta_reads(catalog):
    t = pk_orders_table(catalog)
    t.write(orders([1, 2]))
    t.write(orders([3], price=2.0), overwrite=True)
    t.write(orders([4], price=3.0))
    assert t.snapshots.snapshot(2).commit_kind == "OVERWRITE"
    assert changes(t, 1) == [(4, 3.0, "+I")]


def test_replaced_partitions_are_those_overwrites_removed_rows_from(catalog):
    """A dynamic overwrite of an empty partition only adds (its files are changes under
    ``streaming-read-overwrite``); one that removes files, and any overwrite of a primary-key
    table, replaces its partitions; expired snapshots make the range unknowable."""
    a = catalog.create_table("db.a", ORDERS, partition_keys=["dt"])
    a.write(orders([1], dt="d1"))
    a.write(orders([2, 3], dt="d2"), overwrite={"dt": "d2"})  # d2 held nothing
    assert replaced_partitions(a.store, 0, 2) == set()
    assert changes(a, 1, 2) == []  # Paimon's default: overwrites are skipped
    assert changes(a, 1, 2, overwrites=True) == [(2, 1.0, "+I"), (3, 1.0, "+I")]
    a.write(orders([4], dt="d1"), overwrite={"dt": "d1"})  # d1 replaced
    assert {partition_values(a.schema, p)["dt"] for p in replaced_partitions(a.store, 1, 3)} == {"d1"}
    t = pk_orders_table(catalog)
    t.write(orders([1], dt="d1"))
    t.write(orders([2], dt="d2"), overwrite={"dt": "d2"})
    assert {partition_values(t.schema, p)["dt"] for p in replaced_partitions(t.store, 1, 2)} == {"d2"}
    a.expire_snapshots(retain_min=1, retain_max=1)
    assert replaced_partitions(a.store, 1, 3) is None
    assert replaced_partitions(a.store, 3, 3) == set()


def test_a_projected_incremental_read_decodes_its_columns_alone(catalog, monkeypatch):
    """A read of the changes of a range (``incremental-between``) decodes the columns it returns
    and filters on, not every column; an append table's rows are all inserts."""
    from lakehouse import col
    from lakehouse.read import changes as changes_module
    from lakehouse.rowkind import inserts

    a = catalog.create_table("db.a", ORDERS)
    a.write(orders([1, 2]))
    a.write(orders([3, 4], price=2.0))
    decoded = []
    read_data_file = changes_module.read_data_file

    def spy(table, bucket_path, meta, fields, system=()):
        decoded.append([f.name for f in fields])
        return read_data_file(table, bucket_path, meta, fields, system)

    monkeypatch.setattr(changes_module, "read_data_file", spy)
    builder = a.copy({"incremental-between": "1,2"}).new_read_builder()
    builder = builder.with_projection(["order_id"]).with_filter(col("price") > 1.5).with_row_kinds()
    got = builder.new_read().to_arrow(builder.new_scan().plan().splits)
    assert got.to_pydict() == {"order_id": [3, 4], "_row_kind": ["+I", "+I"]}
    assert decoded and all(sorted(names) == ["order_id", "price"] for names in decoded)
    assert inserts(3).equals(pa.array(["+I"] * 3)) and len(inserts(0)) == 0
