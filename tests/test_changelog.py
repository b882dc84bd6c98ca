"""Changelog producers: the changelog files writers and compactions commit, read back by
``read_changes``, against a model that diffs table states (or, for ``input``, keeps the inputs)."""

from __future__ import annotations

import os
import tempfile
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog
from lakehouse.errors import InvalidOptionError, SchemaMismatchError
from lakehouse.manifest.entries import FileSource
from lakehouse.ops.orphans import candidate_files, referenced_files

KV = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())])
ADDS = ("+I", "+U")
SUM = {"fields.v.aggregate-function": "sum"}


def kv_table(catalog: Catalog, producer: str, name: str = "db.t", **options: str):
    return catalog.create_table(
        name,
        KV,
        primary_keys=["k"],
        options={"bucket": "2", "changelog-producer": producer, **options},
    )


def batch(rows: list[tuple]) -> pa.Table:
    """``(k, v)`` or ``(k, v, kind)`` rows as a table with a ``_row_kind`` column."""
    return pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
            "_row_kind": pa.array([r[2] if len(r) > 2 else "+I" for r in rows]),
        }
    )


def per_key(changes: pa.Table) -> dict[int, list[tuple]]:
    """Each key's changelog rows ``(kind, v)`` in the order they were committed."""
    out: dict[int, list[tuple]] = {}
    for k, v, kind in zip(*(changes.column(c).to_pylist() for c in ("k", "v", "_row_kind")), strict=True):
        out.setdefault(k, []).append((kind, v))
    return out


def state(t) -> dict[int, int]:
    return dict(zip(*(t.read().column(c).to_pylist() for c in ("k", "v")), strict=True))


class Model:
    """Table state and the changelog a producer must write for a history of writes and
    compactions: ``input`` repeats every input row; the compaction producers write, at each
    compaction that brings new rows up, the difference of every key written since the last one."""

    def __init__(self, producer: str, aggregate: bool = False, deduplicate: bool = False) -> None:
        self.producer, self.aggregate, self.deduplicate = producer, aggregate, deduplicate
        self.state: dict[int, int] = {}
        self.changes: dict[int, list[tuple]] = {}
        self.since: dict[int, int | None] = {}  # key -> its value at the last changelog

    def write(self, rows: list[tuple]) -> None:
        for k, v, kind in rows:
            if self.producer == "input":
                self.changes.setdefault(k, []).append((kind, v))
            self.since.setdefault(k, self.state.get(k))
            if kind not in ADDS:
                self.state.pop(k, None)
            else:
                self.state[k] = self.state.get(k, 0) + v if self.aggregate else v

    def compacted(self) -> None:
        """A compaction wrote the changelog of everything written since the last one."""
        if self.producer == "input":
            return
        for k, old in self.since.items():
            new = self.state.get(k)
            out = self.changes.setdefault(k, [])
            if old is None and new is not None:
                out.append(("+I", new))
            elif old is not None and new is None:
                out.append(("-D", old))
            elif old is not None and not (self.deduplicate and old == new):
                out += [("-U", old), ("+U", new)]
        self.since = {}
        self.changes = {k: v for k, v in self.changes.items() if v}


CONFIGS = {
    "input": ("input", {}),
    "full-compaction": ("full-compaction", {}),
    "full-compaction+dedup": ("full-compaction", {"changelog-producer.row-deduplicate": "true"}),
    "lookup": ("lookup", {}),
    "lookup+dedup": ("lookup", {"changelog-producer.row-deduplicate": "true"}),
    "lookup+dv": ("lookup", {"deletion-vectors.enabled": "true"}),
    "lookup+sum": ("lookup", {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}),
    "full-compaction+sum": (
        "full-compaction",
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    ),
    "lookup+write-only": ("lookup", {"write-only": "true"}),
}

