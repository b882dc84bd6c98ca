"""LSM benchmark: one run, one data set (the 1,000,000-row orders of ``bench/core.py``).

- merge-on-read: a primary-key table (bucket 4, ``write-only`` so nothing compacts) holding a bulk
  insert and four commits upserting 10% of the keys: five sorted runs per bucket. Our full read
  against pypaimon with its native add-on reading the same table, and against a raw
  ``pyarrow.parquet`` read of the same data files (no merge);
- full compaction of that table (best of --repeat, each on a fresh copy) against a raw pyarrow
  read + sort + latest row per key + write of each bucket's files (same threads, same rows out,
  same Parquet settings);
- merge-on-write: the same history into a ``deletion-vectors.enabled`` table (each write compacts
  with lookups and deletion vectors); its read against a raw read of its live data files;
- dynamic buckets: the same history into a ``bucket = -1`` table, write time against bucket 4;
  and the assigner alone on 10,000,000 distinct keys: keys/s and bytes held per key.

    .venv/bin/python bench/lsm.py [--rows N] [--keys N] [--repeat N] [--only compaction]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from core import PyPaimon, best_of, orders, timed, upserts
from hash_index import TARGET_ROW_NUM, assign_all, hashed_batches

from lakehouse import Catalog
from lakehouse.bucket.dynamic import DynamicBucketOptions, HashBucketAssigner
from lakehouse.format import parquet
from lakehouse.io.pool import map_parallel

KEY = ["order_id", "dt"]
KEY_COLUMN = parquet.KEY_PREFIX + "order_id"  # dt is the partition: the key within a bucket


def create(catalog: Catalog, name: str, schema: pa.Schema, options: dict[str, str]):
    return catalog.create_table(name, schema, primary_keys=KEY, partition_keys=["dt"], options=options)


def history(table, data: pa.Table, rounds: list[pa.Table]) -> float:
    """Bulk insert then the upsert rounds, one commit each; seconds taken."""
    start = time.perf_counter()
    for batch in [data, *rounds]:
        table.write(batch)
    return time.perf_counter() - start


def raw_read(paths: list[str]) -> pa.Table:
    return pa.concat_tables([pq.ParquetFile(p).read() for p in paths])


def bucket_files(table) -> list[list[str]]:
    """The data files of each (partition, bucket)."""
    buckets: dict[tuple[bytes, int], list[str]] = {}
    for e in table.live_entries():
        path = table.paths.data_file(table.bucket_path(e.partition, e.bucket), e.file.file_name)
        buckets.setdefault((e.partition, e.bucket), []).append(path)
    return list(buckets.values())


def data_files(table) -> list[str]:
    return [path for bucket in bucket_files(table) for path in bucket]


def raw_compact(buckets: list[list[str]], out: Path) -> int:
    """What a full compaction must at least do, with pyarrow alone and on the same threads as the
    engine (one per core, a bucket each): read a bucket's files, sort by key and sequence number,
    keep every key's latest row (the rows the compaction writes) and write them as one file (the
    engine rolls at 128 MB, more than a bucket holds) with the Parquet settings of the table's
    data files: zstd level 1, dictionaries for strings. Returns the rows written."""

    def one(job: tuple[int, list[str]]) -> int:
        i, paths = job
        rows = raw_read(paths).sort_by([(KEY_COLUMN, "ascending"), (parquet.SEQUENCE_NUMBER, "ascending")])
        keys = rows.column(KEY_COLUMN).combine_chunks()
        latest = np.append(np.asarray(pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))), True)
        rows = rows.filter(pa.array(latest))
        pq.write_table(rows, out / f"{i}.parquet", **parquet.ParquetOptions().writer_kwargs(rows.schema))
        return rows.num_rows

    out.mkdir(exist_ok=True)
    return sum(map_parallel(one, list(enumerate(buckets))))


def full_compactions(warehouse: Path, repeat: int, rows: int) -> float:
    """Best of ``repeat`` full compactions of ``bench.mor``, each of a fresh copy (copy not timed)."""
    times = []
    for i in range(repeat):
        copy = warehouse.with_name(f"compacted-{i}")
        shutil.copytree(warehouse, copy)
        table = Catalog(str(copy)).get_table("bench.mor")
        seconds, _ = timed(lambda table=table: table.compact(full=True))
        assert table.read().num_rows == rows
        times.append(seconds)
        shutil.rmtree(copy)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000_000, help="keys for the assigner alone")
    parser.add_argument("--repeat", type=int, default=3, help="best of N for reads and compactions")
    parser.add_argument(
        "--only", choices=["compaction"], help="only build the merge-on-read table and time its compaction"
    )
    args = parser.parse_args()

    data = orders(args.rows)
    schema = pa.schema([f.with_nullable(False) if f.name in KEY else f for f in data.schema])
    data = data.cast(schema)
    rounds = [upserts(data, r).cast(schema) for r in range(4)]
    print(f"{args.rows:,} orders rows, 4 partitions, bulk insert + 4 rounds upserting 10% of the keys\n")
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        catalog = Catalog(str(tmp / "wh"))
        catalog.create_database("bench")

        mor = create(catalog, "bench.mor", schema, {"bucket": "4", "write-only": "true"})
        results["mor: write 5 commits"] = history(mor, data, rounds)
        runs = {}
        for e in mor.live_entries():
            runs[(e.partition, e.bucket)] = runs.get((e.partition, e.bucket), 0) + 1
        shape = sorted(set(runs.values()))
        print(f"merge-on-read table: {len(mor.live_entries())} files, sorted runs per bucket {shape}")
        paths = data_files(mor)
        if not args.only:
            results["mor: our read"], ours = best_of(mor.read, args.repeat)
            native = PyPaimon(str(tmp / "wh"), native=True)
            results["mor: pypaimon-native read"], theirs = best_of(
                lambda: native.read("bench.mor"), args.repeat
            )
            results["mor: raw parquet read"], _ = best_of(lambda: raw_read(paths), args.repeat)
            assert ours.num_rows == theirs.num_rows == args.rows, (ours.num_rows, theirs.num_rows)

        buckets = bucket_files(mor)
        results["raw read+sort+write"], written = best_of(
            lambda: raw_compact(buckets, tmp / "raw"), args.repeat
        )
        assert written == args.rows, written
        results["full compaction"] = full_compactions(tmp / "wh", args.repeat, args.rows)
        if not args.only:
            others(args, catalog, schema, data, rounds, native, results)
    if not args.only:
        assigner_figures = assigner(args.keys)
    report(results)
    if not args.only:
        print(assigner_figures)


def others(args, catalog: Catalog, schema: pa.Schema, data: pa.Table, rounds, native, results) -> None:
    """The deletion-vector, fixed-bucket and dynamic-bucket tables."""
    dv = create(catalog, "bench.dv", schema, {"bucket": "4", "deletion-vectors.enabled": "true"})
    results["dv: write 5 commits"] = history(dv, data, rounds)
    vectors = sum(e.index_file.row_count for e in dv.index_entries())
    print(f"deletion-vector table: {len(dv.live_entries())} files, {vectors} deletion vectors")
    dv_paths = data_files(dv)
    results["dv: our read"], got = best_of(dv.read, args.repeat)
    results["dv: raw parquet read"], _ = best_of(lambda: raw_read(dv_paths), args.repeat)
    assert got.num_rows == args.rows
    results["dv: pypaimon-native read"], theirs = best_of(lambda: native.read("bench.dv"), args.repeat)
    assert theirs.num_rows == args.rows

    fixed = create(catalog, "bench.fixed", schema, {"bucket": "4"})
    results["fixed-bucket: write 5 commits"] = history(fixed, data, rounds)
    dynamic = create(catalog, "bench.dynamic", schema, {"dynamic-bucket.target-row-num": "100000"})
    results["dynamic-bucket: write 5 commits"] = history(dynamic, data, rounds)
    buckets = len({(e.partition, e.bucket) for e in dynamic.live_entries()})
    assert dynamic.read().num_rows == args.rows
    print(f"dynamic-bucket table: {buckets} buckets over 4 partitions (target 100,000 rows each)")


def assigner(keys: int) -> str:
    """The dynamic-bucket assigner alone on ``keys`` distinct keys: its figures line."""
    batches, _ = hashed_batches(keys, 1_000_000)
    assigner = HashBucketAssigner(DynamicBucketOptions(target_row_num=TARGET_ROW_NUM))
    new_time, first = assign_all(assigner, batches)
    known_time, again = assign_all(assigner, batches)
    assert np.array_equal(first, again)
    per_key = assigner.nbytes / len(np.unique(np.concatenate(batches)))
    return (
        f"  assigner, {keys:,} keys: new {keys / new_time / 1e6:.2f} M keys/s, known "
        f"{keys / known_time / 1e6:.2f} M keys/s [>= 2M], {per_key:.2f} bytes/key held [<= 12]"
    )


def report(results: dict[str, float]) -> None:
    """The timings, and the ratios of those that were measured."""
    print("\nseconds (lower is better)")
    for name, seconds in results.items():
        print(f"  {name:<34} {seconds:8.3f}")
    our_mor, our_dv = "mor: our read", "dv: our read"
    ratios = [
        ("MOR read, 5 runs/bucket vs pypaimon-native", "mor: pypaimon-native read", our_mor, ">= 1.5x"),
        ("MOR read vs raw parquet read of the same files", "mor: raw parquet read", our_mor, ">= 0.9x"),
        ("full compaction time / raw read+sort+write", "full compaction", "raw read+sort+write", "<= 1.1x"),
        ("DV table read vs raw parquet read", "dv: raw parquet read", our_dv, ">= 0.95x"),
        ("DV table read vs pypaimon-native", "dv: pypaimon-native read", our_dv, ""),
        (
            "dynamic / fixed buckets write time",
            "dynamic-bucket: write 5 commits",
            "fixed-bucket: write 5 commits",
            "",
        ),
    ]
    print("\nratios (x > 1: we are faster, except where a time ratio is named; targets in brackets)")
    for name, top, bottom, target in ratios:
        if top in results and bottom in results:
            value = results[top] / results[bottom]
            print(f"  {name:<48} {value:5.2f}x  {'[' + target + ']' if target else ''}")


if __name__ == "__main__":
    main()
