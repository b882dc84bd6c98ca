"""Dynamic buckets: HASH index files against Paimon's bytes, and the vectorized assigner against a
per-key model of Java's ``PartitionIndex`` rules (loading, non-full map order, new buckets,
max-buckets, assigner split), plus persistence round trips through written HASH files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.bucket import hash_index
from lakehouse.bucket.bucket_map import HashBucketMap
from lakehouse.bucket.channels import AssignerSplit, assigner_channel
from lakehouse.bucket.dynamic import (
    BucketAssignerGroup,
    DynamicBucketOptions,
    HashBucketAssigner,
    key_hashes,
)
from lakehouse.bucket.partition_index import PartitionIndex, _loaded_order
from lakehouse.errors import CorruptFileError, InvalidOptionError, MisroutedRowsError
from lakehouse.fileindex.java_hashmap import JavaHashMap
from lakehouse.io.fs import FileIO
from lakehouse.options import CoreOptions
from lakehouse.paths import TablePaths, index_file_namer
from lakehouse.types import parse_type
from tests.conftest import golden

HASH_CASES = golden("hash_index.json")["cases"]


# ---- HASH index files --------------------------------------------------------------------------


@pytest.mark.parametrize("case", HASH_CASES, ids=lambda c: c["name"])
def test_hash_index_bytes_match_paimon(case, tmp_path):
    ints = np.array(case["ints"], dtype=np.int32)
    assert hash_index.encode(ints).hex() == case["file_hex"]
    assert hash_index.decode(bytes.fromhex(case["file_hex"]), "f").tolist() == case["read_back"]

    io, paths = FileIO.for_uri(str(tmp_path))[0], TablePaths(str(tmp_path))
    meta = hash_index.write(io, paths, index_file_namer(), ints)
    expected = case["index_file_meta"]
    assert (meta.index_type, meta.file_size, meta.row_count) == (
        expected["index_type"],
        expected["file_size"],
        expected["row_count"],
    )
    assert meta.file_name.startswith("index-") and meta.file_name.endswith("-0")
    assert (tmp_path / "index" / meta.file_name).read_bytes().hex() == case["file_hex"]
    assert hash_index.read(io, paths, meta).tolist() == case["read_back"]


def test_broken_hash_index_files_name_the_file(tmp_path):
    io, paths = FileIO.for_uri(str(tmp_path))[0], TablePaths(str(tmp_path))
    meta = hash_index.write(io, paths, index_file_namer(), np.array([1, 2], np.int32))
    path = tmp_path / "index" / meta.file_name
    path.write_bytes(path.read_bytes()[:7])
    with pytest.raises(CorruptFileError, match=f"{meta.file_name} has 7 bytes.*restore"):
        hash_index.read(io, paths, meta)
    path.write_bytes(b"\0\0\0\1")
    with pytest.raises(CorruptFileError, match="holds 1 key hashes but the index manifest records 2"):
        hash_index.read(io, paths, meta)
    path.unlink()
    with pytest.raises(CorruptFileError, match=f"{meta.file_name} is missing"):
        hash_index.read(io, paths, meta)


# ---- a per-key model of Java's PartitionIndex --------------------------------------------------


def java_channel(partition_hash: int, key_hash: int, channels: int, assigners: int) -> int:
    start = abs(int(math.fmod(partition_hash, channels)))
    return (start + abs(int(math.fmod(key_hash, assigners)))) % channels


def routed(partition_hash: int, key_hash: int, split: AssignerSplit) -> bool:
    return java_channel(partition_hash, key_hash, split.num_channels, split.num_assigners) == split.assign_id


class JavaModel:
    """``PartitionIndex.loadIndex`` + ``assign``, one hash at a time; rule 4 picks
    ``sorted(buckets)[abs(hash % n)]`` instead of Java's random choice."""

    def __init__(self, files, partition_hash, target, max_buckets, split: AssignerSplit):
        self.target, self.max_buckets, self.split = target, max_buckets, split
        self.hash2bucket: dict[int, int] = {}
        self.counts: dict[int, int] = {}
        self.files: dict[int, set[int]] = {}  # what each bucket's HASH file holds
        self.changed: set[int] = set()
        table = JavaHashMap()
        for bucket, hashes in files:
            for h in hashes:
                if routed(partition_hash, h, split):
                    self.hash2bucket[h] = bucket
                if self.owns(bucket):
                    table.compute_if_absent(bucket, bucket)  # HashMap.compute, once per hash
                    self.counts[bucket] = self.counts.get(bucket, 0) + 1
            self.files.setdefault(bucket, set()).update(hashes)
        self.non_full = list(table)
        self.buckets = list(table)
        self.bound_reached = False

    def owns(self, bucket: int) -> bool:
        return bucket % self.split.num_assigners == self.split.assign_id % self.split.num_assigners

    def assign(self, h: int) -> int:
        if h in self.hash2bucket:
            return self.hash2bucket[h]
        bucket = self._new_key(h)
        self.hash2bucket[h] = bucket
        self.files.setdefault(bucket, set()).add(h)
        self.changed.add(bucket)
        return bucket

    def _new_key(self, h: int) -> int:
        while self.non_full:
            bucket = self.non_full[0]
            if self.counts[bucket] < self.target:
                self.counts[bucket] += 1
                return bucket
            self.non_full.pop(0)
        limit = 32767 if self.max_buckets == -1 else self.max_buckets
        if not self.bound_reached:
            for i in range(limit):
                if self.owns(i) and i not in self.buckets:
                    self.non_full.append(i)
                    self.counts[i] = 1
                    self.buckets.append(i)
                    return i
            if self.max_buckets == -1:
                raise InvalidOptionError("too many buckets")
            self.bound_reached = True
        if not self.buckets:
            raise InvalidOptionError("no bucket")
        ordered = sorted(self.buckets)
        return ordered[abs(int(math.fmod(h, len(ordered))))]