row = st.tuples(st.integers(0, 12), st.integers(0, 3), st.sampled_from(["+I", "+U", "-U", "-D"]))
step = st.one_of(
    st.tuples(st.just("write"), st.lists(row, min_size=1, max_size=8)),
    st.tuples(st.just("compact"), st.booleans()),
)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=8))
def test_changelog_matches_the_model(config, steps):
    producer, options = CONFIGS[config]
    aggregate = options.get("merge-engine") == "aggregation"
    write_only = options.get("write-only") == "true"
    with tempfile.TemporaryDirectory() as d:
        cat = Catalog(d)
        cat.create_database("db")
        t = kv_table(cat, producer, **{"num-sorted-run.compaction-trigger": "3", **options})
        model = Model(producer, aggregate, options.get("changelog-producer.row-deduplicate") == "true")
        for op, arg in steps:
            if op == "write":
                rows = [(k, v, "+I" if aggregate else kind) for k, v, kind in arg]
                t.write(batch(rows))
                model.write(rows)
                if not write_only:
                    model.compacted()
            elif producer == "lookup" or arg:  # full-compaction changelog needs a full compaction
                t.compact(full=arg)
                model.compacted()
            assert state(t) == model.state
        changes = t.read_changes(0) if t.latest_snapshot_id() is not None else batch([])
        assert per_key(changes) == model.changes


def test_input_changelog_files_are_the_inputs_as_paimon_records_them(catalog):
    t = kv_table(catalog, "input")
    t.write(batch([(1, 10), (2, 20), (1, 11, "+U")]))
    t.write(batch([(2, 20, "-U"), (2, 21, "+U"), (3, 30, "-D")]))
    snap = t.snapshots.latest()
    assert snap.commit_kind == "APPEND" and snap.changelog_record_count == 3
    store = t.manifests()
    entries = [
        e for m in store.read_list(snap.changelog_manifest_list) for e in store.read_manifest(m.file_name)
    ]
    assert {e.kind for e in entries} == {0} and sum(e.file.row_count for e in entries) == 3
    for e in entries:
        assert e.file.file_name.startswith("changelog-") and e.file.file_name.endswith(".parquet")
        assert e.file.level == 0 and e.file.file_source == FileSource.APPEND
    assert sum(e.file.delete_row_count for e in entries) == 2  # -U and -D
    assert per_key(t.read_changes(1)) == {2: [("-U", 20), ("+U", 21)], 3: [("-D", 30)]}
    assert per_key(t.read_changes(0, 1)) == {1: [("+I", 10), ("+U", 11)], 2: [("+I", 20)]}
    assert state(t) == {1: 11, 2: 21}


def test_compaction_producers_commit_changelog_with_the_compact_snapshot(catalog):
    for producer in ("full-compaction", "lookup"):
        t = kv_table(catalog, producer, name=f"db.{producer.replace('-', '_')}")
        t.write(batch([(1, 10), (2, 20)]))
        kinds = [t.snapshots.snapshot(i).commit_kind for i in t.snapshots.snapshot_ids()]
        assert kinds == ["APPEND", "COMPACT"]
        append, compact = (t.snapshots.snapshot(i) for i in t.snapshots.snapshot_ids())
        assert append.changelog_manifest_list is None and compact.changelog_record_count == 2
        assert per_key(t.read_changes(0, 1)) == {}  # the append has no changelog
        assert per_key(t.read_changes(1, 2)) == {1: [("+I", 10)], 2: [("+I", 20)]}


def test_full_compaction_every_n_commits_diffs_the_top_levels(catalog):
    t = kv_table(catalog, "full-compaction", **{"full-compaction.delta-commits": "2"})
    t.write(batch([(1, 10), (2, 20)]))
    t.write(batch([(1, 11)]))  # second commit: full compaction
    assert per_key(t.read_changes(0)) == {1: [("+I", 11)], 2: [("+I", 20)]}
    t.write(batch([(2, 20, "-D")]))
    t.write(batch([(1, 11), (3, 30)]))
    assert per_key(t.read_changes(3)) == {1: [("-U", 11), ("+U", 11)], 2: [("-D", 20)], 3: [("+I", 30)]}


def test_row_deduplicate_ignores_the_named_fields(catalog):
    schema = KV.append(pa.field("ts", pa.int64()))
    t = catalog.create_table(
        "db.t",
        schema,
        primary_keys=["k"],
        options={
            "bucket": "1",
            "changelog-producer": "lookup",
            "changelog-producer.row-deduplicate": "true",
            "changelog-producer.row-deduplicate-ignore-fields": "ts",
        },
    )
    t.write(pa.table({"k": [1, 2], "v": [10, 20], "ts": [1, 1]}, schema=schema))
    t.write(pa.table({"k": [1, 2], "v": [10, 21], "ts": [2, 2]}, schema=schema))
    assert per_key(t.read_changes(2)) == {2: [("-U", 20), ("+U", 21)]}


