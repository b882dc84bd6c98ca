"""Concurrent committers: writer processes and full compactions racing on one table.

Each writer commits batches of its own rows (append tables: new ids; primary-key tables: its own
keys, each batch updating some of them) and reports the snapshot each ``write`` returned. Every
write must land exactly once - one APPEND snapshot, found by its commit user - and every
snapshot must read exactly the batches of the APPEND snapshots up to it: the model of a race is
the batches in the order they landed. A compaction either commits or fails with
``CommitConflictError``; either way nothing it wrote may stay behind.
"""

from __future__ import annotations

import os
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lakehouse import Catalog
from lakehouse.errors import CommitConflictError
from lakehouse.snapshot import CommitKind

from .checks import Reads, pypaimon_disagreements, show, unreferenced, verification_problems
from .history import KINDS, Row, State, arrow, partition_of
from .killrun import TABLE, processes, progress, read_progress, start

KEYS_PER_WRITER = 20
# Writers committing back to back lose up to about 8 races for a snapshot in a row; Paimon's
# default of 10 retries is made for occasional conflicts, so these tables allow more, as the
# engine's error advises (a commit that runs out of retries fails cleanly: nothing to check here)
RETRIES = {"commit.max-retries": "100"}


@dataclass
class Race:
    """What a race did, and every anomaly found."""

    commits: int = 0  # writes that returned a snapshot
    compactions: Counter = field(default_factory=Counter)  # committed / conflict / nothing to do
    anomalies: list[str] = field(default_factory=list)
    seconds: float = 0.0


def batch(writer: int, commit: int, keyed: bool) -> list[Row]:
    """The rows commit ``commit`` of ``writer`` writes."""
    if keyed:
        ids = sorted({writer * 1000 + (commit * 3 + j) % KEYS_PER_WRITER for j in range(5)})
    else:
        ids = [(writer * 1000 + commit) * 10 + j for j in range(3)]
    return [(i, partition_of(i), commit, f"w{writer}") for i in ids]


def writer(warehouse: str, writer_id: int, commits: int, keyed: bool, gate, log: str) -> None:
    """A child committing ``commits`` batches; reports ``commit <n> <snapshot id>``."""
    say = progress(log)
    try:
        table = Catalog(warehouse).get_table(TABLE)
        gate.wait()
        for n in range(commits):
            say(f"commit {n} {table.write(arrow(batch(writer_id, n, keyed)))}")
    except BaseException:
        say(f"error {traceback.format_exc()}")
        os._exit(1)
    os._exit(0)


def compactor(warehouse: str, rounds: int, gate, writers_done, log: str) -> None:
    """A child running ``rounds`` full compactions, each once the table changed since the last
    (or the writers are done); reports each outcome."""
    say = progress(log)
    try:
        table = Catalog(warehouse).get_table(TABLE)
        gate.wait()
        seen = None
        for _ in range(rounds):
            while table.latest_snapshot_id() == seen and not writers_done.is_set():
                time.sleep(0.002)  # pacing, not synchronisation: the outcome is checked either way
            seen = table.latest_snapshot_id()
            try:
                snapshot_id = table.compact(full=True).snapshot_id
                say("compaction committed" if snapshot_id is not None else "compaction nothing")
            except CommitConflictError:
                say("compaction conflict")
    except BaseException:
        say(f"error {traceback.format_exc()}")
        os._exit(1)
    os._exit(0)


def race(kind: str, writers: int, commits: int, compactors: int, rounds: int, workdir: str) -> Race:
    """``writers`` processes committing ``commits`` batches each and ``compactors`` processes
    running ``rounds`` full compactions each, all at once on one new table of ``kind``."""
    keyed = KINDS[kind].keyed
    warehouse = os.path.join(workdir, f"race-{kind}-{writers}x{commits}-{compactors}x{rounds}")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    table = KINDS[kind].create(catalog, TABLE, RETRIES)
    gate, writers_done = processes().Barrier(writers + compactors), processes().Event()
    logs = [
        os.path.join(workdir, f"{os.path.basename(warehouse)}-{i}.log") for i in range(writers + compactors)
    ]
    began = time.monotonic()
    writing = [start(writer, warehouse, w, commits, keyed, gate, logs[w]) for w in range(writers)]
    compacting = [
        start(compactor, warehouse, rounds, gate, writers_done, logs[writers + c]) for c in range(compactors)
    ]
    for process in writing:
        process.join()
    writers_done.set()
    for process in compacting:
        process.join()
    result = Race(seconds=time.monotonic() - began)
    landed: dict[int, tuple[int, int]] = {}  # snapshot id -> (writer, commit)
    for number, log in enumerate(logs):
        for word, rest in read_progress(log):
            if word == "error":
                result.anomalies.append(f"process {number} failed: {rest}")
            elif word == "compaction":
                result.compactions[rest] += 1
            elif word == "commit":
                n, snapshot_id = rest.split()
                if int(snapshot_id) in landed:
                    result.anomalies.append(f"two writes returned snapshot {snapshot_id}")
                landed[int(snapshot_id)] = (number, int(n))
    result.commits = len(landed)
    if result.commits != writers * commits:
        result.anomalies.append(f"{result.commits} of {writers * commits} writes returned a snapshot")
    if sum(result.compactions.values()) != compactors * rounds:
        result.anomalies.append(
            f"{sum(result.compactions.values())} of {compactors * rounds} compactions ended"
        )
    result.anomalies += _problems(table.refresh(), warehouse, landed, keyed)
    return result


def _problems(table, warehouse: str, landed: dict[int, tuple[int, int]], keyed: bool) -> list[str]:
    """Every snapshot reads the batches whose writes committed in it or earlier, each once; each
    write made one APPEND snapshot (a write returns its last snapshot: its compaction's, if any);
    the table verifies, pypaimon agrees and no file is left over."""
    reads = Reads.of(table)
    snapshots = {sid: table.snapshots.snapshot(sid) for sid in reads.snapshots}
    appends = {s.commit_user: sid for sid, s in snapshots.items() if s.commit_kind == CommitKind.APPEND}
    writes = {appends.get(snapshots[sid].commit_user): write for sid, write in landed.items()}
    problems = []
    if writes.keys() != set(appends.values()):
        problems.append(f"APPEND snapshots {sorted(appends.values())}, of writes {sorted(writes, key=str)}")
    state: dict[Any, Row] = {}
    for sid, read in reads.snapshots.items():
        if sid in writes:
            state.update((_key(r, keyed), r) for r in batch(*writes[sid], keyed))
        expected: State = tuple(sorted(state.values()))
        if read != expected:
            problems.append(f"snapshot {sid} reads {show(read)}, expected {show(expected)}")
    problems += pypaimon_disagreements(warehouse, TABLE, Reads({max(reads.snapshots): reads.latest}, {}))
    problems += verification_problems(table)
    left = sorted(unreferenced(table))
    if left:
        problems.append(f"files nothing references are left behind: {left}")
    return problems


def _key(row: Row, keyed: bool) -> Any:
    return (row[0], row[1]) if keyed else row