# low ids, ids that wrap around a 16-bin HashMap table, and ids crowding one bin
BUCKETS = st.one_of(st.integers(0, 12), st.integers(13, 80), st.sampled_from([64, 128, 192, 256, 67, 131]))
HASHES = st.one_of(st.integers(-40, 40), st.sampled_from([-(2**31), 2**31 - 1, 2**31 - 2, 123456789]))


@st.composite
def scenarios(draw):
    channels = draw(st.integers(1, 4))
    split = AssignerSplit(channels, draw(st.integers(1, channels)), draw(st.integers(0, channels - 1)))
    files = draw(st.lists(st.tuples(BUCKETS, st.lists(HASHES, max_size=12, unique=True)), max_size=16))
    return dict(
        split=split,
        target=draw(st.integers(3, 10)),
        max_buckets=draw(st.sampled_from([-1, -1, 1, 2, 3, 5, 8])),
        partition_hash=draw(st.integers(-(2**31), 2**31 - 1)),
        files=files,
        batches=draw(st.lists(st.lists(HASHES, max_size=40), min_size=1, max_size=5)),
    )


def _arrays(files):
    return [(b, np.array(h, dtype=np.int32)) for b, h in files]


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_vectorized_assignment_equals_java_one_key_at_a_time(s):
    split, ph = s["split"], s["partition_hash"]
    model = JavaModel(s["files"], ph, s["target"], s["max_buckets"], split)
    index = PartitionIndex.load(_arrays(s["files"]), ph, s["target"], s["max_buckets"], split)
    for batch in s["batches"]:
        batch = [h for h in batch if routed(ph, h, split)]
        try:
            expected = [model.assign(h) for h in batch]
        except InvalidOptionError:
            with pytest.raises(InvalidOptionError):
                index.assign(np.array(batch, dtype=np.int32))
            return
        assert index.assign(np.array(batch, dtype=np.int32)).tolist() == expected
        changes = index.take_changes()
        assert set(changes) == model.changed
        for bucket, hashes in changes.items():
            assert hashes.tolist() == sorted(model.files[bucket])
        model.changed = set()


