"""Fault benchmark: kill -9 at many crash points and at random moments, and racing committers.

The long version of ``tests/faults`` (its harness: ``tests/faults/killrun.py``, ``racing.py``):
- ``--kills`` (default 120) kills at crash points, drawn from a seeded RNG, of writers,
  committers, compactions, index rewrites and expirations, over series of ``--operations``
  operations on each table kind (append, primary key, primary key with deletion vectors, file
  indexes), ``--per-series`` kills per series;
- ``--timer-kills`` (default 40) kills by the parent at random moments, inside CPU work too;
- 4 writers x ``--commits`` (default 50) commits on an append and on a primary-key table, and
  2 writers x ``--commits`` racing 2 x ``--commits`` full compactions.
After each kill the table must read its history (ours and pypaimon's reads), verify, take the
next operation and lose exactly its orphan files to ``remove_orphan_files``. Prints kills by
operation, every anomaly (there must be none), orphan files found and removed, and the races.

    .venv/bin/python bench/faults.py [--kills N] [--timer-kills N] [--operations N] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness lives in tests/faults

from tests.faults.history import KINDS  # noqa: E402
from tests.faults.killrun import Report, kill_series, timer_series  # noqa: E402
from tests.faults.racing import race  # noqa: E402

OPERATIONS = {  # kill categories of tests/faults/killrun.py
    "write": "writer",
    "commit": "committer",
    "compact": "compaction",
    "index": "index rewrite",
    "expire": "expiration",
    "tag": "tag creation",
    "untag": "tag deletion",
}


@dataclass
class Section:
    """One part of the summary: a table, and the anomalies its runs found."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[object, ...]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)

    def print(self) -> None:
        print(f"\n{self.title}")
        table = [tuple(str(x) for x in row) for row in (self.header, *self.rows)]
        widths = [max(len(x) for x in column) for column in zip(*table, strict=True)]
        for row in table:
            label, *values = row
            cells = [f"{v:>{w}}" for v, w in zip(values, widths[1:], strict=True)]
            print(f"  {label:<{widths[0]}}  " + "  ".join(cells))


def series(run: Callable[..., Report], kills: int, per_series: int, operations: int, seed: int, workdir: str):
    """Series of up to ``per_series`` kills each (fewer if that spreads them over every table
    kind), the kinds in turn, until ``kills`` kills (or a series kills nothing); the merged
    report and the kills per table kind."""
    per_series = min(per_series, math.ceil(kills / len(KINDS)))
    total, by_kind = Report(), dict.fromkeys(KINDS, 0)
    for i in itertools.count():
        wanted = kills - sum(total.kills.values())
        if wanted <= 0:
            break
        kind = list(KINDS)[i % len(KINDS)]
        report = run(kind, min(per_series, wanted), operations, seed + i, workdir)
        by_kind[kind] += sum(report.kills.values())
        total.add(report)
        if not report.kills:
            break
    return total, by_kind


def kill_section(args: argparse.Namespace, workdir: str) -> Section:
    """Kills at crash points, then kills by the parent's timer, over series of every table kind."""
    began = time.perf_counter()
    crash, crash_kinds = series(kill_series, args.kills, args.per_series, args.operations, args.seed, workdir)
    seed = args.seed + 1000
    timer, timer_kinds = series(
        timer_series, args.timer_kills, args.per_series, args.operations, seed, workdir
    )
    both = Report()
    both.add(crash)
    both.add(timer)
    counts = [(name, crash.kills[c], timer.kills[c]) for c, name in OPERATIONS.items() if both.kills[c]]
    counts += [(f"table {kind}", crash_kinds[kind], timer_kinds[kind]) for kind in KINDS]
    counts += [("all", sum(crash.kills.values()), sum(timer.kills.values()))]
    seconds = time.perf_counter() - began
    section = Section(f"kill -9 ({seconds:.0f} s)", ("kills", "at crash points", "by timer", "total"))
    section.rows = [(label, a, b, a + b) for label, a, b in counts]
    section.rows += [
        ("targets without a crash point", crash.survived, "", crash.survived),
        ("orphan files found", "", "", both.orphans_found),
        ("orphan files removed", "", "", both.orphans_removed),
        ("orphan bytes removed", "", "", both.orphan_bytes),
    ]
    section.anomalies = both.anomalies
    return section


def race_section(commits: int, workdir: str) -> Section:
    section = Section("racing committers", ("run", "commits", "compactions", "conflicts", "idle", "seconds"))
    runs = [
        (f"append: 4 writers x {commits}", "append", 4, 0),
        (f"primary key: 4 writers x {commits}", "pk", 4, 0),
        (f"primary key: 2 writers x {commits} + 2 x {commits} full compactions", "pk", 2, 2),
    ]
    for label, kind, writers, compactors in runs:
        result = race(kind, writers, commits, compactors, commits, workdir)
        c = result.compactions
        section.rows.append(
            (label, result.commits, c["committed"], c["conflict"], c["nothing"], f"{result.seconds:.1f}")
        )
        section.anomalies += [f"{label}: {a}" for a in result.anomalies]
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=120, help="kills at crash points")
    parser.add_argument("--timer-kills", type=int, default=40, help="kills by the parent at random moments")
    parser.add_argument("--operations", type=int, default=50, help="operations per series")
    parser.add_argument("--per-series", type=int, default=15, help="kills per series")
    parser.add_argument("--commits", type=int, default=50, help="commits per racing writer")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        sections = [kill_section(args, workdir), race_section(args.commits, workdir)]
        # bad inputs: the Section of tests/faults/bad_inputs.py's runs goes here, one more line
    for section in sections:
        section.print()
    anomalies = [a for section in sections for a in section.anomalies]
    print(f"\nanomalies: {len(anomalies)} (must be 0)")
    for anomaly in anomalies:
        print(f"  {anomaly}")
    sys.exit(1 if anomalies else 0)


if __name__ == "__main__":
    main()
