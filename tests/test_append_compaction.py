"""Compaction of append tables: small files merged as Paimon picks them, data unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.errors import CommitConflictError, CorruptFileError
from lakehouse.ops.compaction import commit_compaction, compact_buckets, compaction_buckets
from lakehouse.snapshot import CommitKind

from .conftest import ORDERS, orders, rows

DAYS = ["2024-01-01", "2024-01-02"]


def append_table(catalog, name="db.a", writes=7, **options: str):
    """An append table partitioned by dt with one small file per partition (and bucket) per write."""
    t = catalog.create_table(name, ORDERS, partition_keys=["dt"], options=options)
    for i in range(writes):
        t.write(orders(range(i * 100, i * 100 + 100), dt=DAYS * 50, price=i))
    return t


def files_per_bucket(table) -> dict[tuple[bytes, int], int]:
    found: dict[tuple[bytes, int], int] = {}
    for e in table.live_entries():
        found[(e.partition, e.bucket)] = found.get((e.partition, e.bucket), 0) + 1
    return found


def data_files(table) -> set[str]:
    return {p.name for p in Path(table.paths.root).rglob("data-*")}


def test_small_files_are_merged_into_one_compact_snapshot(catalog):
    t = append_table(catalog)
    before = t.read()
    assert set(files_per_bucket(t).values()) == {7}
    done = t.compact()
    assert done.snapshot_id == 8 and t.snapshot().commit_kind == CommitKind.COMPACT
    assert (done.buckets, done.files_before, done.files_after) == (2, 14, 2)
    assert done.bytes_before > done.bytes_after > 0
    assert set(files_per_bucket(t).values()) == {1}
    assert rows(t.read()) == rows(before)  # same rows, whatever their order
    assert t.compact().snapshot_id is None  # nothing small left to merge


def test_fewer_small_files_than_min_file_num_stay(catalog):
    t = append_table(catalog, writes=4)
    assert t.compact().snapshot_id is None  # 4 < compaction.min.file-num (5)
    assert not any(s.needs_compaction for s in t.lsm_shape())
    t.set_options({"compaction.min.file-num": "3"})
    assert all(s.needs_compaction for s in t.lsm_shape())
    assert t.compact().files_before == 8
    assert set(files_per_bucket(t).values()) == {1}


def test_partitions_limit_the_compaction(catalog):
    t = append_table(catalog)
    done = t.compact(partitions={"dt": DAYS[0]})
    assert (done.buckets, done.files_before) == (1, 7)
    counts = sorted(files_per_bucket(t).values())
    assert counts == [1, 7]


def test_rewritten_files_roll_at_the_target_size(catalog):
    target = 16 * 1024
    t = append_table(catalog, writes=30, **{"target-file-size": "16 kb"})
    t.write(orders(range(10_000, 30_000), dt=DAYS[0]))  # files at the target size
    before, files = t.read(), len(t.live_entries())
    big = {e.file.file_name for e in t.live_entries() if e.file.file_size >= target * 0.7}
    done = t.compact(full=True)
    assert big and done.files_before == files > 60  # every file, big ones too
    after = [e.file for e in t.live_entries()]
    assert len(after) > 2 and not big & {f.file_name for f in after}
    assert all(f.file_size < 3 * target for f in after)
    assert rows(t.read()) == rows(before)


def test_only_small_files_are_picked_and_packed_by_size(catalog):
    # small = below 0.7 * 16 kb; bins close at twice the target, each file counted with 1 kb open cost
    small = {"target-file-size": "16 kb", "source.split.open-file-cost": "1 kb"}
    t = append_table(catalog, writes=12, **small)
    t.write(orders(range(10_000, 30_000), dt=DAYS[0]))
    large = [e.file for e in t.live_entries() if e.file.file_size >= 16 * 1024 * 0.7]
    assert large
    done = t.compact()
    live = {e.file.file_name for e in t.live_entries()}
    assert all(f.file_name in live for f in large)  # never picked
    assert done.files_before >= 10 and done.files_after < done.files_before


def test_fixed_bucket_tables_compact_windows_in_sequence_order(catalog):
    t = append_table(catalog, writes=6, bucket="2", **{"bucket-key": "order_id"})
    before = {b: sorted(_bucket_rows(t, b)) for b in files_per_bucket(t)}
    assert set(files_per_bucket(t).values()) == {6}
    done = t.compact()
    # the first five files of each bucket become one; it and the sixth are too few for another
    assert (done.buckets, done.files_before, done.files_after) == (4, 20, 4)
    assert set(files_per_bucket(t).values()) == {2}
    for partition, bucket in files_per_bucket(t):
        files = sorted((e.file for e in t.live_entries() if (e.partition, e.bucket) == (partition, bucket)),
                       key=lambda f: f.min_sequence_number)  # fmt: skip
        assert files[0].min_sequence_number == 0
        assert files[0].max_sequence_number + 1 == files[1].min_sequence_number
    assert {b: sorted(_bucket_rows(t, b)) for b in files_per_bucket(t)} == before
    assert t.verify_buckets().ok
    full = t.compact(full=True)
    assert full.files_before == 8 and set(files_per_bucket(t).values()) == {1}


def _bucket_rows(table, key) -> list[int]:
    return [
        i
        for split in table.plan().splits
        if (split.partition, split.bucket) == key
        for i in table.new_read(columns=["order_id"]).read_split(split).column("order_id").to_pylist()
    ]


def test_full_compaction_rewrites_every_file_per_partition(catalog):
    t = append_table(catalog, writes=3)
    assert t.compact().snapshot_id is None
    done = t.compact(full=True)
    assert (done.files_before, done.files_after) == (6, 2)


def test_new_files_get_the_configured_file_indexes(catalog):
    t = append_table(catalog, **{"file-index.bloom-filter.columns": "user_id"})
    t.compact()
    report = t.verify_file_indexes()
    assert report.ok and report.files_checked == 2 and not report.missing


def test_a_failed_rewrite_commits_nothing_and_leaves_no_files(catalog):
    t = append_table(catalog, writes=6, **{"target-file-size": "8 kb"})
    latest, names = t.latest_snapshot_id(), data_files(t)
    newest = max((e for e in t.live_entries() if e.partition == t.live_entries()[0].partition),
                 key=lambda e: e.file.min_sequence_number)  # fmt: skip
    path = Path(t.paths.root) / t.bucket_path(newest.partition, newest.bucket) / newest.file.file_name
    path.write_bytes(path.read_bytes()[:100])  # read last: earlier inputs are written by then
    with pytest.raises(CorruptFileError, match=newest.file.file_name):
        t.compact(full=True)
    assert t.latest_snapshot_id() == latest and data_files(t) == names


def test_a_compaction_that_loses_the_race_deletes_what_it_wrote(catalog):
    t = append_table(catalog)
    latest, names = t.latest_snapshot_id(), data_files(t)
    buckets = compaction_buckets(t.store)
    first, second = compact_buckets(t.store, buckets), compact_buckets(t.store, buckets)
    won = commit_compaction(t.store, first)
    assert won.snapshot_id == latest + 1
    lost = {f.file_name for m in second for f in m.compact_after}
    assert lost <= data_files(t)
    with pytest.raises(CommitConflictError):
        commit_compaction(t.store, second)
    assert t.latest_snapshot_id() == latest + 1
    assert data_files(t) == names | {f.file_name for m in first for f in m.compact_after}


def test_appends_after_a_compaction_continue_the_sequence(catalog):
    t = append_table(catalog, bucket="1", **{"bucket-key": "order_id"})
    t.compact(full=True)
    t.write(orders(range(5000, 5010), dt=DAYS[0]))
    seqs = sorted((e.file.min_sequence_number, e.file.max_sequence_number) for e in t.live_entries()
                  if e.file.row_count == 10)  # fmt: skip
    assert seqs == [(350, 359)]
