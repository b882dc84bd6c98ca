"""Kill -9 runs: a child process performs a history of operations on a table and dies at a chosen
crash point; the parent checks the table against the model and cleans up after the child.

A child runs operations ``start..target-1`` of the history, then operation ``target`` with a
:class:`~.crashpoints.KillSwitch` armed at crash point N: it first rehearses the operation on a
copy of the warehouse to count its crash points, then draws N from those of the wanted phase
(``write`` or ``commit`` for data operations) with a seeded RNG. Children are forked from a
server that has the engine imported (``forkserver``), so a kill costs milliseconds, not an
interpreter start. The child reports through an append-only progress file, which survives the
kill: ``start``/``done`` per operation, ``phase commit`` when a write starts committing, ``kill``
with the fatal operation, ``error`` with a traceback.

After each kill the parent checks the table (:mod:`.checks`): every listed snapshot and tag
against the model, ours and pypaimon's reads, the table's verifications, then orphan cleanup.
The next child retries the killed operation unless its commit landed. For points inside CPU
work, :func:`timer_series` has the parent kill children at random moments instead.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from lakehouse import Catalog
from lakehouse.commit.table_commit import TableCommit
from lakehouse.table.table import Table

from .checks import (
    Reads,
    history_problems,
    iceberg_problems,
    pypaimon_disagreements,
    remove_orphans,
    verification_problems,
)
from .crashpoints import KillSwitch, install
from .history import DATA, KINDS, Op, plan_ops, states

TABLE = "db.t"
KILLED = -signal.SIGKILL
# the operations kill runs target, and the phase of their crash points a target asks for
PHASES = {"write": "write", "commit": "commit", "compact": "", "index": "", "expire": ""}


@dataclass(frozen=True)
class Run:
    """One child: operations ``start..`` of ``ops`` on ``db.t`` in ``warehouse``, killed in
    operation ``target`` at a crash point of ``phase`` ("" any), or without a target run to the end."""

    warehouse: str
    ops: tuple[Op, ...]
    start: int
    target: int | None
    phase: str
    seed: int
    log: str


@dataclass(frozen=True)
class Outcome:
    """What a child reported: operations done, and where it died (if it did)."""

    done: int  # the operations before this index have returned
    killed: str | None  # "<category> <fs operation> <file>", "<category> timer" for the parent's kill
    error: str | None


@dataclass
class Report:
    """Counts of a series of kill runs, and every anomaly found."""

    kills: Counter = field(default_factory=Counter)  # by operation category
    survived: int = 0  # armed children whose target operation finished before its crash point
    anomalies: list[str] = field(default_factory=list)
    orphans_found: int = 0
    orphans_removed: int = 0
    orphan_bytes: int = 0

    def add(self, other: Report) -> None:
        self.kills.update(other.kills)
        self.survived += other.survived
        self.anomalies += other.anomalies
        self.orphans_found += other.orphans_found
        self.orphans_removed += other.orphans_removed
        self.orphan_bytes += other.orphan_bytes


# ---- the child ------------------------------------------------------------------------------


def child(run: Run) -> None:
    """Entry point of a child process (see the module docstring)."""
    say = progress(run.log)
    switch = KillSwitch(on_kill=lambda what: say(f"kill {what}"))
    install(switch)
    _label_commits(switch, say)
    try:
        table = Catalog(run.warehouse).get_table(TABLE)
        end = len(run.ops) if run.target is None else run.target
        for op in run.ops[run.start : end]:
            _perform(op, table, switch, say)
        if run.target is not None:
            op = run.ops[run.target]
            switch.reset(_crash_point(_rehearse(run.warehouse, op, switch), run))
            _perform(op, table, switch, say)
    except BaseException:
        say(f"error {traceback.format_exc()}")
        os._exit(1)
    os._exit(0)


def progress(path: str) -> Callable[[str], None]:
    """A writer of one-line reports to ``path``, unbuffered: what a child said survives its kill.
    :func:`read_progress` reads them back."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    return lambda line: os.write(fd, (line.replace("\n", "\\n") + "\n").encode())


def read_progress(path: str) -> list[tuple[str, str]]:
    """The (word, rest) of each report a child wrote to ``path``."""
    lines = Path(path).read_text().splitlines() if os.path.exists(path) else []
    return [(word, rest.replace("\\n", "\n")) for word, _, rest in (line.partition(" ") for line in lines)]


