"""What a table must satisfy after a crash: every listed snapshot and tag reads a state of the
model (ours and pypaimon's reads agree), the table's own verifications pass, and orphan cleanup
removes exactly the files nothing references."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

from lakehouse.iceberg.metadata import orphan_metadata_files
from lakehouse.ops.orphans import referenced_files
from lakehouse.table.table import Table

from ..interop import oracle
from .history import State, canonical

DAY_S = 86_400
# what verify_file_indexes says of files an index rewrite killed after its schema change did not
# reach yet: true of the table until the retried rewrite finishes, so allowed right after the kill
NOT_YET_REWRITTEN = re.compile(r"has no \S+ index$|index is (in its own file|embedded in the manifest)")
# table metadata that is not referenced by snapshots but is the table
_METADATA = re.compile(r"(schema/schema-\d+|snapshot/(snapshot-\d+|EARLIEST|LATEST)|tag/tag-[^/]+)$")


@dataclass(frozen=True)
class Reads:
    """What every listed snapshot and every tag of a table reads."""

    snapshots: dict[int, State]
    tags: dict[str, State]

    @classmethod
    def of(cls, table: Table) -> Reads:
        snapshots = {sid: canonical(table.read(snapshot_id=sid)) for sid in table.snapshots.snapshot_ids()}
        return cls(snapshots, {name: canonical(table.read(tag=name)) for name in table.tags()})

    @property
    def latest(self) -> State:
        return self.snapshots[max(self.snapshots)] if self.snapshots else ()


def history_problems(
    table: Table, reads: Reads, expected: list[State], lo: int, hi: int, tagged: dict[str, int]
) -> list[str]:
    """Listed snapshots, in order, read states of the model after prefixes of the history, in
    order; the latest the prefix of the operations that returned (``expected[lo]``) or also of the
    one killed (``expected[hi]``); tag ``name`` the state ``expected[tagged[name]]``."""
    problems = []
    position = 0
    for sid, state in reads.snapshots.items():
        matches = [k for k in range(position, hi + 1) if expected[k] == state]
        if not matches:
            problems.append(f"snapshot {sid} reads {show(state)}: no state of operations {position}..{hi}")
            continue
        position = matches[0]
    latest = table.latest_snapshot_id()
    if reads.snapshots and latest != max(reads.snapshots):
        problems.append(f"latest snapshot is {latest}, the newest listed is {max(reads.snapshots)}")
    if reads.latest not in (expected[lo], expected[hi]):
        problems.append(
            f"the latest snapshot reads {show(reads.latest)}, not the state after {lo} or {hi} ops"
        )
    for name, state in reads.tags.items():
        if state != expected[tagged[name]]:
            problems.append(f"tag {name} reads {show(state)}, not the state it pinned")
    return problems


def pypaimon_disagreements(warehouse: str, identifier: str, reads: Reads) -> list[str]:
    """Where pypaimon reads a listed snapshot or a tag otherwise than we do."""
    theirs = oracle.catalog(warehouse).get_table(identifier)
    scans = [("snapshot", sid, {"scan.snapshot-id": str(sid)}, ours) for sid, ours in reads.snapshots.items()]
    scans += [("tag", name, {"scan.tag-name": name}, ours) for name, ours in reads.tags.items()]
    problems = []
    for what, which, options, ours in scans:
        builder = theirs.copy(options).new_read_builder()
        got = canonical(builder.new_read().to_arrow(builder.new_scan().plan().splits()))
        if got != ours:
            problems.append(f"pypaimon reads {what} {which} as {show(got)}, we read {show(ours)}")
    return problems


def verification_problems(table: Table, index_rewrite_killed: bool = False) -> list[str]:
    """The problems the table's verifications of its latest snapshot report."""
    problems = []
    for verify in (table.verify_file_indexes, table.verify_primary_key, table.verify_deletion_vectors,
                   table.verify_buckets):  # fmt: skip
        allowed = index_rewrite_killed and verify == table.verify_file_indexes
        problems += [
            f"{verify.__name__}: {p}"
            for p in verify().problems
            if not (allowed and NOT_YET_REWRITTEN.search(p))
        ]
    return problems


@dataclass(frozen=True)
class Cleanup:
    """What orphan cleanup after a crash removed, and what is wrong after it."""

    removed: int
    removed_bytes: int
    left: tuple[str, ...]
    problems: tuple[str, ...]


def remove_orphans(table: Table, reads: Reads) -> Cleanup:
    """Age the table's files by two days and remove its orphan files; then nothing referenced may
    be gone (every snapshot and tag reads as ``reads``) and nothing unreferenced may be left."""
    past = time.time() - 2 * DAY_S
    for directory, _, names in os.walk(table.paths.root):
        for name in names:
            os.utime(os.path.join(directory, name), (past, past))
    found = table.remove_orphan_files()
    left = tuple(sorted(unreferenced(table)))
    problems = []
    if Reads.of(table) != reads:
        problems.append(f"remove_orphan_files deleted referenced files (it removed {list(found.paths)})")
    if left:
        problems.append(f"remove_orphan_files left unreferenced files {list(left)}")
    return Cleanup(found.files, found.bytes, left, tuple(problems))


def unreferenced(table: Table) -> set[str]:
    """Files under the table that no snapshot or tag references and that are not the table's
    metadata (schema, snapshot, hint and tag files, Iceberg metadata its versions name)."""
    root = table.paths.root
    present = {os.path.join(d, n) for d, _, names in os.walk(root) for n in names}
    iceberg = os.path.join(root, "metadata")
    dead = {st.path for st in orphan_metadata_files(table.store)}
    return {
        p
        for p in present - referenced_files(table).all()
        if not _METADATA.search(os.path.relpath(p, root)) and (os.path.dirname(p) != iceberg or p in dead)
    }


def iceberg_problems(table: Table, reads: Reads, killed: bool) -> list[str]:
    """What is wrong with the table's Iceberg metadata (if it has some): the version its hint
    names must read, in pyiceberg, every snapshot of its history as we read it (every file it
    names exists; a snapshot an interrupted expiration removed must still read); after an
    operation that returned, the current one is the latest snapshot."""
    if not table.schema.core_options.iceberg.enabled:
        return []
    from pyiceberg.table import StaticTable

    latest = table.latest_snapshot_id()
    location = table.iceberg_metadata_location()
    if location is None:
        return [] if latest is None or killed else [f"no Iceberg metadata names the latest snapshot {latest}"]
    iceberg = StaticTable.from_metadata(location)
    described = iceberg.metadata.current_snapshot_id
    problems = []
    if described != latest and not killed:
        problems.append(f"the Iceberg metadata describes snapshot {described}, the latest is {latest}")
    if described not in reads.snapshots:
        problems.append(f"the Iceberg metadata describes snapshot {described}, which is not listed")
    for snapshot in iceberg.metadata.snapshots:
        sid = snapshot.snapshot_id
        try:
            rows = canonical(iceberg.scan(snapshot_id=sid).to_arrow())
        except Exception as e:  # noqa: BLE001 - a missing file or anything else a reader meets
            problems.append(f"pyiceberg cannot read snapshot {sid}: {type(e).__name__}: {e}")
            continue
        if sid in reads.snapshots and rows != reads.snapshots[sid]:
            problems.append(
                f"pyiceberg reads {show(rows)} at snapshot {sid}, we read {show(reads.snapshots[sid])}"
            )
    return problems


def show(state: State) -> str:
    return f"{len(state)} rows (ops {sorted({r[2] for r in state})})"
