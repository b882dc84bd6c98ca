"""A primary-key write buffer in bounded memory: ``write-buffer-size`` caps what waits in memory,
``write-buffer-spillable`` spills full buffers to local disk as sorted runs merged into one run
per bucket at the end, ``sort-spill-threshold`` bounds how many runs a merge reads at once."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import InvalidOptionError, SchemaMismatchError
from lakehouse.write.table_write import TableWrite
from tests.conftest import ORDERS, orders, pk_orders_table, rows
from tests.interop import oracle


@pytest.fixture
def spill_root(tmp_path, monkeypatch) -> Path:
    """Where spill directories go during the test (``tempfile``'s directory)."""
    root = tmp_path / "local-tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _versions(rounds: int, keys: int = 40) -> pa.RecordBatchReader:
    """``rounds`` batches each updating every key, the price telling the round."""
    batches = [b for i in range(rounds) for b in orders(range(keys), price=float(i)).to_batches()]
    return pa.RecordBatchReader.from_batches(ORDERS, batches)


def test_full_buffers_spill_and_the_write_is_one_sorted_run_per_bucket(catalog, spill_root):
    t = pk_orders_table(catalog, **{"write-buffer-size": "1 kb"})
    writer = t.new_write()
    writer.write(_versions(6))
    assert writer._spill.spilled >= 6  # every buffer was spilled, not written to the table
    assert any(spill_root.iterdir())
    t.new_commit().commit(writer.prepare_commit())
    assert not any(spill_root.iterdir())  # spill files are gone once the write is done
    files = t.live_entries()
    assert len(files) == 2 and {e.file.level for e in files} == {0}
    assert {r["price"] for r in rows(t.read())} == {5.0}


def test_the_last_buffer_is_spilled_and_released_before_the_merges(catalog, monkeypatch):
    t = pk_orders_table(catalog, **{"write-buffer-size": "1 kb"})
    writer = t.new_write()
    merged = []
    write_spilled = TableWrite._write_spilled

    def counting(self, target):
        assert not self._pending  # the buffer is gone: the merges read only spilled runs
        merged.append(len(target.spilled))
        return write_spilled(self, target)

    monkeypatch.setattr(TableWrite, "_write_spilled", counting)
    writer.write(_versions(6))
    writer._await_flush()  # the half of the buffer flushed in the background
    spilled = writer._spill.spilled
    t.new_commit().commit(writer.prepare_commit())
    assert len(merged) == 2 and sum(merged) == spilled + 2  # the last buffer's runs, one per bucket
    assert {r["price"] for r in rows(t.read())} == {5.0}


def test_the_buffer_never_holds_more_than_write_buffer_size(catalog, monkeypatch):
    t = pk_orders_table(catalog, **{"write-buffer-size": "4 kb"})
    held = []
    flush = TableWrite._flush

    def counting(self, final, background=False):
        held.append(self._pending.nbytes)
        return flush(self, final, background)

    monkeypatch.setattr(TableWrite, "_flush", counting)
    big = orders(range(5_000))  # one table many times the buffer: taken a slice at a time
    assert big.nbytes > 20 * 4096
    t.write(big)
    row = big.nbytes // big.num_rows
    assert len(held) > 20 and max(held) <= 4096 + row  # full at most one row past the size
    assert len(t.read()) == 5_000


def test_a_failed_write_removes_its_spill_files(catalog, spill_root):
    t = pk_orders_table(catalog, **{"write-buffer-size": "1 kb"})
    nullable = ORDERS.set(0, pa.field("order_id", pa.int64()))
    bad = pa.table({**orders([1]).to_pydict(), "order_id": pa.array([None], pa.int64())}, schema=nullable)
    seen = []

    def batches():
        for b in _versions(4).read_all().cast(nullable).to_batches(max_chunksize=10):
            yield b
            seen.append(len(list(spill_root.rglob("*.arrow"))))
        yield from bad.to_batches()

    with pytest.raises(SchemaMismatchError):
        t.write(pa.RecordBatchReader.from_batches(nullable, batches()))
    assert max(seen) > 0  # runs were spilled before the bad batch came
    assert not any(spill_root.iterdir())
    assert t.latest_snapshot_id() is None and not t.live_entries()


def test_more_runs_than_the_sort_spill_threshold_are_merged_in_rounds(catalog, spill_root):
    options = {"write-buffer-size": "1 kb", "sort-spill-threshold": "2"}
    t = pk_orders_table(catalog, **options)
    writer = t.new_write()
    writer.write(_versions(8))
    buffers = writer._spill.spilled
    t.new_commit().commit(writer.prepare_commit())
    assert writer._spill is None and not any(spill_root.iterdir())
    assert len(t.live_entries()) == 2
    assert {r["price"] for r in rows(t.read())} == {7.0}
    assert buffers >= 8


def test_a_full_spill_disk_flushes_to_files(catalog, spill_root):
    options = {"write-buffer-size": "1 kb", "write-buffer-spill.max-disk-size": "1 b", "write-only": "true"}
    t = pk_orders_table(catalog, **options)
    t.write(_versions(6))
    # each spill fills the disk: the next full buffer merges it into files, a new level-0 run
    assert len(t.live_entries()) > 2
    assert {r["price"] for r in rows(t.read())} == {5.0}


def test_sort_spill_threshold_below_two_is_refused(catalog):
    with pytest.raises(InvalidOptionError, match="sort-spill-threshold"):
        pk_orders_table(catalog, **{"sort-spill-threshold": "1"})


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation", "first-row"])
def test_spilled_and_unspilled_writes_read_the_same(catalog, engine):
    def written(name: str, spillable: str):
        options = {"write-buffer-size": "512 b", "write-buffer-spillable": spillable, "merge-engine": engine}
        if engine == "aggregation":
            options["fields.price.aggregate-function"] = "sum"
        table = catalog.create_table(
            f"db.{name}", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=options
        )
        table.write(_versions(5, keys=30))
        return table

    spilled, unspilled = written("spilled", "true"), written("unspilled", "false")
    assert rows(spilled.read()) == rows(unspilled.read())


@pytest.mark.interop
def test_pypaimon_reads_a_spilled_write(catalog, warehouse):
    t = pk_orders_table(catalog, **{"write-buffer-size": "1 kb"})
    t.write(_versions(6))
    assert rows(oracle.read(warehouse, "db.t")) == rows(t.read())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 30), st.floats(0, 100)), min_size=1, max_size=40), max_size=6)
)
def test_a_spilling_write_keeps_the_last_version_of_every_key(tmp_path_factory, batches):
    from lakehouse import Catalog

    catalog = Catalog(str(tmp_path_factory.mktemp("wh")))
    catalog.create_database("db")
    t = pk_orders_table(catalog, **{"write-buffer-size": "300 b", "sort-spill-threshold": "3"})
    model = {}
    tables = []
    for batch in batches:
        ids, prices = [k for k, _ in batch], [p for _, p in batch]
        tables.append(orders(ids, price=prices))
        model.update(zip(ids, prices, strict=True))
    if tables:
        t.write(pa.RecordBatchReader.from_batches(ORDERS, [b for x in tables for b in x.to_batches()]))
    assert {r["order_id"]: r["price"] for r in rows(t.read())} == model
