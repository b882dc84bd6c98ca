"""Bad input beyond the data-driven cases of ``tests/faults/bad_inputs.py``: a failure after files
were written, every damage of every metadata and data file, and the error hierarchy."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse import col
from lakehouse.errors import (
    CorruptFileError,
    LakehouseError,
    SchemaMismatchError,
)
from lakehouse.write import table_write

from .conftest import ORDERS, orders, rows
from .faults.metadata_fuzz import recoded


@pytest.fixture
def table(catalog):
    t = catalog.create_table(
        "db.orders", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    t.write(orders([1, 2, 3]))
    return t


@pytest.fixture
def append_table(catalog):
    """An append table: its buffer is flushed a half at a time in the background, whose errors
    the write raises all the same."""
    t = catalog.create_table("db.orders", ORDERS, partition_keys=["dt"])
    t.write(orders([1, 2, 3]))
    return t


KINDS = ["table", "append_table"]  # primary key, append


def _files(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def _unchanged(table, before_files, before_rows):
    assert table.latest_snapshot_id() == 1
    assert rows(table.read()) == before_rows
    assert _files(table.paths.root) == before_files  # no data file or manifest left behind


@pytest.mark.parametrize("kind", KINDS)
def test_a_failure_after_some_files_were_written_removes_them(request, kind):
    table = request.getfixturevalue(kind)
    # every batch flushes to files: they exist before the failure
    table.set_options({"write-buffer-size": "1 b", "write-buffer-spillable": "false"})
    before_files, before_rows = _files(table.paths.root), rows(table.read())
    nullable = ORDERS.set(0, pa.field("order_id", pa.int64()))
    good = orders(range(10, 20)).cast(nullable).to_batches(max_chunksize=3)
    bad = pa.table({**orders([30]).to_pydict(), "order_id": pa.array([None], pa.int64())}, schema=nullable)
    seen = []

    def batches():
        for b in good:
            yield b
            seen.append(len(_files(table.paths.root)))
        yield from bad.to_batches()

    with pytest.raises(SchemaMismatchError, match="column 'order_id'"):
        table.write(pa.RecordBatchReader.from_batches(nullable, batches()))
    assert max(seen) > len(before_files)  # files did exist before the bad batch arrived
    _unchanged(table, before_files, before_rows)


CHANGES = {  # what a batch of a stream changes, and what the error says
    "a column's type": (
        lambda t: t.set_column(3, "price", t.column("price").cast(pa.string())),
        "column 'price' of table db.orders is double; data of type string cannot be cast",
    ),
    "a missing column": (lambda t: t.drop_columns(["status"]), r"missing columns \['status'\]"),
    "an unknown column": (
        lambda t: t.append_column("note", pa.array(["x"] * t.num_rows)),
        r"unknown columns \['note'\]",
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_reader_whose_schema_changes_after_a_flush_is_a_schema_mismatch(request, kind, change):
    """The bad batch arrives after files were flushed, and joins rows of the reader's schema in
    the buffer."""
    table = request.getfixturevalue(kind)
    table.set_options({"write-buffer-size": "8 kb", "write-buffer-spillable": "false"})
    before_files, before_rows = _files(table.paths.root), rows(table.read())
    alter, message = CHANGES[change]
    seen = []

    def batches():
        for b in orders(range(10, 400)).to_batches(max_chunksize=50):
            yield b
            seen.append(len(_files(table.paths.root)))
        yield from alter(orders(range(500, 550))).to_batches()

    with pytest.raises(SchemaMismatchError, match=message):
        table.write(pa.RecordBatchReader.from_batches(ORDERS, batches()))
    assert max(seen) > len(before_files)  # the first flush wrote files before the bad batch came
    _unchanged(table, before_files, before_rows)


def test_a_background_flush_that_fails_fails_the_write_and_leaves_the_table_unchanged(
    append_table, monkeypatch
):
    """Halves of 4 kb flushed in the background: the bad batch is followed by more rows, so it
    is conformed on a flush thread, whose error the next flush raises."""
    monkeypatch.setattr(table_write, "SMALLEST_SHARE", 1)  # every flush a half, whatever its buckets
    append_table.set_options({"write-buffer-size": "8 kb"})
    before_files, before_rows = _files(append_table.paths.root), rows(append_table.read())
    failed_on = []
    conform = table_write.conform_pieces

    def noted(*args):
        try:
            return conform(*args)
        except SchemaMismatchError:
            failed_on.append(threading.current_thread())
            raise

    monkeypatch.setattr(table_write, "conform_pieces", noted)
    alter, message = CHANGES["a column's type"]

    def batches():
        yield from orders(range(10, 200)).to_batches(max_chunksize=50)
        yield from alter(orders(range(500, 550))).to_batches()
        yield from orders(range(600, 1000)).to_batches(max_chunksize=50)

    with pytest.raises(SchemaMismatchError, match=message):
        append_table.write(pa.RecordBatchReader.from_batches(ORDERS, batches()))
    assert failed_on and failed_on[0] is not threading.main_thread()
    _unchanged(append_table, before_files, before_rows)


def test_a_reader_whose_declared_schema_does_not_fit_is_a_schema_mismatch(table):
    before_files, before_rows = _files(table.paths.root), rows(table.read())
    data = CHANGES["a column's type"][0](orders(range(10, 20)))
    with pytest.raises(SchemaMismatchError, match="column 'price' of table db.orders is double"):
        table.write(pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=3)))
    _unchanged(table, before_files, before_rows)


def _manifest_of_latest(table) -> str:
    snap = table.snapshots.latest()
    store = table.manifests()
    return table.paths.manifest(store.read_list(snap.delta_manifest_list)[0].file_name)


@pytest.mark.parametrize("what", ["manifest", "manifest-list", "data"])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete"])
def test_corrupt_metadata_and_data_files_are_typed_errors(table, what, damage):
    from lakehouse.manifest import files as manifest_files

    manifest_files._CACHE.clear()
    table.write(orders([7]))
    snap = table.snapshots.latest()
    if what == "manifest":
        path = _manifest_of_latest(table)
    elif what == "manifest-list":
        path = table.paths.manifest(snap.delta_manifest_list)
    else:
        (e,) = table.manifests().read_manifest(os.path.basename(_manifest_of_latest(table)))
        path = f"{table.paths.root}/{table.bucket_path(e.partition, e.bucket)}/{e.file.file_name}"
    manifest_files._CACHE.clear()
    if damage == "delete":
        os.remove(path)
    else:
        data = Path(path).read_bytes()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2] if damage == "truncate" else b"\x00garbage" * 10)
    with pytest.raises(CorruptFileError, match=os.path.basename(path)):
        table.read()
    assert [r["order_id"] for r in rows(table.read(snapshot_id=1))] == [1, 2, 3]


def test_every_error_is_a_lakehouse_error():
    import lakehouse.errors as errors

    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert all(issubclass(c, LakehouseError) for c in classes)


def _recode(path: str, change) -> None:
    """Rewrite an Avro metadata file with ``change`` applied to each record (valid Avro still)."""
    Path(path).write_bytes(recoded(Path(path).read_bytes(), change))


def test_a_damaged_partition_names_its_manifest(table):
    """Partitions are decoded far from the manifest (splits, bucket paths): each distinct one is
    checked when the manifest is read, where the file is known."""
    from lakehouse.manifest import files as manifest_files

    path = _manifest_of_latest(table)
    _recode(path, lambda r: r.update(_PARTITION=b"\0\0\0\1\0\0"))
    manifest_files._CACHE.clear()
    with pytest.raises(CorruptFileError, match=f"manifest {path} is corrupt.*a partition does not decode"):
        table.read()


def test_damaged_partition_bounds_name_their_manifest_list(table):
    from lakehouse.manifest import files as manifest_files

    path = table.paths.manifest(table.snapshots.latest().delta_manifest_list)
    _recode(path, lambda r: r["_PARTITION_STATS"].update(_MIN_VALUES=b"\0\0\0\1"))
    manifest_files._CACHE.clear()
    with pytest.raises(CorruptFileError, match=f"manifest list {path} is corrupt"):
        table.read(filter=col("dt") == "2024-01-01")


def test_damaged_stats_name_the_entry_and_its_manifest(table):
    """Key stats are decoded per file when a filter prunes, long after the manifest was read: the
    error finds the manifest among the cached ones."""
    from lakehouse.manifest import files as manifest_files

    path = _manifest_of_latest(table)
    _recode(path, lambda r: r["_FILE"]["_KEY_STATS"].update(_MAX_VALUES=b"\0\0\0\1" + bytes(4)))
    manifest_files._CACHE.clear()
    with pytest.raises(
        CorruptFileError, match=f"the entry of data file data-.* in manifest {path} is damaged"
    ):
        table.read(filter=col("order_id") == 2)


def test_value_stats_naming_an_unknown_column_name_the_entry_and_its_manifest(catalog):
    """``_VALUE_STATS_COLS`` names the columns its stats cover: one the file's schema lacks is a
    damaged entry, found when a filter first prunes by value stats."""
    from lakehouse.manifest import files as manifest_files

    table = catalog.create_table("db.events", ORDERS)
    table.write(orders([1, 2, 3]))
    path = _manifest_of_latest(table)
    _recode(path, lambda r: r["_FILE"].update(_VALUE_STATS_COLS=["no_such_column"]))
    manifest_files._CACHE.clear()
    with pytest.raises(
        CorruptFileError, match=f"the entry of data file data-.* in manifest {path} is damaged"
    ):
        table.read(filter=col("price") > 1.0)
