"""Cross-partition upsert tables (primary key without every partition key, ``bucket = -1``): each
engine's rule for a key that arrives in another partition, bucket filling, the key
index surviving across writers, concurrent writers, and a brute-force model over random histories."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.bucket.hash_index import HASH_INDEX
from lakehouse.errors import (
    CommitConflictError,
    InvalidOptionError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("v", pa.int64()),
        pa.field("w", pa.int64()),
    ]
)
ENGINES = {
    "deduplicate": {},
    "deduplicate+dv": {"deletion-vectors.enabled": "true"},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    "first-row": {"merge-engine": "first-row"},
}


def batch(rows: list[tuple], kinds: list[str] | None = None) -> pa.Table:
    data = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
    return data if kinds is None else data.append_column("_row_kind", pa.array(kinds))


def table(catalog, name="t", **options):
    options = {"bucket": "-1", **{k: str(v) for k, v in options.items()}}
    return catalog.create_table(
        f"db.{name}", SCHEMA, primary_keys=["k"], partition_keys=["dt"], options=options
    )


def contents(t, **read) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.read(**read).to_pylist())


def test_deduplicate_moves_a_key_to_its_new_partition(catalog):
    t = table(catalog)
    t.write(batch([(1, "d1", 10, 1), (2, "d1", 20, 2)]))
    t.write(batch([(1, "d2", 11, None)]))
    assert contents(t) == [(1, "d2", 11, None), (2, "d1", 20, 2)]
    # several moves of one key in one write: its last row wins
    t.write(batch([(2, "d3", 21, 0), (2, "d2", 22, 0), (2, "d1", 23, 0), (1, "d1", 12, 0)]))
    assert contents(t) == [(1, "d1", 12, 0), (2, "d1", 23, 0)]
    # a delete naming another partition deletes the key where it lives
    t.write(batch([(1, "d9", None, None)], ["-D"]))
    assert contents(t) == [(2, "d1", 23, 0)]
    t.compact(full=True)
    assert contents(t) == [(2, "d1", 23, 0)]
    assert not [e for e in t.index_entries() if e.index_file.index_type == HASH_INDEX]


def test_partial_update_and_aggregation_keep_the_key_in_its_first_partition(catalog):
    partial = table(catalog, "p", **ENGINES["partial-update"])
    partial.write(batch([(1, "d1", 10, None)]))
    partial.write(batch([(1, "d2", None, 5), (1, "d3", 12, None)]))
    assert contents(partial) == [(1, "d1", 12, 5)]
    agg = table(catalog, "a", **ENGINES["aggregation"])
    agg.write(batch([(1, "d1", 10, 1), (1, "d2", 5, 2)]))
    agg.write(batch([(1, "d3", 1, 3)]))
    assert contents(agg) == [(1, "d1", 16, 3)]


def test_first_row_ignores_rows_for_other_partitions(catalog):
    t = table(catalog, **ENGINES["first-row"])
    t.write(batch([(1, "d1", 10, 1), (1, "d2", 11, 1)]))
    t.write(batch([(1, "d2", 12, 2), (1, "d1", 13, 2), (2, "d2", 20, 2)]))
    assert contents(t) == [(1, "d1", 10, 1), (2, "d2", 20, 2)]


def test_new_keys_fill_buckets_up_to_the_target_then_reuse_freed_room(catalog):
    t = table(catalog, **{"dynamic-bucket.target-row-num": 2})
    t.write(batch([(k, "d1", k, 0) for k in range(5)]))
    buckets = lambda dt: sorted(  # noqa: E731
        (e.bucket, e.file.row_count) for e in t.live_entries() if e.partition == t_partition(t, dt)
    )
    assert buckets("d1") == [(0, 2), (1, 2), (2, 1)]
    # two keys leave bucket 0 of d1; a new writer's bootstrap sees the room and fills it first
    t.write(batch([(0, "d2", 0, 0), (1, "d2", 1, 0)]))
    t.write(batch([(7, "d1", 7, 0), (8, "d1", 8, 0), (9, "d1", 9, 0)]))
    t.compact(full=True)
    assert buckets("d1") == [(0, 2), (1, 2), (2, 2)]
    assert [r[0] for r in contents(t)] == [0, 1, 2, 3, 4, 7, 8, 9]


def t_partition(t, dt: str) -> bytes:
    from lakehouse.store.partitions import row_partitions

    return row_partitions(batch([(0, dt, 0, 0)]), t.schema).partitions[0]


def test_two_writers_of_one_table_conflict_cleanly(catalog):
    t = table(catalog)
    t.write(batch([(1, "d1", 1, 1)]))
    first, second = t.new_write(), t.new_write()
    first.write(batch([(2, "d1", 2, 2)]))
    second.write(batch([(2, "d2", 3, 3)]))
    one, two = first.prepare_commit(), second.prepare_commit()
    t.new_commit().commit(one)
    before = t.latest_snapshot_id()
    committer = t.new_commit()
    with pytest.raises(CommitConflictError, match="cross-partition"):
        committer.commit(two)
    committer.abort(two)
    assert t.latest_snapshot_id() == before
    assert contents(t) == [(1, "d1", 1, 1), (2, "d1", 2, 2)]


def test_compaction_between_writes_is_no_conflict(catalog):
    t = table(catalog, **{"write-only": "true"})
    t.write(batch([(1, "d1", 1, 1)]))
    writer = t.new_write()
    writer.write(batch([(1, "d2", 2, 2)]))
    messages = writer.prepare_commit()
    t.compact(full=True)
    t.new_commit().commit(messages)
    assert contents(t) == [(1, "d2", 2, 2)]


def test_bad_cross_partition_tables_and_writes_are_refused(catalog):
    with pytest.raises(SchemaMismatchError, match="bucket"):
        table(catalog, bucket="2")
    with pytest.raises(InvalidOptionError, match="sequence.field"):
        table(catalog, **{"sequence.field": "w"})
    assert catalog.list_tables("db") == []
    t = table(catalog)
    t.write(batch([(1, "d1", 1, 1)]))
    for overwrite in ({"dt": "d1"}, "dynamic"):
        with pytest.raises(UnsupportedFeatureError, match="overwrite=True"):
            t.write(batch([(1, "d1", 2, 2)]), overwrite=overwrite)
    t.write(batch([(3, "d2", 3, 3)]), overwrite=True)
    assert contents(t) == [(3, "d2", 3, 3)]


# ---- a brute-force model ----------------------------------------------------------------------


def model(engine: str, writes: list[list[tuple]]) -> list[tuple]:
    """Each key's final row, folding rows one at a time by the engine's cross-partition rule."""
    rows: dict[int, tuple] = {}
    for write in writes:
        for k, dt, v, w, kind in write:
            old = rows.get(k)
            if engine.startswith("deduplicate"):
                if kind == "-D":
                    rows.pop(k, None)
                else:
                    rows[k] = (k, dt, v, w)
            elif old is None:
                rows[k] = (k, dt, v, w)
            elif engine == "partial-update":
                rows[k] = (k, old[1], v if v is not None else old[2], w if w is not None else old[3])
            elif engine == "aggregation":
                total = None if old[2] is None and v is None else (old[2] or 0) + (v or 0)
                rows[k] = (k, old[1], total, w if w is not None else old[3])
    return sorted(rows.values())


ROW = st.tuples(
    st.integers(0, 6),
    st.sampled_from(["d1", "d2", "d3"]),
    st.one_of(st.none(), st.integers(-5, 5)),
    st.one_of(st.none(), st.integers(-5, 5)),
)


@pytest.mark.parametrize("engine", list(ENGINES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_engines_against_a_model(engine, data, tmp_path_factory):
    from lakehouse import Catalog

    catalog = Catalog(str(tmp_path_factory.mktemp("wh")))
    catalog.create_database("db")
    small = {"dynamic-bucket.target-row-num": "2", "num-sorted-run.compaction-trigger": "2"}
    t = table(catalog, **ENGINES[engine], **small)
    kinds = st.sampled_from(["+I", "+U", "-D"]) if engine.startswith("deduplicate") else st.just("+I")
    rows = st.tuples(ROW, kinds).map(lambda r: (*r[0], r[1]))
    writes = data.draw(st.lists(st.lists(rows, min_size=1, max_size=8), min_size=1, max_size=5))
    for write in writes:
        t.write(batch([r[:4] for r in write], [r[4] for r in write]))
        if data.draw(st.booleans()):
            t.compact(full=data.draw(st.booleans()))
    assert contents(t) == model(engine, writes)


def test_a_key_moved_back_after_a_deletion_vector_compaction_stays_unique(catalog):
    """A key leaves d1 for d2 and comes back: d2's old version is deleted by a deletion vector,
    which a new writer's key index must honour (else it retracts the key from d2 again and
    places it in a second bucket of d1)."""
    small = {"dynamic-bucket.target-row-num": "2", "num-sorted-run.compaction-trigger": "2"}
    t = table(catalog, **ENGINES["deduplicate+dv"], **small)
    t.write(batch([(0, "d1", None, None)]))
    t.write(batch([(1, "d1", None, None), (0, "d2", None, 0), (1, "d1", None, 0)]))
    t.write(batch([(0, "d1", None, None)]))
    t.write(batch([(0, "d1", 7, 0)]))
    assert t.read().sort_by("k").to_pylist() == [
        {"k": 0, "dt": "d1", "v": 7, "w": 0},
        {"k": 1, "dt": "d1", "v": None, "w": 0},
    ]