@settings(max_examples=150, deadline=None)
@given(
    parallelism=st.integers(1, 4),
    initial_buckets=st.one_of(st.none(), st.integers(1, 4)),
    target=st.integers(3, 10),
    max_buckets=st.sampled_from([-1, 4, 9]),
    partition_hash=st.integers(-(2**31), 2**31 - 1),
    files=st.lists(st.tuples(st.integers(0, 9), st.lists(HASHES, max_size=12, unique=True)), max_size=5),
    batches=st.lists(st.lists(HASHES, max_size=40), min_size=1, max_size=4),
)
def test_a_group_of_assigners_routes_like_a_parallel_java_job(
    parallelism, initial_buckets, target, max_buckets, partition_hash, files, batches
):
    options = DynamicBucketOptions(target, max_buckets, initial_buckets)
    group = BucketAssignerGroup(options, lambda partition: _arrays(files), parallelism)
    models = [JavaModel(files, partition_hash, target, max_buckets, t.split) for t in group.tasks]
    split = group.tasks[0].split
    for batch in batches:
        shape = split.num_channels, split.num_assigners
        channels = [java_channel(partition_hash, h, *shape) for h in batch]
        assert assigner_channel(partition_hash, np.array(batch, np.int32), *shape).tolist() == channels
        try:
            expected = [models[c].assign(h) for h, c in zip(batch, channels, strict=True)]
        except InvalidOptionError:
            with pytest.raises(InvalidOptionError):
                group.assign("p", partition_hash, np.array(batch, dtype=np.int32))
            return
        assert group.assign("p", partition_hash, np.array(batch, dtype=np.int32)).tolist() == expected
        changes = {u.bucket: u.hashes.tolist() for u in group.take_changes()}
        wanted: dict[int, set[int]] = {}
        for model in models:
            for bucket in model.changed:
                wanted.setdefault(bucket, set()).update(model.files[bucket])
            model.changed = set()
        assert changes == {b: sorted(h) for b, h in wanted.items()}


# ---- Java details ----------------------------------------------------------------------------


def test_loaded_buckets_iterate_in_jdk_hashmap_order():
    """Orders printed by JDK 17 (tests/data/dynamic_bucket_order.jsh), tree bins and late resizes
    included: an existing bucket's compute() call still grows an overfull table."""
    text = (Path(__file__).parent / "data" / "dynamic_bucket_order.txt").read_text()
    for line in text.splitlines():
        files_text, order_text = line.split(" ")
        files = [tuple(map(int, f.split(":"))) for f in files_text.strip(",").split(",")]
        order = [int(b) for b in order_text.strip(",").split(",") if b]
        assert _loaded_order([f for f in files if f[1]]) == order


def test_assigner_channel_uses_java_truncating_remainders():
    assert assigner_channel(-7, np.array([-5, 5, 0], np.int32), 4, 3).tolist() == [1, 1, 3]
    assert [s.num_assigners for s in AssignerSplit.tasks(4, initial_buckets=2)] == [2, 2, 2, 2]
    assert [s.assign_id for s in AssignerSplit.tasks(3)] == [0, 1, 2]
    assert AssignerSplit.tasks(2, initial_buckets=8)[0].num_assigners == 2
    with pytest.raises(InvalidOptionError):
        AssignerSplit(2, 3, 0)


def test_the_non_full_map_is_consumed_in_load_order_and_overfull_buckets_only_take_spills():
    # bucket 16 iterates before 3 (bin 0 before bin 3); bucket 5 holds more rows than the target
    files = [(3, np.arange(0, 2, dtype=np.int32)), (16, np.arange(10, 13, dtype=np.int32)),
             (5, np.arange(20, 27, dtype=np.int32))]  # fmt: skip
    index = PartitionIndex.load(files, 0, target_row_num=4, max_buckets=1)
    new = np.arange(100, 106, dtype=np.int32)
    assert index.assign(new).tolist() == [16, 3, 3, 0, 0, 0]
    assert index.assign(np.array([21, 1, 100], np.int32)).tolist() == [5, 3, 16]
    # bucket 0 fills up and max-buckets (1) allows no other: new keys spill over all four buckets
    spilled = index.assign(np.arange(200, 208, dtype=np.int32))
    assert spilled[0] == 0 and set(spilled[1:].tolist()) <= {0, 3, 5, 16}
    assert spilled[1:].tolist() == [[0, 3, 5, 16][h % 4] for h in range(201, 208)]


