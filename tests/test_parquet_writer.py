"""Parquet data files encode in the background; failures still surface and leave nothing behind."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.format import parquet
from lakehouse.format.parquet import ParquetFileWriter, ParquetOptions, decoded_bytes, even_step, iter_batches
from lakehouse.io import read_ahead
from lakehouse.io.cores import THREADS_ENV, usable_cores
from lakehouse.io.fs import FileIO
from lakehouse.io.pool import map_parallel

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _writer(tmp_path) -> ParquetFileWriter:
    io, root = FileIO.for_uri(str(tmp_path))
    return ParquetFileWriter(io, f"{root}/data-1.parquet", SCHEMA, ParquetOptions())


def test_pieces_written_in_the_background_all_land_in_order(tmp_path):
    writer = _writer(tmp_path)
    for start in range(0, 5000, 1000):
        writer.write(pa.table({"id": list(range(start, start + 1000)), "name": ["x"] * 1000}, schema=SCHEMA))
    assert writer.bytes_written > 0
    size = writer.close()
    assert os.path.getsize(tmp_path / "data-1.parquet") == size
    assert pq.read_table(tmp_path / "data-1.parquet").column("id").to_pylist() == list(range(5000))


def test_a_failed_background_write_raises_and_abort_leaves_nothing(tmp_path):
    writer = _writer(tmp_path)
    writer.write(pa.table({"other": [1]}))  # wrong schema: fails while encoding
    with pytest.raises(ValueError):
        writer.close()
    writer.abort()
    assert os.listdir(tmp_path) == []


def test_a_writer_that_cannot_open_publishes_nothing(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    with pytest.raises(Exception, match="zip9"):
        ParquetFileWriter(io, f"{root}/data-1.parquet", SCHEMA, ParquetOptions(compression="zip9"))
    assert os.listdir(tmp_path) == []  # neither a 0-byte file under its name nor a temporary one


def test_the_decoded_size_of_a_file_is_its_arrow_size_not_its_pages(tmp_path):
    """Budgets size batches and jobs by what files take decoded: dictionary-encoded pages hold
    a repeated value once, Arrow once per row, so the pages undercount many times over."""
    n = 50_000
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "price": pa.array(rng.uniform(0, 1, n)),
            "flag": pa.array(rng.integers(0, 2, n).astype(bool)),
            "day": pa.array(np.full(n, 19_000, np.int32), pa.date32()),
            "status": pa.array(["shipped", "cancelled", "paid", "created"] * (n // 4)),
            "region": pa.array(["north-east", "south-west"] * (n // 2)),
            "text": pa.array([f"comment number {i}" for i in range(n)]),
            "blob": pa.array([bytes(i % 7) for i in range(n)], pa.binary()),
            "amount": pa.array(np.arange(n), pa.int64()).cast(pa.decimal128(30, 2)),  # fixed-length bytes
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path, row_group_size=20_000, store_decimal_as_integer=True)
    meta = pq.ParquetFile(path).metadata
    arrow = pq.read_table(path).nbytes
    pages = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    assert pages < 0.75 * arrow  # what the estimate used to be
    assert arrow <= decoded_bytes(meta) <= 1.3 * arrow
    # a read of some columns decodes those alone
    some = ["id", "text", "amount"]
    rest = [c for c in table.column_names if c not in some]
    assert decoded_bytes(meta, some) + decoded_bytes(meta, rest) == decoded_bytes(meta)
    assert table.select(some).nbytes <= decoded_bytes(meta, some) <= 1.3 * table.select(some).nbytes


def test_a_nested_column_counts_under_its_top_level_name(tmp_path):
    """A struct's values (columns ``s.a``, ``s.b``) count for ``s``, and a top-level name with a
    dot for itself (an estimate may count such a name's look-alike too, never miss it)."""
    n = 1000
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "s": pa.StructArray.from_arrays([pa.array(np.arange(n)), pa.array(["x"] * n)], ["a", "b"]),
            "s.c": pa.array(np.arange(n, dtype=np.int32)),
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path)
    meta = pq.ParquetFile(path).metadata
    whole = decoded_bytes(meta)
    assert decoded_bytes(meta, ["id"]) + decoded_bytes(meta, ["s"]) == whole  # "s" counts "s.c" too
    assert n * 4 <= decoded_bytes(meta, ["s.c"]) < decoded_bytes(meta, ["s"]) - n * (8 + 4)
    assert decoded_bytes(meta, {"id", "s.c"}) == decoded_bytes(meta, ["id", "s.c"]) < whole


def test_data_files_carry_no_arrow_schema(tmp_path):
    """As Paimon's own writers, a data file's footer holds the Parquet schema alone (field ids):
    no serialized Arrow schema for each reader to decode on every open (about half the cost of
    opening a small file). Types the Parquet schema does not tell apart read back as written."""
    from lakehouse import Catalog

    schema = pa.schema(
        [
            ("id", pa.int64(), False),
            ("seconds", pa.timestamp("s")),
            ("utc", pa.timestamp("us", tz="UTC")),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.int32())),
        ]
    )
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema, primary_keys=["id"], options={"bucket": "1"})
    rows = pa.table(
        {
            "id": [1, 2],
            "seconds": pa.array([0, 86_399], pa.timestamp("s")),
            "utc": pa.array([1, None], pa.timestamp("us", tz="UTC")),
            "tags": [["a", "b"], []],
            "attrs": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int32())),
        },
        schema=schema,
    )
    table.write(rows)
    files = list((tmp_path / "wh").rglob("data-*.parquet"))
    assert files
    for path in files:
        footer = pq.ParquetFile(path).metadata.metadata or {}
        assert b"ARROW:schema" not in footer
    assert table.read().equals(rows)


