"""Exact row counts from metadata where it suffices, by merging key columns where it does not:
always what a read returns."""

import pyarrow as pa
import pytest

from lakehouse import Catalog, col

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.int64())])


def _catalog(path) -> Catalog:
    catalog = Catalog(str(path))
    catalog.create_database("db")
    return catalog


def _rows(ids, dt, kind=None):
    data = {"id": ids, "dt": [dt] * len(ids), "v": list(range(len(ids)))}
    if kind:
        data["_row_kind"] = [kind] * len(ids)
    return pa.table(data)


@pytest.mark.parametrize(
    "options",
    [
        {"bucket": "2"},  # merge-on-read: overlapping sorted runs are merged to count
        {"bucket": "2", "deletion-vectors.enabled": "true"},  # counted from metadata and DV cardinalities
        {"bucket": "-1"},
    ],
)
def test_row_counts_equal_reads(tmp_path, options):
    table = _catalog(tmp_path).create_table(
        "db.t", schema=SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options=options
    )
    table.write(_rows(list(range(100)), "a"))
    table.write(_rows(list(range(50, 150)), "a"))  # 50 updates, 50 inserts
    table.write(_rows(list(range(10)), "b"))
    table.write(_rows(list(range(0, 100, 7)), "a", "-D"))
    assert table.row_count() == table.read().num_rows == 150 - 15 + 10
    counts = table.partition_row_counts()
    assert counts == {("a",): table.read(filter=col("dt") == "a").num_rows, ("b",): 10}
    assert table.row_count(filter=col("dt") == "b") == 10
    first = table.snapshots.snapshot_ids()[0]
    assert table.row_count(snapshot_id=first) == table.read(snapshot_id=first).num_rows


def test_append_table_counts_from_metadata(tmp_path):
    table = _catalog(tmp_path).create_table("db.t", schema=SCHEMA, partition_keys=["dt"])
    table.write(_rows(list(range(5)), "a"))
    table.write(_rows(list(range(5)), "a"))
    assert table.partition_row_counts() == {("a",): 10}
    assert table.row_count(filter=col("dt") == "zzz") == 0


def test_merged_splits_are_counted_side_by_side_as_bulk_jobs(tmp_path, monkeypatch):
    """Splits that need a merge are counted as bulk jobs (side by side, within the jobs budget),
    the others from metadata alone, and every partition's count is what a read returns."""
    from lakehouse.io.pool import in_job
    from lakehouse.read.table_read import TableRead

    table = _catalog(tmp_path).create_table(
        "db.t", schema=SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"}
    )
    for day in "abcd":
        table.write(_rows(list(range(40)), day))
        if day != "d":  # a second run to merge
            table.write(_rows(list(range(20, 60)), day))
    table.compact(full=True, partitions={"dt": "d"})  # day d: one run at the top level, counted from metadata
    merged = []
    batches = TableRead.batches

    def counted(self, split, read_ahead=True):
        merged.append(in_job())
        return batches(self, split, read_ahead)

    monkeypatch.setattr(TableRead, "batches", counted)
    assert table.partition_row_counts() == {("a",): 60, ("b",): 60, ("c",): 60, ("d",): 40}
    assert len(merged) == 6 and all(merged)  # 2 buckets of 3 days
