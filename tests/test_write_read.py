from __future__ import annotations

import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import col
from lakehouse.manifest import binary_row
from lakehouse.snapshot import CommitKind

from .conftest import ORDERS, golden, orders, pk_orders_table, rows


def _data_files(table) -> list[str]:
    out = []
    for root, _, files in os.walk(table.paths.root):
        out += [os.path.join(root, f) for f in files if f.endswith(".parquet")]
    return sorted(out)


def test_append_table_partitions_and_reads(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders(range(4), dt=["2024-01-01", "2024-01-02", "2024-01-01", "2024-01-02"]))
    t.write(orders(range(4, 6), dt="2024-01-03"))
    got = t.read()
    assert got.schema == ORDERS
    assert [r["order_id"] for r in rows(got)] == list(range(6))
    dirs = sorted({os.path.relpath(os.path.dirname(f), t.paths.root) for f in _data_files(t)})
    assert dirs == ["dt=2024-01-01/bucket-0", "dt=2024-01-02/bucket-0", "dt=2024-01-03/bucket-0"]
    assert t.read(columns=["status", "order_id"]).column_names == ["status", "order_id"]
    assert sorted(t.read(filter=col("dt") == "2024-01-02").column("order_id").to_pylist()) == [1, 3]


def test_append_rows_keep_duplicates(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1, 1]))
    t.write(orders([1]))
    assert t.read().num_rows == 3


def test_fixed_bucket_placement_matches_java(catalog):
    cases = [
        c for c in golden("binary_row.json")["cases"] if c["types"] == ["INT"] and c["values"][0] is not None
    ]
    t = catalog.create_table(
        "db.t", pa.schema([("k", pa.int32()), ("v", pa.string())]), options={"bucket": "5", "bucket-key": "k"}
    )
    t.write(pa.table({"k": pa.array([c["values"][0] for c in cases], pa.int32()), "v": ["x"] * len(cases)}))
    for path in _data_files(t):
        bucket = int(os.path.basename(os.path.dirname(path)).removeprefix("bucket-"))
        for k in pq.ParquetFile(path).read().column("k").to_pylist():
            assert next(c for c in cases if c["values"][0] == k)["bucket"]["5"] == bucket


@pytest.mark.parametrize("partitions", [3, 300])  # few groups: a lookup table; many: sorted
def test_rows_land_in_their_partition_and_bucket(catalog, partitions):
    from lakehouse.bucket.fixed import fixed_buckets
    from lakehouse.types import INT

    t = catalog.create_table(
        "db.t",
        pa.schema([("k", pa.int32()), ("p", pa.int32())]),
        partition_keys=["p"],
        options={"bucket": "8", "bucket-key": "k"},
    )
    keys = pa.array(range(600), pa.int32())
    t.write(pa.table({"k": keys, "p": pa.array([k * 7 % partitions for k in range(600)], pa.int32())}))
    expected = dict(zip(keys.to_pylist(), fixed_buckets([keys], [INT], 8).tolist(), strict=True))
    seen = []
    for path in _data_files(t):
        bucket_dir = os.path.basename(os.path.dirname(path))
        partition_dir = os.path.basename(os.path.dirname(os.path.dirname(path)))
        for k in pq.ParquetFile(path).read().column("k").to_pylist():
            assert bucket_dir == f"bucket-{expected[k]}" and partition_dir == f"p={k * 7 % partitions}"
            seen.append(k)
    assert sorted(seen) == list(range(600))


def test_primary_key_upserts_and_deletes(catalog):
    t = pk_orders_table(catalog)
    t.write(orders([1, 2, 3, 4], price=1.0))
    t.write(orders([2, 3], price=2.0))
    deletes = orders([3, 99]).append_column("_row_kind", pa.array(["-D", "-D"]))
    t.write(deletes)
    got = rows(t.read())
    assert [(r["order_id"], r["price"]) for r in got] == [(1, 1.0), (2, 2.0), (4, 1.0)]
    assert [r["order_id"] for r in rows(t.read(snapshot_id=2))] == [1, 2, 3, 4]


def test_duplicate_keys_in_one_write_keep_the_last(catalog):
    t = pk_orders_table(catalog)
    data = orders([5, 5, 6, 5], price=[1.0, 2.0, 3.0, 4.0])
    kinds = pa.array([0, 2, 0, 3], pa.int8())  # +I, +U, +I, -D
    t.write(data.append_column("_row_kind", kinds))
    assert [r["order_id"] for r in rows(t.read())] == [6]
    t.write(orders([5, 5], price=[7.0, 8.0]))
    assert [(r["order_id"], r["price"]) for r in rows(t.read())] == [(5, 8.0), (6, 3.0)]


