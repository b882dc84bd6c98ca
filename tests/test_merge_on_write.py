"""Merge on write (``deletion-vectors.enabled``) and lookup compaction: what ends up on disk and
what reads see. Engine semantics under random histories are in ``test_merge_property.py``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse import col
from lakehouse.deletionvectors.index_file import DELETION_VECTORS, read_all_vectors
from lakehouse.errors import InvalidOptionError
from lakehouse.manifest.index_manifest import by_bucket

from .conftest import ORDERS, orders, pk_orders_table, rows

DV = {"deletion-vectors.enabled": "true"}


def vectors(t):
    """Data file name -> deleted positions, over every bucket's live deletion-vectors file."""
    out = {}
    for e in t.index_entries():
        if e.index_file.index_type == DELETION_VECTORS:
            path = t.paths.index_file(e.index_file.file_name)
            for name, v in read_all_vectors(t.io, path, e.index_file).items():
                out[name] = v.positions().tolist()
    return out


def test_updates_mark_older_rows_instead_of_merging_on_read(catalog):
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(10), price=1.0))
    assert vectors(t) == {}  # nothing older to delete yet
    t.write(orders([2, 3, 4], price=2.0))
    live = t.live_entries()
    assert all(e.file.level > 0 for e in live)  # level 0 was pushed up by the writer's compaction
    deleted = vectors(t)
    assert sum(len(p) for p in deleted.values()) == 3  # one superseded row per updated key
    assert set(deleted) <= {e.file.file_name for e in live}
    plan = t.plan()
    assert all(s.raw_convertible for s in plan.splits)  # nothing is merged on read
    assert any(s.deletions for s in plan.splits)
    got = rows(t.read())
    assert [r["price"] for r in got] == [1.0, 1.0, 2.0, 2.0, 2.0] + [1.0] * 5


def test_deletes_remove_rows_through_vectors(catalog):
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(6)))
    gone = orders([1, 4]).append_column("_row_kind", pa.array(["-D", "-D"]))
    t.write(gone)
    assert [r["order_id"] for r in rows(t.read())] == [0, 2, 3, 5]
    assert all(e.file.delete_row_count == 0 for e in t.live_entries())  # no -D row is kept


def test_vectors_survive_later_writes_and_full_compaction_folds_them(catalog):
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(200), price=1.0))
    t.write(orders(range(8), price=2.0))  # small updates land above the big run, not merged with it
    t.write(orders(range(0, 8, 2), price=3.0))
    assert len(vectors(t)) >= 2
    result = t.compact(full=True)
    assert result.snapshot_id is not None
    assert vectors(t) == {}  # every file with a vector was rewritten without its deleted rows
    # each bucket still has a (now empty) deletion-vectors file replacing the old one
    entries = by_bucket(t.index_entries(), DELETION_VECTORS)
    assert entries
    assert all(e.index_file.row_count == 0 and e.index_file.file_size == 1 for e in entries.values())
    assert [r["price"] for r in rows(t.read())[:8]] == [3.0, 2.0] * 4
    assert sum(e.file.row_count for e in t.live_entries()) == 200


def test_write_only_data_is_invisible_until_compacted(catalog):
    t = pk_orders_table(catalog, **DV, **{"write-only": "true"})
    t.write(orders(range(5)))
    assert t.read().num_rows == 0  # level 0 is never read
    t.compact()
    assert [r["order_id"] for r in rows(t.read())] == list(range(5))


def test_value_filters_and_indexes_prune_files_and_rows(catalog):
    t = pk_orders_table(catalog, **DV, **{"file-index.bitmap.columns": "status"})
    t.write(orders(range(0, 50), status="PAID"))
    t.write(orders(range(50, 100), status="NEW"))
    t.write(orders(range(40, 60), status="SHIPPED"))  # updates rows of both earlier writes
    flt = col("status") == "SHIPPED"
    plan = t.plan(filter=flt)
    assert plan.stats["pruned_by_stats"] + plan.stats["pruned_by_index"] > 0
    got = rows(t.read(filter=flt))
    assert [r["order_id"] for r in got] == list(range(40, 60))
    # a stale version is never resurrected by pruning the file that superseded it
    paid = rows(t.read(filter=col("status") == "PAID"))
    assert [r["order_id"] for r in paid] == list(range(40))


