"""Table verification beyond file indexes (deletion vectors, hash index, primary-key uniqueness)
and the LSM shape per bucket: healthy tables pass, each kind of injected corruption is found."""

from __future__ import annotations

import numpy as np

from lakehouse.bucket import hash_index
from lakehouse.deletionvectors.index_file import DELETION_VECTORS, encode, read_all_vectors
from lakehouse.deletionvectors.vector import DeletionVector

from .conftest import ORDERS, orders

DAYS = ["2024-01-01", "2024-01-02"]


def dynamic_dv_table(catalog):
    options = {"bucket": "-1", "dynamic-bucket.target-row-num": "10", "deletion-vectors.enabled": "true"}
    t = catalog.create_table("db.o", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                             options=options)  # fmt: skip
    t.write(orders(range(40), dt=DAYS * 20))
    t.write(orders(range(0, 40, 3), dt=DAYS * 7, price=2.0))
    return t


def test_healthy_tables_pass_every_check(catalog):
    t = dynamic_dv_table(catalog)
    for report in (t.verify_deletion_vectors(), t.verify_buckets(), t.verify_primary_key()):
        assert report.ok and report.problems == [] and report.files_checked > 0


def test_a_deletion_vector_deleting_rows_past_its_file_is_found(catalog):
    t = dynamic_dv_table(catalog)
    (entry, *_) = [e for e in t.index_entries() if e.index_file.index_type == DELETION_VECTORS]
    path = t.paths.index_file(entry.index_file.file_name)
    vectors = read_all_vectors(t.io, path, entry.index_file)
    name, vector = next(iter(vectors.items()))
    rows = {e.file.file_name: e.file.row_count for e in t.live_entries()}[name]
    positions = vector.positions()
    positions[-1] = rows + 3  # same container, same size: only the content is wrong
    vectors[name] = DeletionVector.from_positions(positions)
    data, _ = encode(vectors)
    assert len(data) == entry.index_file.file_size
    with open(path, "wb") as f:
        f.write(data)
    report = t.verify_deletion_vectors()
    assert not report.ok and f"deletes row {rows + 3}" in report.problems[0] and name in report.problems[0]


def test_a_key_hash_in_the_wrong_bucket_is_found(catalog):
    t = dynamic_dv_table(catalog)
    entries = [e for e in t.index_entries() if e.index_file.index_type == hash_index.HASH_INDEX]
    first, second = [e for e in entries if e.partition == entries[0].partition][:2]
    a, b = (hash_index.read(t.io, t.paths, e.index_file) for e in (first, second))
    b[0] = a[0]  # a key of the first bucket indexed in the second, in place of one of its own
    with open(t.paths.index_file(second.index_file.file_name), "wb") as f:
        f.write(hash_index.encode(b))
    report = t.verify_buckets()
    assert not report.ok
    assert any("not in its HASH file" in p for p in report.problems)
    assert any("two buckets" in p for p in report.problems)


def test_a_key_written_to_two_buckets_is_found(catalog, monkeypatch):
    t = catalog.create_table("db.f", ORDERS, primary_keys=["order_id"], options={"bucket": "2"})
    t.write(orders(range(10)))
    assert t.verify_primary_key().ok
    import lakehouse.write.table_write as write

    real = write.fixed_buckets
    monkeypatch.setattr(write, "fixed_buckets", lambda *a: (np.asarray(real(*a)) + 1) % 2)
    t.write(orders([3]))
    report = t.verify_primary_key()
    assert not report.ok and "1 primary keys are visible more than once" in report.problems[0]
    assert "'order_id': 3" in report.problems[0]
    placement = t.verify_buckets()
    assert not placement.ok
    assert "1 rows belong to other buckets, e.g. {'order_id': 3}" in placement.problems[0]


def test_lsm_shape_follows_writes_and_compaction(catalog):
    options = {"bucket": "1", "write-only": "true", "num-sorted-run.compaction-trigger": "3"}
    t = catalog.create_table("db.s", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
                             options=options)  # fmt: skip
    for i in range(3):
        t.write(orders(range(i, i + 10), dt=DAYS[0]))
    t.write(orders(range(5), dt=DAYS[1]))
    first, second = t.lsm_shape()
    assert (first.partition, first.files_per_level, first.sorted_runs) == ({"dt": DAYS[0]}, {0: 3}, 3)
    assert first.needs_compaction and first.size_amplification > 100
    assert (second.partition, second.sorted_runs, second.needs_compaction) == ({"dt": DAYS[1]}, 1, False)
    t.compact(full=True)
    shapes = t.lsm_shape()
    assert [s.files_per_level for s in shapes] == [{t.schema.core_options.num_levels - 1: 1}] * 2
    assert not any(s.needs_compaction for s in shapes) and shapes[0].size_amplification == 0
