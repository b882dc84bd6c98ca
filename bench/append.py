"""Append-table benchmark: compaction of many small files, and z-order clustering for pruning.

1,000,000 orders rows (``bench/core.py``) are appended to an unpartitioned append table in 200
commits of 5,000 rows (one small file each). It reports

(a) ``table.compact()`` (Paimon's picking: every file is small) against raw pyarrow reading the
    same 200 Parquet files into memory and writing their rows as one file with the same codec
    (ratio; the engine streams, packs the files Paimon's way and keeps statistics);
(b) a point query and a range query on (user_id, price), files opened and best-of-3 wall time,
    with the rows in arrival order (``compact(full=True)`` at a 2 MB target) and after
    ``sort_compact(["user_id", "price"], "zorder")`` at the same target.

    .venv/bin/python bench/append.py [--appends N] [--rows-per-append N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from core import best_of, orders, timed

from lakehouse import Catalog, col

CLUSTERED_TARGET = "2 mb"


def raw_rewrite(files: list[Path], out: Path) -> int:
    """Read every file and write all the rows as one zstd Parquet file; returns the rows."""
    table = pa.concat_tables([pq.ParquetFile(f).read() for f in files])
    pq.write_table(table, out, compression="zstd", compression_level=1)
    return table.num_rows


def queries(data: pa.Table) -> dict[str, object]:
    row = data.slice(data.num_rows // 3, 1).to_pylist()[0]
    return {
        "point": (col("user_id") == row["user_id"]) & (col("price") == row["price"]),
        "range": col("user_id").between(10_000, 14_999) & col("price").between(100.0, 149.99),
    }


def measure(table, predicates: dict[str, object]) -> dict[str, tuple[int, float, int]]:
    """Per query: files opened, best wall time, rows returned."""
    out = {}
    for name, flt in predicates.items():
        opened = table.plan(filter=flt).stats["files_selected"]
        seconds, rows = best_of(lambda flt=flt: table.read(filter=flt))
        out[name] = (opened, seconds, rows.num_rows)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--rows-per-append", type=int, default=5_000)
    args = parser.parse_args()
    data = orders(args.appends * args.rows_per_append)
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(f"{tmp}/wh")
        catalog.create_database("bench")
        table = catalog.create_table("bench.events", data.schema)
        for i in range(args.appends):
            table.write(data.slice(i * args.rows_per_append, args.rows_per_append))
        files = sorted(Path(tmp, "wh").rglob("data-*.parquet"))
        raw_seconds, raw_rows = timed(lambda: raw_rewrite(files, Path(tmp) / "raw.parquet"))
        seconds, done = timed(table.compact)
        assert raw_rows == data.num_rows == table.row_count()
        print(f"(a) compaction of {args.appends} small files ({data.num_rows:,} rows)")
        print(f"    table.compact(): {seconds:.2f} s, {done.files_before} files -> {done.files_after}, "
              f"{done.bytes_before / 1e6:.1f} MB -> {done.bytes_after / 1e6:.1f} MB")  # fmt: skip
        print(f"    raw pyarrow read + write: {raw_seconds:.2f} s")
        print(f"    ratio compact / raw: {seconds / raw_seconds:.2f}x")

        table.set_options({"target-file-size": CLUSTERED_TARGET})
        table.compact(full=True)
        predicates = queries(data)
        before = measure(table, predicates)
        clustering = lambda: table.sort_compact(["user_id", "price"], strategy="zorder")  # noqa: E731
        cluster_seconds, clustered = timed(clustering)
        after = measure(table, predicates)
        print(f"(b) z-order clustering on (user_id, price), target-file-size {CLUSTERED_TARGET}: "
              f"{cluster_seconds:.2f} s, {clustered.files_before} files -> "
              f"{clustered.files_after}")  # fmt: skip
        for name in predicates:
            (f0, t0, r0), (f1, t1, r1) = before[name], after[name]
            assert r0 == r1
            print(f"    {name:5} query ({r0} rows): files opened {f0} -> {f1} "
                  f"({f0 / max(f1, 1):.1f}x fewer), {t0 * 1000:.1f} ms -> {t1 * 1000:.1f} ms "
                  f"({t0 / t1:.1f}x faster)")  # fmt: skip


if __name__ == "__main__":
    main()