@pytest.mark.parametrize(
    "options",
    [
        {"merge-engine": "partial-update"},
        {"merge-engine": "aggregation", "fields.price.aggregate-function": "sum"},
        {"sequence.field": "user_id"},
    ],
    ids=["partial-update", "aggregation", "sequence-field"],
)
def test_engines_see_the_older_version_found_by_lookup(catalog, options):
    """Every engine gives the same rows with and without deletion vectors."""
    mor = pk_orders_table(catalog, **options)
    dv = catalog.create_table(
        "db.dv", ORDERS, primary_keys=["order_id", "dt"], partition_keys=["dt"],
        options={"bucket": "2", **options, **DV},
    )  # fmt: skip
    batches = [
        orders(range(200), price=1.0),  # small updates land above it: merged by lookup, not rewritten
        orders([3, 4, 5], price=2.0, status=None),
        orders([4, 11], price=5.0, status="DONE").set_column(2, "user_id", pa.array([-1, 100], pa.int32())),
    ]
    marked = 0
    for batch in batches:
        mor.write(batch)
        dv.write(batch)
        assert rows(dv.read()) == rows(mor.read())
        marked += bool(vectors(dv))
    assert marked  # older versions were deleted by vectors, not rewritten


def test_overwrite_drops_the_partitions_vectors(catalog):
    t = pk_orders_table(catalog, **DV)
    t.write(orders(range(6), dt="2024-01-01"))
    t.write(orders(range(3), dt="2024-01-01", price=9.0))
    t.write(orders(range(4), dt="2024-01-02"))
    t.write(orders(range(2), dt="2024-01-02", price=7.0))
    assert vectors(t)
    t.write(orders([0], dt="2024-01-01", price=5.0), overwrite={"dt": "2024-01-01"})
    parts = {e.partition for e in t.live_entries()}
    assert {e.partition for e in t.index_entries()} <= parts
    assert all(name in {e.file.file_name for e in t.live_entries()} for name in vectors(t))
    got = rows(t.read(), ["dt", "order_id"])
    assert [(r["dt"], r["order_id"], r["price"]) for r in got] == [
        ("2024-01-01", 0, 5.0),
        ("2024-01-02", 0, 7.0),
        ("2024-01-02", 1, 7.0),
        ("2024-01-02", 2, 1.0),
        ("2024-01-02", 3, 1.0),
    ]


def test_bitmap64_vectors(catalog):
    t = pk_orders_table(catalog, **DV, **{"deletion-vectors.bitmap64": "true"})
    t.write(orders(range(200)))
    t.write(orders([1, 2], price=4.0))
    entry = next(iter(by_bucket(t.index_entries(), DELETION_VECTORS).values()))
    data = t.io.read_bytes(t.paths.index_file(entry.index_file.file_name))
    assert int.from_bytes(data[5:9], "little") == 1681511377  # the 64-bit magic after version and size
    assert [r["price"] for r in rows(t.read())[:4]] == [1.0, 4.0, 4.0, 1.0]


def test_first_row_looks_keys_up_instead_of_compacting_everything(catalog):
    t = pk_orders_table(catalog, **{"merge-engine": "first-row", "ignore-delete": "true"})
    t.write(orders(range(200), price=1.0))
    top = {e.file.file_name for e in t.live_entries()}
    t.write(orders(range(195, 205), price=2.0))  # 195..199 exist: their new rows are dropped
    live = t.live_entries()
    assert top <= {e.file.file_name for e in live}  # the first write's files were not rewritten
    assert all(e.file.level > 0 for e in live)
    got = rows(t.read())
    assert [r["price"] for r in got] == [1.0] * 200 + [2.0] * 5
    assert sum(e.file.row_count for e in live) == 205  # no key is stored twice


def test_first_row_refuses_deletion_vectors(catalog):
    with pytest.raises(InvalidOptionError, match="first-row"):
        pk_orders_table(catalog, **DV, **{"merge-engine": "first-row"})
    assert not catalog.table_exists("db.t")