def test_foreign_hashes_survive_in_rewritten_files():
    split = AssignerSplit(2, 2, 0)  # partition hash 0: even key hashes are ours, odd ones another's
    index = PartitionIndex.load([(0, np.array([1, 2, 3, 4], np.int32))], 0, 10, split=split)
    assert index.assign(np.array([6, 2], np.int32)).tolist() == [0, 0]
    assert index.take_changes()[0].tolist() == [1, 2, 3, 4, 6]
    with pytest.raises(MisroutedRowsError, match="routed to another assigner"):
        HashBucketAssigner(DynamicBucketOptions(), split).assign("p", 0, np.array([1], np.int32))


def test_running_out_of_bucket_ids_fails_without_assigning():
    index = PartitionIndex.load(
        [(1, np.array([7], np.int32))], 0, 1, max_buckets=2, split=AssignerSplit(2, 2, 0)
    )
    assert index.assign(np.array([8, 9], np.int32)).tolist() == [0, 0]  # owns 0 only; then spills
    lonely = PartitionIndex(1, max_buckets=1, split=AssignerSplit(2, 2, 1))
    with pytest.raises(InvalidOptionError, match="owns no bucket id below dynamic-bucket.max-buckets=1"):
        lonely.assign(np.array([5], np.int32))
    many = PartitionIndex(1, split=AssignerSplit(4, 4, 1))
    with pytest.raises(InvalidOptionError, match="raise dynamic-bucket.target-row-num"):
        many.assign(np.arange(9000, dtype=np.int32))
    assert not many.has_changes and len(many.keys) == 0


def test_idle_partitions_are_evicted_once_their_last_use_is_committed():
    assigner = HashBucketAssigner(DynamicBucketOptions(target_row_num=5))
    assigner.assign("a", 1, np.array([1, 2], np.int32))
    assigner.assign("b", 2, np.array([1], np.int32))
    assigner.take_changes()
    assert assigner.evict_idle(1, latest_committed=None) == []  # both used in interval 1
    assigner.assign("a", 1, np.array([3], np.int32))
    assert assigner.evict_idle(2, latest_committed=None) == []  # b idle, nothing committed yet
    assigner.assign("a", 1, np.array([3], np.int32))
    assert assigner.evict_idle(3, latest_committed=0) == []  # b's last use (1) not committed
    assert assigner.evict_idle(4, latest_committed=1) == ["b"]
    assigner.assign("a", 1, np.array([4], np.int32))  # a has changes not taken yet
    assert assigner.evict_idle(5, latest_committed=5) == []
    assert assigner.evict_idle(6, latest_committed=5) == []
    assigner.take_changes()
    assert assigner.evict_idle(7, latest_committed=6) == ["a"]
    assert assigner.partitions == []


def test_options_come_from_table_options():
    opts = DynamicBucketOptions.from_table(CoreOptions({"dynamic-bucket.initial-buckets": "4"}))
    assert opts == DynamicBucketOptions(2_000_000, -1, 4, None)
    opts = DynamicBucketOptions.from_table(
        CoreOptions({"dynamic-bucket.target-row-num": "10", "dynamic-bucket.max-buckets": "3",
                     "dynamic-bucket.assigner-parallelism": "2"})
    )  # fmt: skip
    assert opts == DynamicBucketOptions(10, 3, None, 2)
    bad = [("target-row-num", "0"), ("max-buckets", "0"), ("max-buckets", "40000"), ("initial-buckets", "-2")]
    for key, value in bad:
        with pytest.raises(InvalidOptionError, match=key):
            DynamicBucketOptions.from_table(CoreOptions({f"dynamic-bucket.{key}": value}))
    with pytest.raises(TypeError, match="int32"):
        HashBucketAssigner(opts).assign("p", 0, np.array([1, 2]))


def test_key_hashes_are_binary_row_hash_codes():
    cases = [c for c in golden("binary_row.json")["cases"] if c["types"] in (["INT", "STRING"], ["BIGINT"])]
    for types in (["INT", "STRING"], ["BIGINT"]):
        rows = [c for c in cases if c["types"] == types]
        dtypes = [parse_type(t) for t in types]
        table = pa.table(
            {f"k{i}": pa.array([r["values"][i] for r in rows], _arrow(t)) for i, t in enumerate(types)}
        )
        assert key_hashes(table, list(table.column_names), dtypes).tolist() == [r["hash_code"] for r in rows]