def _crash_point(phases: list[str], run: Run) -> int | None:
    """A crash point of the wanted phase (of any phase if none is), drawn with the run's seed."""
    points = [n for n, phase in enumerate(phases, 1) if phase == run.phase]
    points = points or list(range(1, len(phases) + 1))
    return random.Random(f"{run.seed}-{run.target}").choice(points) if points else None


def _perform(op: Op, table: Table, switch: KillSwitch, say) -> None:
    switch.phase = op.category
    say(f"start {op.number} {op.category}")
    op.run(table)
    say(f"done {op.number}")


def _label_commits(switch: KillSwitch, say) -> None:
    """Crash points inside a data operation's commit count as the committer's."""
    commit = TableCommit.commit

    def labelled(self, *args, **kwargs):
        if switch.phase == "write":
            switch.phase = "commit"
            say("phase commit")
        return commit(self, *args, **kwargs)

    TableCommit.commit = labelled


def _rehearse(warehouse: str, op: Op, switch: KillSwitch) -> list[str]:
    """The phases of ``op``'s crash points, counted on a copy of the warehouse."""
    scratch = tempfile.mkdtemp(prefix="rehearsal-")
    try:
        copy = os.path.join(scratch, "warehouse")
        shutil.copytree(warehouse, copy)
        switch.reset()
        switch.phase = op.category
        op.run(Catalog(copy).get_table(TABLE))
        return list(switch.phases)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ---- the parent -----------------------------------------------------------------------------

_context = None


def processes():
    """Children fork from a server that has this module (and so the engine) imported."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload([__name__])
    return _context


def start(target, *args) -> multiprocessing.Process:
    """A child process running ``target(*args)``, forked from the server."""
    process = processes().Process(target=target, args=args, daemon=True)
    process.start()
    return process


def outcome(run: Run, exitcode: int | None) -> Outcome:
    """Parse a finished child's progress file."""
    done, killed, error = run.start, None, None
    category = run.ops[run.start].category if run.start < len(run.ops) else ""
    for word, rest in read_progress(run.log):
        if word == "done":
            done = int(rest) + 1
        elif word == "start":
            category = rest.split()[1]
        elif word == "phase":
            category = rest
        elif word == "kill":
            killed = rest
        elif word == "error":
            error = rest
    if exitcode == KILLED and killed is None:
        killed = f"{category} timer"
    elif exitcode not in (0, KILLED) and error is None:
        error = f"child exited with {exitcode}"
    return Outcome(done, killed, error)


def kill_targets(
    ops: list[Op], kills: int, rng: random.Random, only: Collection[str] = tuple(PHASES)
) -> dict[int, str]:
    """``kills`` operations to kill and the phase to kill each in, taken in turn from each kind of
    operation the history has: a data operation's writer and its committer, compaction, index
    rewrite, expiration (``only``: those kinds)."""
    pools: dict[str, list[int]] = {}
    for op in ops:
        for category in ("write", "commit") if op.action in DATA else (op.category,):
            if category in PHASES and category in only:
                pools.setdefault(category, []).append(op.number)
    for pool in pools.values():
        rng.shuffle(pool)
    order = sorted(pools)
    rng.shuffle(order)  # which kinds a short series gets
    chosen: dict[int, str] = {}
    while len(chosen) < kills and any(pools.values()):
        for category in order:
            pool = pools[category]
            while pool and pool[-1] in chosen:
                pool.pop()
            if pool and len(chosen) < kills:
                chosen[pool.pop()] = PHASES[category]
    return chosen


