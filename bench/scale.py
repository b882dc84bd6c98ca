"""Scale benchmark: how time and peak memory of each operation grow with the data.

Row operations run at each of ``--rows`` (default 1M and 10M; ``--large`` adds 100M) on one
generated orders stream (numpy, batches of 1M rows handed over as a ``pa.RecordBatchReader``, so
the generator holds one batch): raw pyarrow Parquet write and read (the baseline), append write
(a bloom-filter index on ``k``, sized for a partition's rows) and read, primary-key bulk write (4
partitions x 4 buckets), 10 upsert commits of 1% of the keys each, full compaction, merged read,
and a point query on ``k``.
Reads go split after split and batch by batch (``TableRead.stream``) and only count rows.

Metadata operations have their own sizes, ending at the issue's: planning the latest snapshot and
one partition of an append table of 10k and 100k files (100 and 1,000 partitions), cold (the
first plan of a process) and warm (best of 5 after it), against pypaimon's plan of the same table;
expiring 1k and 10k snapshots; dynamic-bucket assignment of as many keys as rows (``bytes/key`` =
the assigner's index arrays per key). The planning and expiration tables are committed by this
engine's commit path with metadata-only messages: their data files are never read (planning opens
none; for expiration they exist, empty). A cold plan is the first of the table in its process
(which has planned another table before, so that one-time imports are not counted).

Every operation runs in a fresh Python process that reports its seconds and its own peak RSS
(``ru_maxrss``), so one operation's peak cannot hide another's; before its clock starts, the
process makes pyarrow import pandas (where installed), which pyarrow does on its first
conversion of Python or numpy values (0.3 s, once per process, on one core). Printed: a table
per size, then each operation's growth ratio time(largest)/time(previous size) (linear: about
10 for 10x).
``--threads N`` makes the processes behave as on N cores: the engine's (``LAKEHOUSE_THREADS``)
and Arrow's thread pools are sized for N, whatever this machine has. ``--threads 1,2,...`` runs
everything at each count, every process also pinned to that many of the CPUs this one may use
(as ``taskset`` would, where there are as many), and ends with each operation's speed-up over the
first count. ``--repeat R`` runs everything R times, each round in fresh directories and
alternating the thread counts, and reports each operation's fastest round (and its highest peak
RSS): one run's timings move 5-10% on a shared machine.

    .venv/bin/python bench/scale.py [--rows 1000000,10000000] [--large] [--only OP,...] [--dir D]
        [--threads N[,N...]] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# the engine of this checkout, also under an interpreter it is not installed in
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from core import pick  # noqa: E402  (after the checkout is on the path)

BATCH = 1_000_000
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
WORDS = ["fast", "gift", "fragile", "express", "bulk", "return", "priority", "note"]
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("k", pa.int64()),
        pa.field("v", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("dt", pa.string(), nullable=False),
    ]
)
PLAN_FILES = {1: 10_000, 2: 100_000}  # metadata step -> files (partitions: files / 100)
EXPIRE_SNAPSHOTS = {1: 1_000, 2: 10_000}


# ---- data ------------------------------------------------------------------------------------


def batch(ids: np.ndarray, seed: int) -> pa.RecordBatch:
    """Rows of ``ids``: ``k`` random (the bloom-filter column), ``dt`` one of 4 days by id."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.record_batch(
        [
            pa.array(ids),
            pa.array(rng.integers(0, 2**40, n)),
            pa.array(rng.uniform(0, 1000, n)),
            pick(WORDS, rng.integers(0, len(WORDS), n)),
            pick(DAYS, ids % len(DAYS)),
        ],
        schema=SCHEMA,
    )


def stream(rows: int, seed: int = 0) -> pa.RecordBatchReader:
    """``rows`` rows with ids 0..rows-1, generated a batch at a time."""

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, rows, BATCH):
            yield batch(np.arange(start, min(rows, start + BATCH), dtype=np.int64), seed + start)

    return pa.RecordBatchReader.from_batches(SCHEMA, batches())