def test_a_bucket_is_read_merged_a_batch_at_a_time(catalog, monkeypatch):
    from lakehouse.read import table_read

    monkeypatch.setattr(table_read, "READ_BATCH_ROWS", 7)  # rows a merge reads from a run at a time
    t = pk_orders_table(catalog, **{"write-only": "true", "bucket": "1"})
    for i in range(4):  # four overlapping sorted runs
        t.write(orders(range(i * 50, i * 50 + 100), price=float(i)))
    t.write(orders(range(0, 400, 3), price=9.0))
    [split] = t.plan().splits
    batches = list(t.new_read().batches(split))
    assert len(batches) > 20 and max(b.num_rows for b in batches) <= 7 * 5  # a batch per run at most
    got = {r["order_id"]: r["price"] for r in rows(pa.concat_tables(batches))}
    expected = {k: 9.0 if k % 3 == 0 else float(min(k // 50, 3)) for k in range(250)}
    expected.update({k: 9.0 for k in range(0, 400, 3)})
    assert got == expected


def test_a_batch_reader_streams_the_splits_in_order_with_their_projection_and_filter(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true"})
    for day in ("2024-01-01", "2024-01-02"):
        t.write(orders(range(40), dt=day, price=1.0))
        t.write(orders(range(0, 40, 3), dt=day, price=2.0))  # merged on read
    splits = t.plan().splits
    read = t.new_read(columns=["order_id", "price"], filter=col("price") > 1.5)
    reader = read.to_arrow_batch_reader(splits)
    assert reader.schema == read.output_schema
    got = reader.read_all()
    assert got.equals(read.to_arrow(splits))  # split after split, in the splits' order
    assert got.num_rows == 2 * 14 and set(got.column("price").to_pylist()) == {2.0}
    assert read.to_arrow_batch_reader([]).read_all().num_rows == 0


def test_primary_key_files_have_paimon_layout(catalog):
    t = pk_orders_table(catalog)
    t.write(orders([3, 1, 2]))
    t.write(orders([2]))
    files = _data_files(t)
    schema = pq.read_schema(files[0])
    assert schema.names == ["_KEY_order_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", *ORDERS.names]
    ids = [int(f.metadata[b"PARQUET:field_id"]) for f in schema]
    assert ids == [2**31 // 2 - 1 + 0, 2**31 - 2, 2**31 - 3, 0, 1, 2, 3, 4]
    entries = t.live_entries()
    for e in entries:
        data = pq.ParquetFile(
            f"{t.paths.root}/{t.bucket_path(e.partition, e.bucket)}/{e.file.file_name}"
        ).read()
        keys = data.column("_KEY_order_id").to_pylist()
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        seq = data.column("_SEQUENCE_NUMBER").to_pylist()
        assert (e.file.min_sequence_number, e.file.max_sequence_number) == (min(seq), max(seq))
        key_type = [t.schema.field("order_id").type]
        assert binary_row.decode_row(binary_row.deserialize(e.file.min_key)[1], key_type) == [keys[0]]
        assert binary_row.decode_row(binary_row.deserialize(e.file.max_key)[1], key_type) == [keys[-1]]
    # a bucket's sequence numbers continue after its existing files
    by_bucket = {}
    for e in sorted(entries, key=lambda e: e.file.min_sequence_number):
        by_bucket.setdefault(e.bucket, []).append(e.file)
    for files_in_bucket in by_bucket.values():
        for older, newer in zip(files_in_bucket, files_in_bucket[1:], strict=False):
            assert newer.min_sequence_number > older.max_sequence_number


def test_thin_mode_drops_key_columns(catalog):
    t = pk_orders_table(catalog, **{"data-file.thin-mode": "true"})
    t.write(orders([1, 2]))
    t.write(orders([2], price=9.0))
    assert pq.read_schema(_data_files(t)[0]).names == ["_SEQUENCE_NUMBER", "_VALUE_KIND", *ORDERS.names]
    assert [(r["order_id"], r["price"]) for r in rows(t.read())] == [(1, 1.0), (2, 9.0)]


@pytest.mark.parametrize("write_only", ["true", "false"])
def test_write_buffer_flushes_make_several_sorted_runs(catalog, write_only):
    options = {"write-buffer-size": "1 kb", "write-buffer-spillable": "false", "write-only": write_only}
    t = pk_orders_table(catalog, **options)
    t.write(_six_versions())
    files = t.live_entries()
    if write_only == "true":  # at least one flush per batch: 6 or more runs in each of 2 buckets
        assert len(files) >= 12 and {e.file.level for e in files} == {0}
    else:  # past num-sorted-run.stop-trigger (8) a bucket compacts before it takes more
        for bucket in (0, 1):
            levels = [e.file.level for e in files if e.bucket == bucket]
            assert levels.count(0) + len(set(levels) - {0}) <= 8
            assert max(levels) > 0
    _check_six_versions(t)


def test_spilled_write_buffer_makes_one_sorted_run_per_bucket(catalog):
    t = pk_orders_table(catalog, **{"write-buffer-size": "1 kb", "write-only": "true"})
    t.write(_six_versions())
    files = t.live_entries()
    assert len(files) == 2 and {e.file.level for e in files} == {0}
    _check_six_versions(t)


def _six_versions() -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(
        ORDERS, [b for i in range(6) for b in orders(range(i, i + 50), price=float(i)).to_batches()]
    )


def _check_six_versions(t) -> None:
    got = rows(t.read())
    assert len(got) == 55
    assert [r["price"] for r in got[:6]] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(r["price"] == 5.0 for r in got[5:])


def test_files_roll_at_the_target_size(catalog):
    t = catalog.create_table("db.t", ORDERS, options={"target-file-size": "8 kb"})
    t.write(orders(range(20_000)))
    files = t.live_entries()
    assert len(files) > 3
    assert sum(e.file.row_count for e in files) == 20_000
    assert t.read().num_rows == 20_000


def test_overwrite_whole_table_partition_and_dynamic(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(orders([1, 2], dt="a"))
    t.write(orders([3], dt="b"))
    t.write(orders([10], dt="a"), overwrite={"dt": "a"})
    assert [(r["order_id"], r["dt"]) for r in rows(t.read())] == [(3, "b"), (10, "a")]
    assert t.snapshots.latest().commit_kind == CommitKind.OVERWRITE
    t.write(orders([20], dt="c"), overwrite="dynamic")
    assert [r["order_id"] for r in rows(t.read())] == [3, 10, 20]
    t.write(orders([30], dt="b"), overwrite=True)
    assert [r["order_id"] for r in rows(t.read())] == [30]
    snap = t.snapshots.latest()
    assert snap.total_record_count == 1 and snap.delta_record_count == -2
    assert t.write(orders([]), overwrite="dynamic") is None


def test_overwrite_of_a_primary_key_table_restarts_sequences(catalog):
    t = pk_orders_table(catalog)
    t.write(orders([1, 2]))
    t.write(orders([2], price=5.0), overwrite=True)
    assert [(r["order_id"], r["price"]) for r in rows(t.read())] == [(2, 5.0)]


def test_empty_write_commits_nothing(catalog):
    t = catalog.create_table("db.t", ORDERS)
    assert t.write(orders([])) is None
    assert t.latest_snapshot_id() is None


def test_null_partition_values_go_to_the_default_partition(catalog):
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    t = catalog.create_table("db.t", schema, partition_keys=["region"])
    t.write(pa.table({"id": [1, 2, 3], "region": ["eu", None, " "]}, schema=schema))
    dirs = sorted(os.path.basename(os.path.dirname(os.path.dirname(f))) for f in _data_files(t))
    assert dirs == ["region=__DEFAULT_PARTITION__", "region=__DEFAULT_PARTITION__", "region=eu"]
    assert sorted(t.read(filter=col("region").is_null()).column("id").to_pylist()) == [2]


def test_partition_values_of_every_kind_name_directories_like_java(catalog):
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("f", pa.float64()), ("s", pa.string())])
    t = catalog.create_table("db.t", schema, partition_keys=["d", "f", "s"])
    t.write(
        pa.table(
            {"id": [1], "d": pa.array([19723], pa.int32()).cast(pa.date32()), "f": [1e10], "s": ["a/b:c"]},
            schema=schema,
        )
    )
    (path,) = _data_files(t)
    assert os.path.relpath(path, t.paths.root).startswith("d=19723/f=1.0E10/s=a%2Fb%3Ac/bucket-0/data-")


def test_many_commits_keep_few_manifests(catalog):
    t = catalog.create_table("db.t", ORDERS)
    for i in range(45):
        t.write(orders([i]))
    snap = t.snapshots.latest()
    store = t.manifests()
    base = store.read_list(snap.base_manifest_list)
    assert len(base) < 30
    assert t.read().num_rows == 45


def test_full_manifest_compaction_drops_cancelled_entries(catalog):
    t = catalog.create_table(
        "db.t", ORDERS, partition_keys=["dt"], options={"manifest.full-compaction-threshold-size": "1 b"}
    )
    t.write(orders([1], dt="a"))
    t.write(orders([2], dt="b"))
    t.write(orders([3], dt="a"), overwrite={"dt": "a"})
    t.write(orders([4], dt="c"))
    snap = t.snapshots.latest()
    store = t.manifests()
    entries = [e for m in store.read_list(snap.base_manifest_list) for e in store.read_manifest(m.file_name)]
    assert sorted(e.file.row_count for e in entries) == [1, 1]  # the overwritten ADD and its DELETE are gone
    assert all(e.kind == 0 for e in entries)
    assert [r["order_id"] for r in rows(t.read())] == [2, 3, 4]


def test_record_batch_input_and_nan_stats(catalog):
    t = catalog.create_table("db.t", ORDERS)
    t.write(orders([1, 2], price=[math.nan, math.nan]).to_batches()[0])
    assert t.read(filter=col("price") > 0).num_rows == 0
    assert t.plan(filter=col("price") > 0).stats["files_selected"] == 1


def test_batches_of_another_schema_that_still_fits_are_written(catalog):
    """Pieces of one buffer whose types differ (a stream whose batches change types, separate
    writes) each fit the table: other column order, narrower integers, a column all nulls."""
    t = pk_orders_table(catalog, **{"write-buffer-size": "8 kb"})
    first = orders(range(0, 120))
    narrow = orders(range(100, 200), price=2.0).cast(ORDERS.set(0, pa.field("order_id", pa.int32(), False)))
    nulls = orders(range(200, 230)).set_column(4, "status", pa.nulls(30))
    reordered = orders(range(230, 260)).select(["status", "price", "user_id", "dt", "order_id"])
    batches = [*first.to_batches(max_chunksize=40), *narrow.to_batches(max_chunksize=40)]
    batches += [*nulls.to_batches(), *reordered.to_batches()]
    t.write(pa.RecordBatchReader.from_batches(ORDERS, iter(batches)))
    writer = t.new_write()
    writer.write(orders([300]).cast(ORDERS.set(2, pa.field("user_id", pa.int8()))))
    writer.write(orders([301]))
    t.new_commit().commit(writer.prepare_commit())
    expected = [orders(range(0, 100)), orders(range(100, 200), price=2.0), nulls.cast(ORDERS)]
    expected += [orders(range(230, 260)), orders([300, 301])]
    assert rows(t.read()) == rows(pa.concat_tables(expected))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    picks=st.lists(st.integers(0, 10**6), max_size=20),
    ascending=st.booleans(),
)
def test_take_rows_takes_from_each_chunk_what_take_would(sizes, picks, ascending):
    from lakehouse.write.rows import take_rows

    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    pieces = [
        pa.table({"a": range(s, s + n), "b": ["x"] * n}, schema) for s, n in zip(starts, sizes, strict=True)
    ]
    table = pa.concat_tables(pieces)
    rows = [p % table.num_rows for p in picks] if table.num_rows else []
    rows = sorted(rows) if ascending else rows
    got = take_rows(table, np.array(rows, dtype=np.int64))
    assert got.to_pydict() == table.combine_chunks().take(pa.array(rows, pa.int64())).to_pydict()


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.tuples(st.integers(1, 40), st.booleans()), max_size=30))
def test_buffered_pieces_join_small_runs_of_one_schema_into_blocks(pieces):
    """A writer's buffer keeps its rows in order; consecutive small pieces of one schema are
    joined into one contiguous block once they reach a block's bytes, larger pieces and pieces
    of another schema left as given."""
    from lakehouse.write.rows import Pieces

    narrow = pa.schema([("a", pa.int64())])
    wide = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    given_pieces, start = [], 0
    for n, is_wide in pieces:
        columns = {"a": range(start, start + n), **({"b": range(n)} if is_wide else {})}
        given_pieces.append(pa.table(columns, wide if is_wide else narrow))
        start += n
    block = 8 * 64  # 64 rows of the narrow schema
    buffer = Pieces(block)
    for piece in given_pieces:
        buffer.add(piece)
    assert buffer.nbytes == sum(p.nbytes for p in given_pieces)
    held = buffer.take()
    assert buffer.take() == [] and buffer.nbytes == 0
    rows = [a for p in held for a in p.column("a").to_pylist()]
    assert rows == list(range(start))
    originals = {id(p) for p in given_pieces}
    for piece in held:
        if id(piece) in originals:
            continue  # as given
        assert piece.nbytes >= block and piece.column("a").num_chunks == 1  # a joined block
    # no run of small pieces of one schema that reached a block was left unjoined
    run_bytes, run_schema = 0, None
    for piece in held:
        small = id(piece) in originals and piece.nbytes < block
        if small and piece.schema == run_schema:
            run_bytes += piece.nbytes
        else:
            run_bytes, run_schema = (piece.nbytes, piece.schema) if small else (0, None)
        assert run_bytes < block
