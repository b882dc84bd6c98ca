"""LSM compaction: Paimon's universal pick, full compaction, copy-on-write, write-only plus the
dedicated job, upgrades without rewriting, dropped deletes, indexes on outputs, streaming merges
and racing compactions."""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pytest

from lakehouse.errors import CommitConflictError
from lakehouse.io.cores import THREADS_ENV, usable_cores
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import DataFileMeta, FileSource
from lakehouse.mergetree import compactor as compact_module
from lakehouse.mergetree.levels import KeyRanges, SortedRun, sections
from lakehouse.mergetree.universal import UniversalCompaction, pick_full
from lakehouse.snapshot import CommitKind
from lakehouse.store.data_reader import decoded_bytes
from lakehouse.types import BIGINT
from tests.conftest import ORDERS, orders, pk_orders_table, rows


def _run(level: int, size: int) -> SortedRun:
    meta = DataFileMeta(f"f{level}-{size}", size, 1, b"", b"", None, None, 0, 0, 0, level)
    return SortedRun(level, (meta,))


def _pick(sizes_levels: list[tuple[int, int]], trigger: int = 5, amp: int = 200, ratio: int = 1):
    runs = [_run(level, size) for size, level in sizes_levels]
    unit = UniversalCompaction(amp, ratio, trigger).pick(trigger + 1, runs)
    return None if unit is None else (unit.output_level, [f.file_size for f in unit.files])


def test_a_sections_runs_stand_oldest_first():
    """Runs packed by key order, listed by their newest rows: a merge concatenating them meets
    each key's versions in sequence order (its fast path)."""

    def file(name: str, low: int, high: int, newest: int) -> DataFileMeta:
        key = [binary_row.serialize(binary_row.encode_row([k], [BIGINT]), 1) for k in (low, high)]
        return DataFileMeta(name, 1, 1, *key, None, None, newest, newest, 0, 0)

    files = [file("new-left", 0, 40, 9), file("old", 0, 100, 1), file("new-right", 50, 90, 7)]
    (section,) = sections(files, KeyRanges([BIGINT], "t"))
    assert [[f.file_name for f in run.files] for run in section] == [["old"], ["new-left", "new-right"]]


def test_universal_pick():
    # fewer runs than the trigger: nothing
    assert _pick([(1, 0), (1, 0), (1, 0), (1, 0)]) is None
    # size amplification: the newer runs outweigh 200% of the oldest -> everything to the top
    assert _pick([(1, 0), (1, 0), (1, 0), (1, 0), (1, 5)]) == (5, [1, 1, 1, 1, 1])
    # size ratio: 1, 1, 2 accumulate; 10 is too large and sits in level 4 -> output level 3
    assert _pick([(1, 0), (1, 0), (2, 0), (10, 4), (100, 5)], amp=10_000) == (3, [1, 1, 2])
    # file number: 7 runs > trigger 5 whose sizes never pass the ratio -> the 3 newest runs are
    # forced, then level-0 runs keep joining; output just below the next run (level 3 - 1)
    got = _pick([(1, 0), (4, 0), (16, 0), (64, 0), (256, 0), (1024, 3), (4096, 5)], amp=10_000)
    assert got == (2, [1, 4, 16, 64, 256])


def test_pick_full():
    assert pick_full(6, []) is None
    assert pick_full(6, [_run(5, 10)]) is None
    unit = pick_full(6, [_run(0, 1), _run(5, 10)])
    assert unit.output_level == 5 and len(unit.files) == 2


def _levels(table) -> list[int]:
    return sorted(e.file.level for e in table.live_entries())