def test_lookup_aggregation_merges_each_version_once(catalog):
    """Without deletion vectors older versions stay in higher levels; a lookup table merges only a
    key's newest version above level 0, which already holds them (Paimon's LookupMergeFunction)."""
    t = kv_table(
        catalog,
        "lookup",
        **{"merge-engine": "aggregation", "fields.v.aggregate-function": "sum", "bucket": "1"},
    )
    t.write(batch([(k, 1) for k in range(5000)]))
    for _ in range(4):
        t.write(batch([(0, 1), (1, 1)]))
        # the new versions go below the big top-level file, which keeps the first one
        assert sorted({e.file.level for e in t.live_entries()}) == [4, 5]
    assert state(t)[0] == 5 and state(t)[1] == 5 and state(t)[2] == 1
    assert per_key(t.read_changes(0))[0] == [("+I", 1)] + [
        x for n in range(1, 5) for x in (("-U", n), ("+U", n + 1))
    ]
    t.compact(full=True)
    assert state(t)[0] == 5


def test_first_row_lookup_changelog_shows_only_new_keys(catalog):
    t = kv_table(catalog, "lookup", **{"merge-engine": "first-row"})
    t.write(batch([(1, 10), (2, 20)]))
    t.write(batch([(1, 11), (3, 30)]))
    assert per_key(t.read_changes(0)) == {1: [("+I", 10)], 2: [("+I", 20)], 3: [("+I", 30)]}
    assert state(t) == {1: 10, 2: 20, 3: 30}


def test_overwrite_commits_no_changelog(catalog):
    def changelog_files() -> set[str]:
        return {f.path for f in candidate_files(t) if "/changelog-" in f.path}

    t = kv_table(catalog, "input")
    t.write(batch([(1, 10)]))
    before = changelog_files()
    t.write(batch([(2, 20)]), overwrite=True)
    writer = t.new_write()  # a writer that did not know: the committer drops its changelog
    writer.write(batch([(3, 30)]))
    messages = writer.prepare_commit()
    assert any(m.changelog_files for m in messages)
    t.new_commit().commit(messages, overwrite=True)
    assert [t.snapshots.snapshot(i).changelog_manifest_list is None for i in (2, 3)] == [True, True]
    assert changelog_files() == before
    assert per_key(t.read_changes(1)) == {}
    assert state(t) == {3: 30}


def test_failed_writes_leave_no_changelog_files(catalog):
    t = kv_table(catalog, "input")
    writer = t.new_write()
    writer.write(batch([(1, 10), (2, 20)]))
    messages = writer.prepare_commit()
    assert any(m.changelog_files for m in messages)
    t.new_commit().abort(messages)
    assert not [f for f in candidate_files(t) if "changelog-" in f.path]


def test_unusable_producer_options_are_refused(catalog):
    with pytest.raises(InvalidOptionError, match="primary key"):
        catalog.create_table("db.a", KV, options={"changelog-producer": "input"})
    with pytest.raises(InvalidOptionError, match="unknown changelog-producer"):
        kv_table(catalog, "sometimes")
    with pytest.raises(InvalidOptionError, match="first-row"):
        kv_table(catalog, "input", **{"merge-engine": "first-row"})
    with pytest.raises(InvalidOptionError, match="full-compaction.delta-commits"):
        kv_table(catalog, "lookup", **{"full-compaction.delta-commits": "2"})
    with pytest.raises(InvalidOptionError, match="unknown columns"):
        kv_table(
            catalog,
            "lookup",
            **{
                "changelog-producer.row-deduplicate": "true",
                "changelog-producer.row-deduplicate-ignore-fields": "nope",
            },
        )
    t = kv_table(catalog, "input")
    with pytest.raises(SchemaMismatchError):
        t.write(pa.table({"k": [1], "v": ["x"]}))
    assert not list(candidate_files(t))


# ---- lifecycle of changelog files ----------------------------------------------------------------

FUTURE = 2**62  # an older_than_ms every snapshot is older than