def _arrow(sql: str) -> pa.DataType:
    return {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string()}[sql]


# ---- the compact map ---------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(batches=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=60), max_size=12))
def test_the_run_map_answers_like_a_dict(batches):
    compact, plain = HashBucketMap(), {}
    for i, batch in enumerate(batches):
        new = sorted(set(batch) - set(plain))
        compact.insert(np.array(new, dtype=np.int32), np.full(len(new), i, np.int16))
        plain.update(dict.fromkeys(new, i))
        probe = np.array(sorted(set(batch) | {0, 5}), dtype=np.int32)
        assert compact.lookup(probe).tolist() == [plain.get(h, -1) for h in probe.tolist()]
        shuffled = probe[::-1]  # any order
        assert compact.lookup(shuffled).tolist() == [plain.get(h, -1) for h in shuffled.tolist()]
    assert len(compact) == len(plain)
    assert HashBucketMap.from_pairs(np.array([3, 1, 3], np.int32), np.array([1, 2, 9])).lookup(
        np.array([1, 3], np.int32)
    ).tolist() == [2, 9]


def test_large_batches_search_and_merge_the_shards_side_by_side(monkeypatch):
    """Batches of many hashes go to the shards on several threads (16 cores believed): the map
    still answers like a dict."""
    from lakehouse.io import pool
    from lakehouse.io.cores import THREADS_ENV, usable_cores

    monkeypatch.setenv(THREADS_ENV, "16")
    usable_cores.cache_clear()
    calls = []
    parallel = pool.map_parallel  # the shards' slices (map_slices) run through it
    monkeypatch.setattr(
        pool, "map_parallel", lambda fn, items: calls.append(len(items)) or parallel(fn, items)
    )
    try:
        rng = np.random.default_rng(5)
        compact, plain = HashBucketMap(), {}
        for i in range(3):
            batch = np.unique(rng.integers(-(2**31), 2**31, 300_000).astype(np.int32))
            absent = compact.lookup(batch) < 0
            new = batch[absent]
            compact.insert(new, np.full(len(new), i, np.int16))
            plain.update(dict.fromkeys(new.tolist(), i))
        probe = np.concatenate([batch[::-1], rng.integers(-(2**31), 2**31, 100_000).astype(np.int32)])
        assert compact.lookup(probe).tolist() == [plain.get(h, -1) for h in probe.tolist()]
        assert len(compact) == len(plain)
        assert calls and all(workers > 1 for workers in calls)
    finally:
        usable_cores.cache_clear()


# ---- persistence ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parallelism, initial_buckets, max_buckets", [(1, None, -1), (1, None, 3), (4, 2, -1), (2, None, 5)]
)
def test_reloading_from_written_files_continues_as_if_never_reloaded(
    tmp_path, parallelism, initial_buckets, max_buckets
):
    """Assign, write every changed bucket's HASH file, reload a new assigner from the files: it
    answers the next batch exactly as the assigner that kept its state in memory."""
    io, paths = FileIO.for_uri(str(tmp_path))[0], TablePaths(str(tmp_path))
    names = index_file_namer()
    manifest: dict[tuple[str, int], object] = {}  # (partition, bucket) -> its current HASH file

    def loader(partition):
        return [(b, hash_index.read(io, paths, meta)) for (p, b), meta in manifest.items() if p == partition]

    options = DynamicBucketOptions(target_row_num=7, max_buckets=max_buckets, initial_buckets=initial_buckets)
    live = BucketAssignerGroup(options, loader, parallelism)
    rng = np.random.default_rng(7)
    for step in range(8):
        reloaded = BucketAssignerGroup(options, loader, parallelism)
        for partition, partition_hash in (("x", 11), ("y", -3)):
            batch = rng.integers(-60, 60 + 10 * step, 25).astype(np.int32)
            expected = live.assign(partition, partition_hash, batch)
            assert reloaded.assign(partition, partition_hash, batch).tolist() == expected.tolist()
        updates = live.take_changes()
        assert {(u.partition, u.bucket): u.hashes.tolist() for u in reloaded.take_changes()} == {
            (u.partition, u.bucket): u.hashes.tolist() for u in updates
        }
        for u in updates:
            manifest[(u.partition, u.bucket)] = hash_index.write(io, paths, names, u.hashes)
    assert len(manifest) >= 4


