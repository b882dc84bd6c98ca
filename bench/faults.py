"""Fault benchmark: kill -9 at many crash points and at random moments, and racing committers.

The long version of ``tests/faults`` (its harness: ``tests/faults/killrun.py``, ``racing.py``):
- ``--kills`` (default 120) kills at crash points, drawn from a seeded RNG, of writers,
  committers, compactions, index rewrites and expirations, over series of ``--operations``
  operations on each table kind (append, primary key, primary key with deletion vectors, file
  indexes), ``--per-series`` kills per series;
- ``--timer-kills`` (default 40) kills by the parent at random moments, inside CPU work too;
- ``--expiration-kills`` (default 100) kills during expirations only (no listed snapshot may be
  unreadable after one);
- 4 writers x ``--commits`` (default 50) commits on an append and on a primary-key table, and
  2 writers x ``--commits`` racing 2 x ``--commits`` full compactions;
- every bad input of ``tests/faults/bad_inputs.py`` (typed error, warehouse unchanged);
- ``--index-damage`` (default 240) damages to file indexes behind valid headers: every one that
  changes a filtered read's result must be reported by ``verify_file_indexes``;
- ``--spark-deaths`` (default 6) Spark writes whose task dies by an exception, ``os._exit`` and
  SIGKILL of its Python worker, in turn (no snapshot, no file of the write left;
  ``tests/spark/dying.py``).
After each kill the table must read its history (ours and pypaimon's reads), verify, take the
next operation and lose exactly its orphan files to ``remove_orphan_files``. Prints kills by
operation, every anomaly (there must be none), orphan files found and removed, the races, the
bad inputs and the Spark deaths.

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

from tests.faults.bad_inputs import CASES  # noqa: E402
from tests.faults.bad_inputs import run as run_bad_input  # noqa: E402
from tests.faults.history import KINDS  # noqa: E402
from tests.faults.index_damage import run_trials  # noqa: E402
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
    kind), the kinds in turn, until ``kills`` kills (or a round over every kind kills nothing);
    the merged report and the kills per table kind."""
    per_series = min(per_series, math.ceil(kills / len(KINDS)))
    total, by_kind = Report(), dict.fromkeys(KINDS, 0)
    idle = 0  # series in a row that killed nothing
    for i in itertools.count():
        wanted = kills - sum(total.kills.values())
        if wanted <= 0 or idle == len(KINDS):
            break
        kind = list(KINDS)[i % len(KINDS)]
        report = run(kind, min(per_series, wanted), operations, seed + i, workdir)
        by_kind[kind] += sum(report.kills.values())
        total.add(report)
        idle = 0 if report.kills else idle + 1
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


def expiration_section(kills: int, operations: int, seed: int, workdir: str) -> Section:
    """Kills aimed at expirations, series after series, until ``kills`` of them (a target with
    nothing to expire passes to a later operation, whose kill is counted in its own category):
    no listed snapshot may be unreadable or wrong."""
    began = time.perf_counter()
    report, by_kind = Report(), dict.fromkeys(KINDS, 0)
    for i in range(10 * len(KINDS)):
        wanted = kills - report.kills["expire"]
        if wanted <= 0:
            break
        kind = list(KINDS)[i % len(KINDS)]
        found = kill_series(kind, min(wanted, 20), operations, seed + i, workdir, only=("expire",))
        by_kind[kind] += found.kills["expire"]
        report.add(found)
    section = Section(f"kill -9 during expiration ({time.perf_counter() - began:.0f} s)", ("kills", "count"))
    section.rows = [(f"table {kind}", n) for kind, n in by_kind.items() if n]
    section.rows += [
        ("all during expiration", report.kills["expire"]),
        ("passed on to another operation", sum(report.kills.values()) - report.kills["expire"]),
        ("listed snapshots unreadable or wrong", len(report.anomalies)),
        ("orphan files removed", report.orphans_removed),
    ]
    section.anomalies = report.anomalies
    if report.kills["expire"] < kills:
        section.anomalies.append(f"only {report.kills['expire']} of {kills} expiration kills happened")
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


def bad_input_section(workdir: str) -> Section:
    """Every bad input through the public API, each on a fresh warehouse."""
    typed = unchanged = 0
    section = Section("bad inputs", ("cases", "total", "typed", "table unchanged"))
    for i, case in enumerate(CASES):
        outcome = run_bad_input(case, f"{workdir}/bad-{i}/warehouse")
        typed += outcome.typed(case)
        unchanged += outcome.unchanged
        if not (outcome.typed(case) and outcome.unchanged):
            section.anomalies.append(
                f"bad input {case.name!r}: {outcome.error!r}, unchanged={outcome.unchanged}"
            )
    section.rows = [("through the public API", len(CASES), typed, unchanged)]
    return section


