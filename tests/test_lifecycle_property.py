"""Random histories of writes, compactions, overwrites, tags, expirations and rollbacks: every
retained snapshot and tag reads exactly as when it was made, and the files on disk are exactly
those some snapshot or tag references - computed here the naive way, snapshot by snapshot."""

from __future__ import annotations

import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse import Catalog
from lakehouse.ops.orphans import candidate_files
from lakehouse.store import tags

from .conftest import ORDERS, orders, rows

PK = ["order_id", "dt"]
KINDS = {
    "append": (None, {"bucket": "2", "bucket-key": "order_id"}),
    "pk": (PK, {"bucket": "2", "num-sorted-run.compaction-trigger": "3"}),
    "pk-dv": (PK, {"bucket": "2", "deletion-vectors.enabled": "true"}),
    "pk-dynamic": (PK, {"bucket": "-1"}),
}

step = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 20), st.integers(1, 8), st.sampled_from(["d1", "d2"])),
    st.tuples(st.just("delete"), st.integers(0, 20), st.integers(1, 4)),
    st.tuples(st.just("overwrite"), st.sampled_from(["d1", "d2"])),
    st.tuples(st.just("compact"), st.booleans()),
    st.tuples(st.just("tag"), st.integers(0, 3)),
    st.tuples(st.just("untag"), st.integers(0, 3)),
    st.tuples(st.just("expire"), st.integers(1, 4), st.integers(1, 6)),
    st.tuples(st.just("rollback"), st.integers(1, 3)),
    st.tuples(st.just("rollback_tag"), st.integers(0, 3)),
)


def expected_files(t) -> set[str]:
    """Every file a snapshot or tag references, each read on its own (no shortcuts)."""
    store = t.manifests()
    out: set[str] = set()
    snaps = [(t.snapshots.snapshot(i), True) for i in t.snapshots.snapshot_ids()]
    snaps += [(tag.snapshot, False) for tag in tags.list_tags(t)]
    for snap, with_changelog in snaps:
        lists = [snap.base_manifest_list, snap.delta_manifest_list]
        if with_changelog and snap.changelog_manifest_list:
            lists.append(snap.changelog_manifest_list)
            for m in store.read_list(snap.changelog_manifest_list):
                for e in store.read_manifest(m.file_name):
                    out.update(t.paths.data_files(t.bucket_path(e.partition, e.bucket), e.file))
        for name in lists:
            out.add(t.paths.manifest(name))
            out.update(t.paths.manifest(m.file_name) for m in store.read_list(name))
        if snap.index_manifest:
            out.add(t.paths.manifest(snap.index_manifest))
            out.update(t.paths.index_file(e.index_file.file_name) for e in t.index_entries(snap))
        for e in t.live_entries(snap):
            out.update(t.paths.data_files(t.bucket_path(e.partition, e.bucket), e.file))
    return out


def check(t, seen: dict[int, list], tagged: dict[str, int]) -> None:
    for sid in t.snapshots.snapshot_ids():
        assert rows(t.read(snapshot_id=sid)) == seen[sid], f"snapshot {sid}"
    for name, sid in tagged.items():
        assert rows(t.read(tag=name)) == seen[sid], f"tag {name}"
    on_disk = {st.path for st in candidate_files(t)}
    assert on_disk == expected_files(t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(KINDS)), steps=st.lists(step, min_size=1, max_size=14))
def test_lifecycle_keeps_retained_reads_and_leaves_no_garbage(kind, steps):
    with tempfile.TemporaryDirectory() as d:
        cat = Catalog(d)
        cat.create_database("db")
        keys, options = KINDS[kind]
        t = cat.create_table("db.t", ORDERS, primary_keys=keys, partition_keys=["dt"], options=options)
        seen: dict[int, list] = {}
        tagged: dict[str, int] = {}
        price = 0.0

        def record():
            for sid in t.snapshots.snapshot_ids():
                seen.setdefault(sid, rows(t.read(snapshot_id=sid)))

        for op, *args in steps:
            price += 1
            latest = t.latest_snapshot_id()
            if op == "write":
                start, n, dt = args
                t.write(orders(range(start, start + n), dt=dt, price=price))
            elif op == "delete" and keys:
                start, n = args
                data = orders(range(start, start + n), dt="d1")
                t.write(data.append_column("_row_kind", pa.array(["-D"] * n)))
            elif op == "overwrite":
                t.write(orders(range(3), dt=args[0], price=price), overwrite={"dt": args[0]})
            elif op == "compact" and keys:
                t.compact(full=args[0])
            elif op == "tag" and latest is not None and f"t{args[0]}" not in tagged:
                t.create_tag(f"t{args[0]}")
                tagged[f"t{args[0]}"] = latest
            elif op == "untag" and f"t{args[0]}" in tagged:
                t.delete_tag(f"t{args[0]}")
                del tagged[f"t{args[0]}"]
            elif op == "expire":
                retain_min, limit = args
                t.expire_snapshots(retain_min=retain_min, older_than_ms=2**62, max_deletes=limit)
            elif op == "rollback" and latest is not None:
                earliest = t.snapshots.earliest_id()
                target = max(earliest, latest - args[0])
                t.rollback_to(snapshot_id=target)
                tagged = {k: v for k, v in tagged.items() if v <= target}
                seen = {k: v for k, v in seen.items() if k <= target}
            elif op == "rollback_tag" and f"t{args[0]}" in tagged:
                target = tagged[f"t{args[0]}"]
                t.rollback_to(tag=f"t{args[0]}")
                tagged = {k: v for k, v in tagged.items() if v <= target}
                seen = {k: v for k, v in seen.items() if k <= target}
            record()
            check(t, seen, tagged)