# ---- dynamic-bucket tables: writes, reads, index manifest --------------------------------------

from lakehouse.errors import CommitConflictError  # noqa: E402
from lakehouse.write.bucket_assigner import assigner_splits  # noqa: E402
from lakehouse.write.router import RowRouter  # noqa: E402

from .conftest import ORDERS, orders, rows, stored_hashes  # noqa: E402


def assigner_channels(schema, data: pa.Table, writers: int) -> np.ndarray:
    """The assigner channel of each row of ``data`` among ``writers`` writers."""
    router = RowRouter(schema, writers)
    return router.route(*(data.column(c).combine_chunks() for c in router.columns))


def dynamic_table(catalog, name="db.d", **options):
    return catalog.create_table(
        name, ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"], options=options
    )


def test_dynamic_bucket_table_spreads_keys_and_keeps_them_in_their_bucket(catalog):
    t = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "40"})
    assert t.schema.core_options.bucket == -1  # Paimon's default for primary-key tables
    t.write(orders(range(100), dt=["2024-01-01", "2024-01-02"] * 50, price=1.0))
    buckets = {(e.partition, e.bucket): e.file.row_count for e in t.live_entries()}
    assert len(buckets) >= 4 and max(buckets.values()) <= 40  # a new bucket once one holds 40 keys
    assert all(e.total_buckets == -1 for e in t.live_entries())
    first = {e.file.file_name: (e.partition, e.bucket) for e in t.live_entries()}
    t.write(orders(range(0, 100, 3), dt=["2024-01-01", "2024-01-02"] * 17, price=2.0))
    got = rows(t.read(), ["dt", "order_id"])
    assert len(got) == 100  # updates found their keys' buckets: nothing duplicated
    assert sorted(r["order_id"] for r in got if r["price"] == 2.0) == list(range(0, 100, 3))
    # the HASH file of every bucket holds exactly the key hashes of its rows
    hashes = stored_hashes(t)
    assert set(hashes) == {(e.partition, e.bucket) for e in t.live_entries()}
    assert sum(len(h) for h in hashes.values()) == 100
    assert set(first.values()) <= set(hashes)


def test_max_buckets_caps_the_buckets_of_a_partition(catalog):
    t = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "10", "dynamic-bucket.max-buckets": "3"})
    t.write(orders(range(100)))
    assert {e.bucket for e in t.live_entries()} == {0, 1, 2}
    assert t.read().num_rows == 100


def test_dynamic_buckets_with_deletion_vectors(catalog):
    t = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "60", "deletion-vectors.enabled": "true"})
    t.write(orders(range(200), price=1.0))
    t.write(orders(range(5), price=2.0))
    types = {e.index_file.index_type for e in t.index_entries()}
    assert types == {"HASH", "DELETION_VECTORS"}
    got = rows(t.read())
    assert len(got) == 200 and [r["price"] for r in got[:6]] == [2.0] * 5 + [1.0]


def test_two_writers_adding_keys_to_one_bucket_conflict_cleanly(catalog):
    t = dynamic_table(catalog)
    t.write(orders(range(10)))
    first, second = t.new_write(), t.new_write()
    first.write(orders(range(10, 20)))
    second.write(orders(range(20, 30)))
    prepared, messages = first.prepare_commit(), second.prepare_commit()  # both from one snapshot
    committed = t.new_commit().commit(prepared)
    with pytest.raises(CommitConflictError, match="index files"):
        t.new_commit().commit(messages)
    t.new_commit().abort(messages)
    assert t.latest_snapshot_id() == committed
    assert sorted(r["order_id"] for r in rows(t.read())) == list(range(20))
    assert sum(len(h) for h in stored_hashes(t).values()) == 20