def upsert(rows: int, round_: int) -> pa.RecordBatchReader:
    """1% of the keys (drawn at random, duplicates dropped) with new values."""
    rng = np.random.default_rng(10_000 + round_)
    ids = np.unique(rng.integers(0, rows, rows // 100))

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, len(ids), BATCH):
            yield batch(ids[start : start + BATCH], round_ * 7919 + start)

    return pa.RecordBatchReader.from_batches(SCHEMA, batches())


# ---- operations (each runs in its own process) -------------------------------------------------


def _catalog(d: Path):
    from lakehouse import Catalog

    cat = Catalog(str(d / "warehouse"))
    cat.create_database("bench", ignore_if_exists=True)
    return cat


def _count(table, filter=None) -> int:
    """Rows of ``table`` read split after split, a batch at a time."""
    return sum(b.num_rows for b in table.new_read(filter=filter).stream(table.plan(filter=filter).splits))


def op_raw_write(d: Path, rows: int) -> dict:
    data = stream(rows)
    start = time.perf_counter()
    with pq.ParquetWriter(d / "raw.parquet", SCHEMA) as w:
        for b in data:
            w.write_batch(b)
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_raw_read(d: Path, rows: int) -> dict:
    start = time.perf_counter()
    n = sum(b.num_rows for b in pq.ParquetFile(d / "raw.parquet").iter_batches(BATCH))
    assert n == rows, n
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_append_write(d: Path, rows: int) -> dict:
    cat = _catalog(d)
    # the filter sized for the rows of a partition's file (Paimon's default, 1M items, saturates)
    bloom = {"file-index.bloom-filter.columns": "k", "file-index.bloom-filter.k.items": str(rows // 4)}
    t = cat.create_table("bench.append", SCHEMA, partition_keys=["dt"], options=bloom)
    return _timed_write(t, rows)


def _timed_write(t, rows: int) -> dict:
    """One write of ``rows`` generated rows, streamed."""
    data = stream(rows)
    start = time.perf_counter()
    t.write(data)
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_append_read(d: Path, rows: int) -> dict:
    t = _catalog(d).get_table("bench.append")
    start = time.perf_counter()
    n = _count(t)
    assert n == rows, n
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_point_query(d: Path, rows: int) -> dict:
    from lakehouse import col

    t = _catalog(d).get_table("bench.append")
    wanted = batch(np.arange(rows // 2, rows // 2 + 1, dtype=np.int64), rows // 2 // BATCH * BATCH)
    k = wanted.column("k")[0].as_py()
    start = time.perf_counter()
    plan = t.plan(filter=col("k") == k)
    read = t.new_read(filter=col("k") == k)
    n = sum(b.num_rows for s in plan.splits for b in read.batches(s))
    seconds = time.perf_counter() - start
    assert n >= 1, n
    stats = plan.stats
    note = f"files {stats['files_selected']}/{stats['files_total']} after the bloom filter"
    return {"seconds": seconds, "items": 1, "note": note}


def op_pk_write(d: Path, rows: int) -> dict:
    t = _catalog(d).create_table(
        "bench.pk", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "4"}
    )
    return _timed_write(t, rows)


def op_upserts(d: Path, rows: int) -> dict:
    t = _catalog(d).get_table("bench.pk")
    rounds = [upsert(rows, r) for r in range(10)]
    start = time.perf_counter()
    for data in rounds:
        t.write(data)
    return {"seconds": time.perf_counter() - start, "items": rows // 10, "note": "10 commits"}


def op_compaction(d: Path, rows: int) -> dict:
    t = _catalog(d).get_table("bench.pk")
    start = time.perf_counter()
    t.compact(full=True)
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_merged_read(d: Path, rows: int) -> dict:
    t = _catalog(d).get_table("bench.pk")
    t.write(upsert(rows, 99))  # a level-0 file in every bucket: the read has to merge
    start = time.perf_counter()
    n = _count(t)
    assert n == rows, n
    return {"seconds": time.perf_counter() - start, "items": rows}


def op_dynamic_bucket(d: Path, rows: int) -> dict:
    from lakehouse.bucket.dynamic import DynamicBucketOptions, HashBucketAssigner, key_hashes
    from lakehouse.types import BIGINT

    assigner = HashBucketAssigner(DynamicBucketOptions(target_row_num=2_000_000))
    spent = 0.0
    for start in range(0, rows, BATCH):
        ids = np.arange(start, min(rows, start + BATCH), dtype=np.int64) * 2_654_435_761 + 17
        begin = time.perf_counter()
        assigner.assign("p", 0, key_hashes(pa.table({"id": ids}), ["id"], [BIGINT]))
        spent += time.perf_counter() - begin
    return {"seconds": spent, "items": rows, "note": f"{assigner.nbytes / rows:.1f} bytes/key"}


PLAN_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()), ("p", pa.int32())])


def metadata_commits(table, files: int, partitions: int, per_commit: int, touch: Path | None = None) -> None:
    """Commit ``files`` data files of 1,000 rows (``id`` ranges disjoint), ``per_commit`` at a
    time round-robin over ``partitions``, as a writer's messages would (``touch``: create them,
    empty, under this warehouse directory)."""
    from lakehouse.manifest import binary_row, stats
    from lakehouse.manifest.entries import EMPTY_ROW, EMPTY_STATS, DataFileMeta
    from lakehouse.predicate import ColumnStats
    from lakehouse.write.message import CommitMessage

    store = table.store
    types = store.schema.partition_types()
    encoded = binary_row.encode_values([[p] for p in range(partitions)], types)
    parts = [binary_row.serialize(encoded.row(p), 1) for p in range(partitions)]
    value_types = [f.type for f in store.schema.fields if f.name != "p"]
    commit = table.new_commit()
    for first in range(0, files, per_commit):
        ids = range(first, min(files, first + per_commit))
        values = stats.to_simple_stats(
            value_types,
            [
                [ColumnStats(i * 1000, i * 1000 + 999, 0, 1000), ColumnStats(0.0, 1.0, 0, 1000)]
                + [ColumnStats("a", "z", 0, 1000)]
                for i in ids
            ],
        )
        by_partition: dict[int, list] = {}
        for i, value_stats in zip(ids, values, strict=True):
            name = f"data-{i}.parquet"
            meta = DataFileMeta(
                name,
                4096,
                1000,
                EMPTY_ROW,
                EMPTY_ROW,
                EMPTY_STATS,
                value_stats,
                0,
                999,
                0,
                0,
                creation_time=0,
            )
            by_partition.setdefault(i % partitions, []).append(meta)
            if touch is not None:
                path = Path(store.paths.root) / store.bucket_path(parts[i % partitions], 0) / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        commit.commit([CommitMessage(parts[p], 0, -1, tuple(fs)) for p, fs in by_partition.items()])


def op_plan_setup(d: Path, step: int) -> dict:
    files = PLAN_FILES[step]
    t = _catalog(d).create_table("bench.plan", PLAN_SCHEMA, partition_keys=["p"])
    start = time.perf_counter()
    metadata_commits(t, files, files // 100, 1000)
    return {"seconds": time.perf_counter() - start, "items": files, "note": "100 commits (setup)"}


def _plan_filter(step: int):
    from lakehouse import col

    return col("p") == PLAN_FILES[step] // 200


def _plan(d: Path, step: int, partition: bool) -> dict:
    cat = _catalog(d)
    flt = _plan_filter(step) if partition else None
    other = cat.create_table("bench.other", PLAN_SCHEMA, partition_keys=["p"], ignore_if_exists=True)
    metadata_commits(other, 10, 2, 10)
    other.plan(filter=flt)  # the process's one-time imports (pyarrow's of pandas: 0.4 s) are not planning
    t = cat.get_table("bench.plan")
    start = time.perf_counter()
    plan = t.plan(filter=flt)
    cold = time.perf_counter() - start
    warm = min(_timed(lambda: t.plan(filter=flt)) for _ in range(5))
    note = f"warm {warm * 1000:.1f} ms; {plan.stats['files_selected']} files, {len(plan.splits)} splits"
    return {"seconds": cold, "items": PLAN_FILES[step], "note": note, "warm": warm}


def op_plan_latest(d: Path, step: int) -> dict:
    return _plan(d, step, False)


def op_plan_partition(d: Path, step: int) -> dict:
    return _plan(d, step, True)


def _pypaimon_plan(d: Path, step: int, partition: bool) -> dict:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(d / "warehouse")}).get_table("bench.plan")

    def plan():
        builder = table.new_read_builder()
        if partition:
            builder = builder.with_filter(builder.new_predicate_builder().equal("p", PLAN_FILES[step] // 200))
        return builder.new_scan().plan()

    start = time.perf_counter()
    splits = plan().splits()
    cold = time.perf_counter() - start
    warm = min(_timed(plan) for _ in range(2))
    return {
        "seconds": cold,
        "items": PLAN_FILES[step],
        "note": f"warm {warm * 1000:.1f} ms; {len(splits)} splits",
    }


def op_pypaimon_plan_latest(d: Path, step: int) -> dict:
    return _pypaimon_plan(d, step, False)


def op_pypaimon_plan_partition(d: Path, step: int) -> dict:
    return _pypaimon_plan(d, step, True)


def op_expire_setup(d: Path, step: int) -> dict:
    snapshots = EXPIRE_SNAPSHOTS[step]
    t = _catalog(d).create_table("bench.expire", PLAN_SCHEMA, partition_keys=["p"])
    start = time.perf_counter()
    metadata_commits(t, snapshots, 10, 1, touch=d / "warehouse")
    t.new_commit().commit([], overwrite=True)  # every file unreferenced once the history goes
    return {"seconds": time.perf_counter() - start, "items": snapshots, "note": "commits (setup)"}


def op_expire(d: Path, step: int) -> dict:
    t = _catalog(d).get_table("bench.expire")
    snapshots = EXPIRE_SNAPSHOTS[step]
    start = time.perf_counter()
    result = t.expire_snapshots(retain_min=1, older_than_ms=2**62, max_deletes=snapshots + 1)
    seconds = time.perf_counter() - start
    assert result.snapshots_expired == snapshots, result
    return {"seconds": seconds, "items": snapshots, "note": f"{result.deleted.total} files deleted"}


def op_baseline(d: Path, size: int) -> dict:
    import lakehouse  # noqa: F401 - what every operation's process holds before it starts

    return {"seconds": 0.0, "items": 0}


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# (name, kind, unit): kind "rows" runs at each row count, "meta" at each metadata step
OPS = [
    ("baseline", "rows", ""),
    ("raw_write", "rows", "rows"),
    ("raw_read", "rows", "rows"),
    ("append_write", "rows", "rows"),
    ("append_read", "rows", "rows"),
    ("point_query", "rows", "query"),
    ("pk_write", "rows", "rows"),
    ("upserts", "rows", "rows"),
    ("compaction", "rows", "rows"),
    ("merged_read", "rows", "rows"),
    ("dynamic_bucket", "rows", "keys"),
    ("plan_setup", "meta", "files"),
    ("plan_latest", "meta", "files"),
    ("plan_partition", "meta", "files"),
    ("pypaimon_plan_latest", "meta", "files"),
    ("pypaimon_plan_partition", "meta", "files"),
    ("expire_setup", "meta", "snapshots"),
    ("expire", "meta", "snapshots"),
]


# ---- harness ---------------------------------------------------------------------------------


def child(op: str, directory: str, size: int) -> None:
    """Run one operation in this process and print its result as JSON."""
    if os.environ.get("LAKEHOUSE_THREADS"):  # --threads: Arrow's pool as on that many cores too
        from lakehouse.io.cores import usable_cores

        pa.set_cpu_count(usable_cores())
    pa.array([0])  # pyarrow's one-time import of pandas (where installed) on its first conversion
    result = globals()[f"op_{op}"](Path(directory), size)
    result["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))


def run(op: str, directory: Path, size: int, cpus: list[int] | None = None) -> dict:
    """One operation in a fresh process (pinned to ``cpus`` if given); its result."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, "--dir", str(directory), "--size", str(size)],
        capture_output=True,
        text=True,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )
    if out.returncode != 0:
        raise SystemExit(f"{op} at {size:,} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fastest(best: dict | None, new: dict) -> dict:
    """Of two rounds' results of an operation, the faster one's, with the higher peak RSS."""
    if best is None:
        return new
    kept = dict(min(best, new, key=lambda r: r["seconds"]))
    kept["peak_rss"] = max(best["peak_rss"], new["peak_rss"])
    return kept


def scale(name: str, kind: str, size: int) -> int:
    """What a size means for an operation: rows, or files or snapshots of a metadata step."""
    if kind == "rows":
        return size
    return (EXPIRE_SNAPSHOTS if name.startswith("expire") else PLAN_FILES)[size]


def report(results: dict[tuple[str, int], dict], sizes: dict[str, list[int]], pinned: bool) -> None:
    threads = os.environ.get("LAKEHOUSE_THREADS") or "the usable cores"
    print(f"\nthreads: {threads}{' (pinned)' if pinned else ''}; pyarrow {pa.__version__}")
    print(f"{'operation':<25}{'size':>12}{'seconds':>10}{'throughput':>22}{'peak RSS':>11}  note")
    for name, kind, unit in OPS:
        for size in sizes[kind]:
            r = results.get((name, size))
            if r is None:
                continue
            speed = f"{r['items'] / r['seconds']:,.0f} {unit}/s" if r["seconds"] and r["items"] else ""
            print(
                f"{name:<25}{scale(name, kind, size):>12,}{r['seconds']:>10.3f}{speed:>22}"
                f"{r['peak_rss'] / 2**20:>8.0f} MiB"
                f"  {r.get('note', '')}"
            )
    print("\ngrowth from the previous size to the largest (10x more: linear is about 10)")
    for name, kind, _ in OPS:
        have = [s for s in sizes[kind] if (name, s) in results]
        if len(have) < 2 or name == "baseline":
            continue
        a, b = results[(name, have[-2])], results[(name, have[-1])]
        time_ratio = b["seconds"] / a["seconds"] if a["seconds"] else float("nan")
        print(f"  {name:<25} time x{time_ratio:6.2f}   peak RSS x{b['peak_rss'] / a['peak_rss']:5.2f}")
    raw = {s: (results.get(("raw_write", s)), results.get(("raw_read", s))) for s in sizes["rows"]}
    print("\nagainst raw pyarrow Parquet on the same rows (x > 1: we are slower)")
    for s, (w, r) in raw.items():
        ours_w, ours_r = results.get(("append_write", s)), results.get(("append_read", s))
        if w and ours_w:
            print(f"  {s:>12,} rows: append write x{ours_w['seconds'] / w['seconds']:.2f}", end="")
        if r and ours_r:
            print(f", append read x{ours_r['seconds'] / r['seconds']:.2f}", end="")
        print()
    for name in ("plan_latest", "plan_partition"):
        for s in sizes["meta"]:
            ours, theirs = results.get((name, s)), results.get((f"pypaimon_{name}", s))
            if ours and theirs:
                print(
                    f"  {name} at {PLAN_FILES[s]:,} files: pypaimon / ours = "
                    f"{theirs['seconds'] / ours['seconds']:.1f}x (cold)"
                )


def speedups(results: dict[int, dict[tuple[str, int], dict]], sizes: dict[str, list[int]]) -> None:
    """Each operation's time at every thread count and its speed-up over the first count."""
    counts = list(results)
    print(f"\nspeed-up over N = {counts[0]} threads (time at N = {counts[0]} / time at N)")
    print(f"{'operation':<25}{'size':>12}" + "".join(f"{f'N={n} s':>10}" for n in counts)
          + "".join(f"{f'x N={n}':>9}" for n in counts[1:]))  # fmt: skip
    for name, kind, _ in OPS:
        for size in sizes[kind]:
            times = [results[n].get((name, size), {}).get("seconds") for n in counts]
            if name == "baseline" or None in times or not all(times):
                continue
            print(
                f"{name:<25}{scale(name, kind, size):>12,}" + "".join(f"{t:>10.3f}" for t in times)
                + "".join(f"{times[0] / t:>8.2f}x" for t in times[1:])
            )  # fmt: skip


def one_round(
    at: dict[tuple[str, int], dict],
    sizes: dict[str, list[int]],
    only: set[str] | None,
    base: Path,
    cpus: list[int] | None,
) -> None:
    """Every operation (those in ``only``) at every size, each in fresh directories under ``base``;
    ``at`` keeps each operation's fastest result."""
    for kind in ("meta", "rows"):
        for size in sizes[kind]:
            directory = base / f"{kind}-{size}"
            directory.mkdir(parents=True, exist_ok=True)
            for name, op_kind, _ in OPS:
                if op_kind != kind or only is not None and name not in only and name != "baseline":
                    continue
                start = time.perf_counter()
                at[(name, size)] = fastest(at.get((name, size)), run(name, directory, size, cpus))
                took = time.perf_counter() - start
                print(f"  {name} at {scale(name, kind, size):,}: {took:.1f} s", flush=True)
            shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000", help="comma-separated row counts")
    parser.add_argument("--large", action="store_true", help="add 100,000,000 rows")
    parser.add_argument("--only", default="", help="comma-separated operations (default all)")
    parser.add_argument("--dir", default=None, help="working directory (default a temporary one)")
    parser.add_argument(
        "--threads", help="behave as on this many cores (LAKEHOUSE_THREADS); several: each, pinned, compared"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds, each in fresh directories; each operation's fastest"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.dir, args.size)
        return
    counts = [int(t) for t in args.threads.split(",")] if args.threads else [0]
    available = sorted(os.sched_getaffinity(0))
    rows = [int(r) for r in args.rows.split(",")] + ([100_000_000] if args.large else [])
    sizes = {"rows": rows, "meta": sorted(PLAN_FILES)}
    only = set(args.only.split(",")) if args.only else None
    base = Path(args.dir or tempfile.mkdtemp(prefix="scale-"))
    results: dict[int, dict[tuple[str, int], dict]] = {}
    try:
        for round_ in range(args.repeat):
            for count in counts:  # rounds alternate the counts: a slow spell of the machine hits each
                if count:
                    os.environ["LAKEHOUSE_THREADS"] = str(count)  # the operations' processes inherit it
                cpus = available[:count] if len(counts) > 1 and count <= len(available) else None
                at = results.setdefault(count, {})
                one_round(at, sizes, only, base, cpus)
                if round_ == args.repeat - 1:
                    report(at, sizes, cpus is not None)
        if len(counts) > 1:
            speedups(results, sizes)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