def index_damage_section(trials: int, seed: int, workdir: str) -> Section:
    """File indexes damaged behind valid headers, in runs of 60 trials over fresh tables."""
    section = Section("damaged file indexes", ("damage", "trials", "changed a result", "reported"))
    total = harmful = reported = 0
    for i in range(0, trials, 60):
        damage = run_trials(f"{workdir}/index-{i}/warehouse", seed + i, min(60, trials - i))
        total, harmful, reported = total + damage.trials, harmful + damage.harmful, reported + damage.reported
    section.rows = [("zeroed spans, flipped bits", total, harmful, reported)]
    if reported != harmful:
        section.anomalies.append(f"{harmful - reported} of {harmful} harmful index damages went unreported")
    return section


def spark_section(deaths: int, workdir: str) -> Section:
    """Spark writes whose task dies, each mode in turn: no snapshot, only the write's ENDED marker."""
    import os

    from lakehouse import Catalog
    from lakehouse.spark import session
    from tests.conftest import ORDERS
    from tests.spark.dying import LEASES, DyingSource, orders_df, table_files

    spark = session(
        conf={"spark.sql.shuffle.partitions": "4", "spark.sql.execution.arrow.maxRecordsPerBatch": "40"}
    )
    spark.sparkContext.setLogLevel("OFF")
    spark.dataSource.register(DyingSource)
    section = Section("Spark writes whose task dies", ("death", "writes", "failed", "files left", "seconds"))
    modes = ("raise", "exit", "kill")
    for mode in modes:
        runs = deaths // len(modes) + (modes.index(mode) < deaths % len(modes))
        failed = left = 0
        began = time.perf_counter()
        for i in range(runs):
            warehouse = f"{workdir}/spark-{mode}-{i}/warehouse"
            catalog = Catalog(warehouse)
            catalog.create_database("db")
            t = catalog.create_table(
                "db.t", ORDERS, partition_keys=["dt"], options={"target-file-size": "1 kb"}
            )
            save = orders_df(spark, 400).write.format("paimon_dying").option("warehouse", warehouse)
            save = save.options(**LEASES, **{"fault.mode": mode, "fault.partition": str(i % 2)})
            save = save.option("fault.after-batches", "3").option("fault.slow-ms", "50").mode("append")
            try:
                save.save("db.t")
            except Exception:
                failed += 1
            files = [f for f in table_files(t.paths.root) if not f.endswith(os.sep + "ENDED")]
            left += len(files)
            if t.latest_snapshot_id() is not None or files:
                section.anomalies.append(
                    f"spark {mode} #{i}: snapshot {t.latest_snapshot_id()}, files {files}"
                )
        section.rows.append((mode, runs, failed, left, f"{time.perf_counter() - began:.1f}"))
        if failed != runs:
            section.anomalies.append(f"spark {mode}: {runs - failed} of {runs} writes did not fail")
    spark.stop()
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=120, help="kills at crash points")
    parser.add_argument("--timer-kills", type=int, default=40, help="kills by the parent at random moments")
    parser.add_argument("--operations", type=int, default=50, help="operations per series")
    parser.add_argument("--per-series", type=int, default=15, help="kills per series")
    parser.add_argument("--commits", type=int, default=50, help="commits per racing writer")
    parser.add_argument("--expiration-kills", type=int, default=100, help="kills during expirations only")
    parser.add_argument("--index-damage", type=int, default=240, help="damages to file indexes")
    parser.add_argument("--spark-deaths", type=int, default=6, help="Spark writes whose task dies (0: none)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        sections = [
            kill_section(args, workdir),
            expiration_section(args.expiration_kills, args.operations, args.seed + 2000, workdir),
            race_section(args.commits, workdir),
            bad_input_section(workdir),
            index_damage_section(args.index_damage, args.seed, workdir),
        ]
        if args.spark_deaths:
            sections.append(spark_section(args.spark_deaths, workdir))
    for section in sections:
        section.print()
    anomalies = [a for section in sections for a in section.anomalies]
    print(f"\nanomalies: {len(anomalies)} (must be 0)")
    for anomaly in anomalies:
        print(f"  {anomaly}")
    sys.exit(1 if anomalies else 0)


if __name__ == "__main__":
    main()