def test_overwrite_rebuilds_the_partitions_hash_index(catalog):
    t = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "30"})
    t.write(orders(range(100), dt="2024-01-01"))
    t.write(orders(range(10), dt="2024-01-02"))
    t.write(orders(range(5), dt="2024-01-01"), overwrite={"dt": "2024-01-01"})
    hashes = stored_hashes(t)
    assert sum(len(h) for h in hashes.values()) == 15
    t.write(orders(range(5), dt="2024-01-01", price=3.0))
    assert len(rows(t.read(), ["dt", "order_id"])) == 15


# ---- split writers: one assigner each, one commit ----------------------------------------------


def split_write(t, data: pa.Table, writers: int) -> list:
    """``data`` written by ``writers`` split writers, each handed the rows of its assigner channel;
    returns their commit messages."""
    channels = assigner_channels(t.schema, data, writers)
    messages = []
    for split in assigner_splits(t.schema, writers):
        writer = t.new_write(assigner=split)
        writer.write(data.filter(pa.array(channels == split.assign_id)))
        messages += writer.prepare_commit()
    return messages


def key_layout(t) -> dict[tuple[bytes, int], list[int]]:
    """The order ids of each (partition, bucket)."""
    out: dict[tuple[bytes, int], list[int]] = {}
    for split in t.plan().splits:
        out[(split.partition, split.bucket)] = sorted(
            t.new_read().read_split(split).column("order_id").to_pylist()
        )
    return out


DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


@pytest.mark.parametrize("writers, initial", [(3, None), (4, "2")])
def test_split_writers_bucket_keys_like_one_writer_running_every_assigner(catalog, writers, initial):
    options = {"dynamic-bucket.target-row-num": "12", "dynamic-bucket.assigner-parallelism": str(writers)}
    if initial:
        options["dynamic-bucket.initial-buckets"] = initial
    group, split = (
        dynamic_table(catalog, "db.group", **options),
        dynamic_table(catalog, "db.split", **options),
    )
    for ids, price in ((range(150), 1.0), (range(0, 240, 4), 2.0), (range(7, 300, 9), 3.0)):
        ids = list(ids)
        data = orders(ids, dt=[DAYS[i % 3] for i in ids], price=price)
        group.write(data)
        split.new_commit().commit(split_write(split, data, writers))
    assert key_layout(split) == key_layout(group)
    assert len({b for _, b in key_layout(split)}) > writers  # every writer created buckets
    assert stored_hashes(split) == stored_hashes(group)
    got = rows(split.read(), ["order_id", "dt"])
    assert got == rows(group.read(), ["order_id", "dt"]) and len(got) == len({r["order_id"] for r in got})


def test_split_writers_refuse_rows_they_cannot_write_alone(catalog):
    t = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "1000"})
    t.write(orders(range(40)))  # one assigner: every key in bucket 0
    first, second = assigner_splits(t.schema, 2)
    data = orders(range(40, 80))
    channels = assigner_channels(t.schema, data, 2)
    misrouted = t.new_write(assigner=first)
    misrouted.write(data.filter(pa.array(channels == 1)))
    with pytest.raises(MisroutedRowsError, match="routed to another assigner reached assigner 0"):
        misrouted.prepare_commit()
    misrouted.abort()
    # keys of assigner 1 live in bucket 0, which assigner 0 of two owns
    update = orders(range(40), price=2.0)
    writer = t.new_write(assigner=second)
    writer.write(update.filter(pa.array(assigner_channels(t.schema, update, 2) == 1)))
    with pytest.raises(InvalidOptionError, match=r"live in buckets \[0\], which other assigners own"):
        writer.prepare_commit()
    writer.abort()
    t.new_commit().commit(split_write(t, data, 2))  # new keys only: fine
    assert sorted(t.read().column("order_id").to_pylist()) == list(range(80))
    shared = dynamic_table(catalog, "db.shared", **{"dynamic-bucket.initial-buckets": "2"})
    writer = shared.new_write(assigner=assigner_splits(shared.schema, 3)[0])
    writer.write(orders([0]))
    with pytest.raises(InvalidOptionError, match="3 writers with 2 assigners per partition would share"):
        writer.prepare_commit()
    fixed = catalog.create_table("db.fixed", ORDERS, primary_keys=["order_id"], options={"bucket": "2"})
    with pytest.raises(InvalidOptionError, match="its writers take no assigner split"):
        fixed.new_write(assigner=first)