def test_writes_compact_at_the_trigger(catalog):
    t = pk_orders_table(catalog)
    for i in range(4):
        t.write(orders(range(i * 10, i * 10 + 20), price=float(i)))
    assert set(_levels(t)) == {0}
    kinds = [t.snapshots.snapshot(i).commit_kind for i in range(1, t.latest_snapshot_id() + 1)]
    assert kinds == [CommitKind.APPEND] * 4
    t.write(orders(range(40, 60), price=4.0))  # fifth run per bucket: compaction follows
    assert t.snapshots.latest().commit_kind == CommitKind.COMPACT
    assert 0 not in _levels(t)
    expected = {i: float(min(i // 10, 4)) for i in range(60)}
    assert {r["order_id"]: r["price"] for r in rows(t.read())} == expected


def test_full_compaction_drops_deletes_and_is_idempotent(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true"})
    t.write(orders(range(100)))
    deletes = orders(range(0, 100, 2)).append_column("_row_kind", pa.array(["-D"] * 50))
    t.write(deletes)
    before = rows(t.read())
    report = t.compact(full=True)
    assert report.snapshot_id == t.latest_snapshot_id() and report.files_before == 4
    files = [e.file for e in t.live_entries()]
    assert {f.level for f in files} == {5} and all(f.delete_row_count == 0 for f in files)
    assert {f.file_source for f in files} == {FileSource.COMPACT}
    assert sum(f.row_count for f in files) == 50
    assert rows(t.read()) == before
    assert t.compact(full=True).snapshot_id is None  # one run at the top already: nothing to do
    plan = t.plan()
    assert all(s.raw_convertible for s in plan.splits)


def test_copy_on_write(catalog):
    t = pk_orders_table(catalog, **{"full-compaction.delta-commits": "1"})
    for i in range(3):
        t.write(orders(range(i * 5, i * 5 + 10), price=float(i)))
        assert set(_levels(t)) == {5}
        assert all(s.raw_convertible for s in t.plan().splits)
    assert len(rows(t.read())) == 20


def test_full_compaction_every_n_commits(catalog):
    t = pk_orders_table(catalog, **{"full-compaction.delta-commits": "3"})
    t.write(orders(range(10)))
    t.write(orders(range(10)))
    assert set(_levels(t)) == {0}
    t.write(orders(range(10)))
    assert set(_levels(t)) == {5}
    t.write(orders(range(10)))
    assert 0 in _levels(t)


def test_write_only_and_the_compaction_job(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true"})
    for i in range(7):
        t.write(orders(range(i * 3, i * 3 + 10), price=float(i)))
    assert set(_levels(t)) == {0}
    before = rows(t.read())
    report = t.compact()
    assert report.snapshot_id is not None and 0 not in _levels(t)
    assert rows(t.read()) == before
    empty_append = catalog.create_table("db.a", ORDERS)  # append tables: tests/test_append_compaction.py
    assert empty_append.compact().snapshot_id is None


def test_compaction_of_some_partitions(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true"})
    data = orders(range(20), dt=["2024-01-01", "2024-01-02"] * 10)
    t.write(data)
    t.write(data)
    t.compact(full=True, partitions={"dt": "2024-01-01"})
    by_dt = {}
    for e in t.live_entries():
        by_dt.setdefault(e.partition, set()).add(e.file.level)
    assert sorted(map(sorted, by_dt.values())) == [[0], [5]]


def test_large_files_are_upgraded_not_rewritten(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true", "target-file-size": "1 kb"})
    t.write(orders(range(0, 400)))
    names = {e.file.file_name for e in t.live_entries()}
    t.compact(full=True)
    after = t.live_entries()
    assert {e.file.level for e in after} == {5}
    assert {e.file.file_name for e in after} == names  # same files, only moved to the top level


def test_compaction_writes_file_indexes(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true", "file-index.bloom-filter.columns": "order_id"})
    t.write(orders(range(50)))
    t.write(orders(range(25, 75)))
    t.compact(full=True)
    files = [e.file for e in t.live_entries()]
    assert all(f.embedded_index or f.extra_files for f in files)
    assert t.verify_file_indexes().ok
    from lakehouse import col

    plan = t.plan(filter=col("order_id") == 10**9)
    assert plan.stats["files_selected"] < len(files)


@pytest.mark.parametrize("budget", ["64 mb", "64 kb"])
def test_a_merge_reads_each_run_within_sort_spill_buffer_size(catalog, monkeypatch, budget):
    from lakehouse.format import parquet

    read = []
    iter_batches = parquet.iter_batches

    def counting(*args, **kwargs):
        for batch in iter_batches(*args, **kwargs):
            read.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(parquet, "iter_batches", counting)
    t = pk_orders_table(catalog, **{"write-only": "true", "sort-spill-buffer-size": budget, "bucket": "1"})
    for i in range(4):
        t.write(orders(range(i * 1000, i * 1000 + 20_000), price=float(i)))
    before = rows(t.read())
    read.clear()
    t.compact(full=True)
    merge_reads = list(read)
    assert rows(t.read()) == before
    if budget == "64 kb":  # four runs of 16 kb each: less than the smallest batch a read takes
        assert max(merge_reads) == parquet.MIN_BATCH_ROWS
    else:
        assert max(merge_reads) > parquet.MIN_BATCH_ROWS


def test_streaming_merge_in_small_batches(catalog, monkeypatch):
    monkeypatch.setattr(compact_module, "BATCH_ROWS", 7)
    t = pk_orders_table(catalog, **{"write-only": "true"})
    for i in range(6):
        t.write(orders(range(i * 13, i * 13 + 40), price=float(i)))
    before = rows(t.read())
    t.compact(full=True)
    assert rows(t.read()) == before


def test_racing_compactions_one_wins(catalog):
    t = pk_orders_table(catalog, **{"write-only": "true"})
    for i in range(3):
        t.write(orders(range(i * 5, i * 5 + 10), price=float(i)))
    before, latest = rows(t.read()), t.latest_snapshot_id()
    jobs = []
    for _ in range(2):
        writer = t.new_write()
        for p, b in sorted({(e.partition, e.bucket) for e in t.live_entries()}):
            writer.compactor(p, b).compact(full=True)
        jobs.append(writer.prepare_commit())
    t.new_commit().commit(jobs[0])
    loser_files = [
        f"{t.paths.root}/{t.bucket_path(m.partition, m.bucket)}/{f.file_name}"
        for m in jobs[1]
        for f in m.compact_after
    ]
    committer = t.new_commit()
    with pytest.raises(CommitConflictError):
        try:
            committer.commit(jobs[1])
        except CommitConflictError:
            committer.abort(jobs[1])
            raise
    assert t.latest_snapshot_id() == latest + 1
    assert rows(t.read()) == before
    assert not any(os.path.exists(p) for p in loser_files)


def test_buckets_decoding_to_a_seventh_of_the_budget_compact_side_by_side(catalog, monkeypatch):
    """A bucket's compaction reserves three times its decoded files (``DATA_COPIES``, measured):
    two buckets that each decode to a seventh of the jobs budget (2 x ``write-buffer-size``)
    compact at once; five times, as before, kept them one at a time."""
    t = pk_orders_table(catalog)
    for price in (1.0, 2.0):  # two runs in each bucket
        t.write(orders(range(4000), price=price))
    by_bucket: dict[tuple[bytes, int], list[DataFileMeta]] = {}
    for e in t.live_entries():
        by_bucket.setdefault((e.partition, e.bucket), []).append(e.file)
    assert len(by_bucket) == 2
    decoded = max(decoded_bytes(t.store, t.bucket_path(*b), files) for b, files in by_bucket.items())
    monkeypatch.setenv(THREADS_ENV, "16")
    usable_cores.cache_clear()
    both = threading.Barrier(2, timeout=10)  # broken unless both buckets compact at once
    compact = compact_module.BucketCompactor.compact

    def side_by_side(self, full: bool = False) -> bool:
        both.wait()
        return compact(self, full)

    monkeypatch.setattr(compact_module.BucketCompactor, "compact", side_by_side)
    try:
        t.copy({"write-buffer-size": str(int(3.5 * decoded))}).compact(full=True)
    finally:
        usable_cores.cache_clear()
    assert rows(t.read()) == rows(orders(range(4000), price=2.0))
    assert len(t.refresh().live_entries()) == 2  # each bucket's two runs compacted into one file