def test_rows_past_the_end_of_a_file_are_corrupt(tmp_path):
    """Rows to keep come from metadata (a manifest entry's row count, an index, a deletion
    vector): one past the file's rows is damage, not a pyarrow index error."""
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"x": list(range(10))}), path)
    io = FileIO.for_uri(str(tmp_path))[0]
    assert [b.column("x").to_pylist() for b in iter_batches(io, path, ["x"], 100, rows=np.array([2, 9]))] == [
        [2, 9]
    ]
    with pytest.raises(CorruptFileError, match="f.parquet has 10 rows, but row 10 of it is to be read"):
        list(iter_batches(io, path, ["x"], 100, rows=np.array([2, 10])))


@pytest.mark.parametrize("kept", [None, "some"])
def test_row_groups_read_side_by_side_come_as_one_after_the_other(tmp_path, monkeypatch, kept):
    """With cores to spare, a file's row groups decode side by side, as many at once as fit in
    the batch budget; the batches come in the file's order, rows to keep taken, repeating
    strings as dictionaries where the caller asks, whatever the number of groups at once."""
    monkeypatch.setenv(THREADS_ENV, "16")
    usable_cores.cache_clear()
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 16)
    n = 10_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "status": pa.array(["paid", "shipped", "created", "cancelled"] * (n // 4)),
            "day": pa.array(["2024-01-01"] * n),
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path, row_group_size=1_000)
    io = FileIO.for_uri(str(tmp_path))[0]
    rows = None if kept is None else np.flatnonzero(np.arange(n) % 7 == 3)[:-300]  # the last groups: none
    widths = []
    real = parquet.map_ahead

    def spy(fn, items, ahead=True, width=2):
        widths.append(width)
        return real(fn, items, ahead, width)

    monkeypatch.setattr(parquet, "map_ahead", spy)
    columns = ["id", "status", "day"]
    group = decoded_bytes(pq.ParquetFile(path).metadata) // 10
    try:
        read = 10 if rows is None else 8  # groups holding rows to read
        for budget, at_once in ((None, []), (3 * group, [2]), (100 * group, [read])):
            batches = list(iter_batches(io, path, columns, 600, budget, rows, dictionaries=["status"]))
            assert widths == at_once  # one group less than the budget holds: the caller holds one
            widths.clear()
            assert all(b.num_rows <= 600 for b in batches)
            got = pa.concat_tables(batches)
            assert pa.types.is_dictionary(got.schema.field("status").type)  # as the caller asked
            assert got.schema.field("day").type == pa.string()
            expected = table if rows is None else table.take(rows)
            assert got.column("id").to_pylist() == expected.column("id").to_pylist()
            assert got.column("status").cast(pa.string()).equals(expected.column("status"))
            assert got.column("day").equals(expected.column("day"))
        # a bulk job (memory reserved for batches) reads one group after the other
        map_parallel(lambda _: list(iter_batches(io, path, columns, 600, 100 * group, rows)), [0])
        assert not widths
    finally:
        usable_cores.cache_clear()


@pytest.mark.parametrize("primary_keys", [[], ["id"]])
def test_every_data_file_column_carries_its_field_id(tmp_path, primary_keys):
    """As Paimon's Parquet writer: readers that match columns by id (Iceberg's) find them."""
    from lakehouse import Catalog

    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    t = catalog.create_table("db.t", schema, primary_keys=primary_keys)
    t.write(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
    (path,) = (tmp_path / "wh").rglob("data-*.parquet")
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in pq.ParquetFile(path).schema_arrow}
    assert {name: ids[name] for name in ("id", "name")} == {f.name: f.id for f in t.schema.fields}


@given(st.integers(0, 100_000), st.integers(1, 5_000))
def test_even_pieces_are_as_few_as_the_most_allows_and_of_one_size(rows, most):
    step = even_step(rows, most)
    sizes = [min(step, rows - start) for start in range(0, rows, step)]
    assert sum(sizes) == rows and step <= most
    assert len(sizes) == -(-rows // most)
    assert max(sizes, default=0) - min(sizes, default=0) < max(1, len(sizes))  # no remnant of a few rows


def test_a_flush_writes_a_bucket_in_row_groups_of_one_size(tmp_path, monkeypatch):
    """A flush copies each bucket's rows out of the buffer a slice at a time, each slice a row
    group: the slices are of one size, none a remnant of a few rows."""
    from lakehouse import Catalog
    from lakehouse.write import table_write

    monkeypatch.setattr(table_write, "SLICE_BYTES", 4096)
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32())])
    t = catalog.create_table("db.t", schema, partition_keys=["p"])
    t.write(pa.table({"id": np.arange(10_000), "p": np.arange(10_000, dtype=np.int32) % 2}, schema=schema))
    for path in (tmp_path / "wh").rglob("data-*.parquet"):
        meta = pq.ParquetFile(path).metadata
        groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert sum(groups) == 5_000 and len(groups) >= 5
        assert max(groups) - min(groups) < len(groups)
    assert sorted(t.read().column("id").to_pylist()) == list(range(10_000))