def changelog_on_disk(t) -> set[str]:
    return {f.path for f in candidate_files(t) if "/changelog-" in f.path}


def changelog_of(t, snap) -> set[str]:
    """Paths of the changelog files ``snap`` committed."""
    if not snap.changelog_manifest_list:
        return set()
    store = t.manifests()
    return {
        p
        for m in store.read_list(snap.changelog_manifest_list)
        for e in store.read_manifest(m.file_name)
        for p in t.paths.data_files(t.bucket_path(e.partition, e.bucket), e.file)
    }


def test_changelog_files_expire_with_their_snapshots(catalog):
    t = kv_table(catalog, "input")
    for i in range(5):
        t.write(batch([(i, i), (9, i)]))
    ids = t.snapshots.snapshot_ids()
    expired = set().union(*(changelog_of(t, t.snapshots.snapshot(i)) for i in ids[:-3]))
    kept = set().union(*(changelog_of(t, t.snapshots.snapshot(i)) for i in ids[-3:]))
    result = t.expire_snapshots(retain_min=3, older_than_ms=FUTURE)
    assert result.deleted.changelog_files == len(expired) > 0
    assert changelog_on_disk(t) == kept and not kept & expired
    assert {f.path for f in candidate_files(t)} == referenced_files(t).all()
    assert per_key(t.read_changes(ids[-3])) == {4: [("+I", 4)], 9: [("+I", 4)]}


def test_tags_keep_data_files_but_not_changelog(catalog):
    t = kv_table(catalog, "lookup")
    t.write(batch([(1, 10), (2, 20)]))
    tagged = t.create_tag("first").snapshot
    assert changelog_of(t, tagged)  # the compaction's changelog
    t.write(batch([(1, 11)]))
    t.write(batch([(2, 21)]))
    t.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert changelog_on_disk(t) == changelog_of(t, t.snapshots.latest())
    assert state(t) == {1: 11, 2: 21}
    assert dict(zip(*(t.read(tag="first").column(c).to_pylist() for c in ("k", "v")), strict=True)) == {
        1: 10,
        2: 20,
    }
    assert {f.path for f in candidate_files(t)} == referenced_files(t).all()
    t.delete_tag("first")
    assert {f.path for f in candidate_files(t)} == referenced_files(t).all()


def test_rollback_and_orphan_cleanup_treat_changelog_files_as_files(catalog):
    t = kv_table(catalog, "full-compaction")
    t.write(batch([(1, 10)]))
    t.write(batch([(1, 11)]))
    t.write(batch([(1, 12)]))
    later = changelog_of(t, t.snapshots.snapshot(4)) | changelog_of(t, t.snapshots.snapshot(6))
    t.rollback_to(snapshot_id=2)
    assert not later & changelog_on_disk(t)
    assert changelog_on_disk(t) == changelog_of(t, t.snapshots.snapshot(2))
    assert per_key(t.read_changes(0)) == {1: [("+I", 10)]}
    stray = f"{t.paths.root}/bucket-0/changelog-stray-0.parquet"
    t.io.write_bytes(stray, b"x")
    hour_ago = time.time() - 3600
    os.utime(stray, (hour_ago, hour_ago))
    assert t.remove_orphan_files(older_than_ms=int(hour_ago * 1000) + 1000).paths == (stray,)
    assert changelog_on_disk(t) == changelog_of(t, t.snapshots.snapshot(2))


def test_row_system_tables_read_the_table_not_its_changelog(catalog):
    for producer, options in (("input", {}), ("lookup", {"merge-engine": "aggregation", **SUM})):
        t = kv_table(catalog, producer, name=f"db.{producer}", **options)
        t.write(batch([(k, 1) for k in range(2000)]))
        t.write(batch([(1, 1), (2, 1, "+U")]))
        t.write(batch([(1, 1)]))
        audit = catalog.get_table(f"db.{producer}$audit_log").read()
        assert audit.num_rows == 2000
        got = dict(zip(*(audit.column(c).to_pylist() for c in ("k", "v")), strict=True))
        assert got == state(t) and got[1] == (3 if producer == "lookup" else 1)
        binlog = catalog.get_table(f"db.{producer}$binlog").read()
        assert binlog.num_rows == 2000