class Series:
    """A table of one kind through one seeded history, run by children; each child's table is
    checked (problems become the report's anomalies and stop the series)."""

    def __init__(self, kind: str, ops_count: int, seed: int, workdir: str) -> None:
        self.kind = KINDS[kind]
        self.seed = seed
        self.ops = tuple(plan_ops(self.kind, ops_count, seed))
        self.expected = states(self.kind, list(self.ops))
        self.tagged = {op.arg: op.number for op in self.ops if op.action == "tag"}
        self.warehouse = os.path.join(workdir, f"{kind}-{seed}")
        catalog = Catalog(self.warehouse)
        catalog.create_database("db")
        self.kind.create(catalog, TABLE)
        self.report = Report()
        self.position = 0  # the next operation to run
        self.stopped = False
        self._children = 0

    def run(self, target: int | None = None, phase: str = "", timer_s: float | None = None) -> Outcome:
        """One child from the current position: killed in operation ``target`` at a crash point of
        ``phase``, or by the parent after ``timer_s``, or running to the end; then checked."""
        self._children += 1
        log = f"{self.warehouse}-{self._children}.log"
        run = Run(self.warehouse, self.ops, self.position, target, phase, self.seed, log)
        process = start(child, run)
        process.join(timer_s)
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
            process.join()
        result = outcome(run, process.exitcode)
        if target is not None and result.killed is None and result.error is None:
            self.report.survived += 1
        self._settle(result)
        return result

    def finish(self) -> Report:
        """Run the rest of the history without a kill; the table must then be exactly right."""
        if not self.stopped:
            self.run()
        return self.report

    def _settle(self, result: Outcome) -> None:
        label = f"{self.kind.name} seed {self.seed}"
        if result.error is not None:
            self._stop([f"{label}: operation {result.done} failed: {result.error}"])
            return
        killed = self.ops[result.done] if result.killed is not None else None
        hi = result.done + (1 if killed is not None else 0)
        if killed is not None:
            self.report.kills[result.killed.split()[0]] += 1
            label += f", killed in operation {result.done} ({result.killed})"
        table = Catalog(self.warehouse).get_table(TABLE)
        try:
            reads = Reads.of(table)
        except Exception as e:  # noqa: BLE001 - any failure to read is what the check reports
            self._stop([f"{label}: the table does not read: {type(e).__name__}: {e}"])
            return
        problems = history_problems(table, reads, self.expected, result.done, hi, self.tagged)
        if self.kind.pypaimon_reads:
            problems += pypaimon_disagreements(self.warehouse, TABLE, reads)
        problems += verification_problems(table, killed is not None and killed.action == "index")
        problems += iceberg_problems(table, reads, killed is not None)
        if not problems:
            cleanup = remove_orphans(table, reads)
            self.report.orphans_found += cleanup.removed + len(cleanup.left)
            self.report.orphans_removed += cleanup.removed
            self.report.orphan_bytes += cleanup.removed_bytes
            problems = list(cleanup.problems)
        if problems:
            self._stop([f"{label}: {p}" for p in problems])
            return
        landed = killed is not None and killed.action in DATA and reads.latest == self.expected[hi]
        self.position = hi if landed or killed is None else result.done

    def _stop(self, anomalies: list[str]) -> None:
        self.report.anomalies += anomalies
        self.stopped = True


def kill_series(
    kind: str, kills: int, ops_count: int, seed: int, workdir: str, only: Collection[str] = tuple(PHASES)
) -> Report:
    """A table of ``kind`` through a history of ``ops_count`` operations with ``kills`` kills at
    crash points spread over it (of the operations ``only`` names); then the rest of the history.
    A target whose operation has no crash point (an expiration with nothing to expire) passes to
    a later operation, one like it if there is one."""
    series = Series(kind, ops_count, seed, workdir)
    targets = kill_targets(list(series.ops), kills, random.Random(seed), only)
    while targets and not series.stopped:
        target = min(targets)
        phase = targets.pop(target)
        if series.run(target, phase).killed is None:
            later = [
                op for op in series.ops[target + 1 :] if op.number not in targets and op.category in PHASES
            ]
            alike = [op for op in later if _alike(op, series.ops[target])]
            targets.update(
                {op.number: phase if op in alike else PHASES[op.category] for op in (alike or later)[:1]}
            )
    return series.finish()


def timer_series(kind: str, kills: int, ops_count: int, seed: int, workdir: str) -> Report:
    """Like :func:`kill_series`, but the parent kills each child at a random moment (inside CPU
    work as often as in I/O) while it runs the rest of the history."""
    series = Series(kind, ops_count, seed, workdir)
    rng = random.Random(seed)
    while (
        sum(series.report.kills.values()) < kills and series.position < len(series.ops) and not series.stopped
    ):
        series.run(timer_s=rng.uniform(0.002, 0.12))
    return series.finish()


def _alike(op: Op, other: Op) -> bool:
    return op.action == other.action or (op.action in DATA and other.action in DATA)
