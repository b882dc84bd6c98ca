"""File-index benchmark: one run, one data set, indexed against unindexed, raw Parquet and pypaimon.

The 1,000,000 orders rows of ``bench/core.py`` are appended in 40 commits of 25,000 rows (one
data file each). Two columns are laid out so that min/max statistics cannot prune but an index
can - the case file indexes exist for:

- ``user_id``: file ``f`` holds the 100 users ``f, f + 40, ..., f + 3960`` (each ~250 rows, 1% of the
  file), so every file's range spans every user while each user lives in exactly one file;
- ``price`` (DECIMAL(10, 2), in [1, 1000]): the band [500.00, 510.00) is empty except in one file,
  where it holds 1% of the rows.

It reports
(a) the write of the 40 files with a bloom filter on user_id, bitmaps on status and region and a
    bit-slice index on price, against the same write without indexes (target: <= 1.3x the time);
(b) a point query ``user_id == x`` and a range query ``price BETWEEN 500 AND 509.99``: files opened
    and wall time with the indexes, against a full scan (the unindexed table), raw pyarrow over
    the same data files (row-group statistics only) and pypaimon (which ignores file indexes),
    target >= 10x faster than the full scan;
(c) the bloom filter build rate per column type (values per second).

    .venv/bin/python bench/fileindex.py [--repeat N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from core import NATIVE, orders, timed

from lakehouse import Catalog, col
from lakehouse.fileindex import bloom
from lakehouse.predicate import Predicate
from lakehouse.types import from_arrow

FILES = 40
ROWS_PER_FILE = 25_000
USERS_PER_FILE = 100
BAND = (Decimal("500.00"), Decimal("509.99"))
TARGET_FILE = 17


def index_options(rows_per_file: int) -> dict[str, str]:
    """The indexes under test; the bloom filter sized for one file's rows."""
    return {
        "file-index.bloom-filter.columns": "user_id",
        "file-index.bloom-filter.user_id.items": str(rows_per_file),
        "file-index.bitmap.columns": "status,region",
        "file-index.bsi.columns": "price",
    }


def indexed_orders(rows_per_file: int = ROWS_PER_FILE, seed: int = 7) -> list[pa.Table]:
    """The 40 file-sized batches, with user_id and price laid out as the module docstring says."""
    rng = np.random.default_rng(seed)
    data = orders(FILES * rows_per_file).drop_columns(["user_id", "price"])
    batches = []
    for f in range(FILES):
        users = f + FILES * rng.integers(0, USERS_PER_FILE, rows_per_file)
        cents = rng.integers(100, 100_000 - 1_000, rows_per_file)
        cents = np.where(cents >= 50_000, cents + 1_000, cents)  # leave the band empty
        if f == TARGET_FILE:
            hits = rng.choice(rows_per_file, rows_per_file // 100, replace=False)
            cents[hits] = rng.integers(50_000, 51_000, len(hits))
        price = _decimal_cents(cents)
        batch = data.slice(f * rows_per_file, rows_per_file)
        batches.append(batch.append_column("user_id", pa.array(users)).append_column("price", price))
    return batches


def _decimal_cents(cents: np.ndarray) -> pa.Array:
    """DECIMAL(10, 2) values from non-negative cents: 16-byte little-endian unscaled integers."""
    unscaled = np.stack([cents.astype(np.int64), np.zeros_like(cents, dtype=np.int64)], axis=1)
    return pa.Array.from_buffers(pa.decimal128(10, 2), len(cents), [None, pa.py_buffer(unscaled.tobytes())])


def write_all(catalog: Catalog, ident: str, batches: list[pa.Table], options: dict[str, str]) -> float:
    catalog.drop_table(ident, ignore_if_not_exists=True)
    table = catalog.create_table(ident, batches[0].schema, options={"bucket": "-1", **options})
    start = time.perf_counter()
    for batch in batches:
        table.write(batch)
    return time.perf_counter() - start


def pypaimon_query(
    warehouse: str, ident: str, native: bool, column: str, op: str, *args
) -> tuple[float, int, int]:
    """(seconds, files opened, rows) of a filtered pypaimon read of one of our tables."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": warehouse})
    table = catalog.get_table(ident)
    if native:
        table = table.copy(NATIVE)
    start = time.perf_counter()
    builder = table.new_read_builder()
    builder = builder.with_filter(getattr(builder.new_predicate_builder(), op)(column, *args))
    splits = builder.new_scan().plan().splits()
    got = builder.new_read().to_arrow(splits)
    seconds = time.perf_counter() - start
    files = sum(len(s.files) for s in splits)
    return seconds, files, _count(got, column, op, *args)


def _count(got: pa.Table, column: str, op: str, *args) -> int:
    """Matching rows of a read that may return whole files or row groups."""
    values = got.column(column)
    if op == "equal":
        return pc.sum(pc.equal(values, args[0])).as_py() or 0
    return pc.sum(pc.and_(pc.greater_equal(values, args[0]), pc.less_equal(values, args[1]))).as_py() or 0


def bloom_rates(n: int = 1_000_000) -> dict[str, float]:
    """Values per second of building a bloom filter over one column of ``n`` values, per type."""
    rng = np.random.default_rng(3)
    base = np.datetime64("2024-01-01T00:00:00", "us")
    columns = {
        "INT": pa.array(rng.integers(-(2**31), 2**31, n, dtype=np.int32)),
        "BIGINT": pa.array(rng.integers(-(2**62), 2**62, n, dtype=np.int64)),
        "DOUBLE": pa.array(rng.standard_normal(n)),
        "DATE": pa.array(rng.integers(0, 20_000, n, dtype=np.int32)).cast(pa.date32()),
        "TIMESTAMP(6)": pa.array(base + rng.integers(0, 10**12, n).astype("timedelta64[us]")),
        "STRING(~12 chars)": pc.binary_join_element_wise(
            pa.array(rng.integers(0, 10**9, n).astype(str)), pa.array(["u"] * n), ""
        ),
    }
    rates = {}
    for name, values in columns.items():
        dtype = from_arrow(values.type)
        seconds = min(timed(lambda v=values, t=dtype: bloom.build(v, t, n, 0.1))[0] for _ in range(3))
        rates[name] = n / seconds
    return rates


def write_phase(catalog: Catalog, batches: list[pa.Table], repeat: int) -> dict[str, float]:
    """(a): best time of writing the files without and with indexes (interleaved)."""
    options = {
        "no indexes": ("bench.plain", {}),
        "indexed": ("bench.indexed", index_options(len(batches[0]))),
    }
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, (ident, opts) in options.items():
            best[name] = min(best.get(name, float("inf")), write_all(catalog, ident, batches, opts))
    return best


@dataclass(frozen=True)
class Query:
    label: str
    filter: Predicate
    column: str
    op: str  # pypaimon's predicate builder method
    literals: tuple

    def arrow(self) -> ds.Expression:
        field = ds.field(self.column)
        if self.op == "equal":
            return field == self.literals[0]
        lo, hi = (pa.scalar(v, pa.decimal128(10, 2)) for v in self.literals)
        return (field >= lo) & (field <= hi)


QUERIES = [
    Query("user_id == 2007", col("user_id") == 2007, "user_id", "equal", (2007,)),
    Query("price BETWEEN 500 AND 509.99", col("price").between(*BAND), "price", "between", BAND),
]


def query_phase(warehouse: str, query: Query, repeat: int) -> dict[str, tuple[float, int, int]]:
    """(b): per engine the best (seconds, files opened, matching rows) of one query."""
    catalog = Catalog(warehouse)
    indexed, plain = catalog.get_table("bench.indexed"), catalog.get_table("bench.plain")
    files = [f"{warehouse}/bench.db/indexed/bucket-0/{e.file.file_name}" for e in indexed.live_entries()]
    dataset = ds.dataset(files, format="parquet")

    def ours(table):
        plan = table.plan(filter=query.filter)
        got = table.new_read(filter=query.filter).to_arrow(plan.splits)
        return len({f.file_name for s in plan.splits for f in s.files}), got.num_rows

    engines = {
        "lakehouse, indexes": lambda: ours(indexed),
        "full scan (no indexes)": lambda: ours(plain),
        "raw pyarrow dataset": lambda: (len(files), dataset.to_table(filter=query.arrow()).num_rows),
    }
    runs: dict[str, tuple[float, int, int]] = {}

    def keep(name: str, result: tuple[float, int, int]) -> None:
        if name not in runs or result[0] < runs[name][0]:
            runs[name] = result

    for _ in range(repeat):
        for name, run in engines.items():
            seconds, (opened, rows) = timed(run)
            keep(name, (seconds, opened, rows))
        for native in (False, True):
            result = pypaimon_query(
                warehouse, "bench.indexed", native, query.column, query.op, *query.literals
            )
            keep("pypaimon-native" if native else "pypaimon", result)
    rows = {name: n for name, (_, _, n) in runs.items()}
    assert len(set(rows.values())) == 1, f"engines disagree on {query.label}: {rows}"
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N rounds")
    parser.add_argument("--rows-per-file", type=int, default=ROWS_PER_FILE)
    args = parser.parse_args()

    batches = indexed_orders(args.rows_per_file)
    print(f"{FILES} files of {args.rows_per_file:,} orders rows; best of {args.repeat} rounds\n")
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = str(Path(tmp) / "wh")
        catalog = Catalog(warehouse)
        catalog.create_database("bench")
        writes = write_phase(catalog, batches, args.repeat)
        indexed = catalog.get_table("bench.indexed")
        assert indexed.verify_file_indexes().ok

        print(f"(a) writing the {FILES} files")
        for name, seconds in writes.items():
            print(f"  {name:<12} {seconds:7.3f} s")
        ratio = writes["indexed"] / writes["no indexes"]
        print(f"  indexed / unindexed time: {ratio:.2f}x (target <= 1.3x)\n")

        print("(b) queries: files opened, seconds, our speed-up (target: >= 10x vs the full scan)")
        for query in QUERIES:
            runs = query_phase(warehouse, query, args.repeat)
            ours_s, _, rows = runs["lakehouse, indexes"]
            pruned = indexed.plan(filter=query.filter).stats["pruned_by_index"]
            print(f"  {query.label}: {rows} rows, pruned_by_index={pruned}")
            for name, (seconds, opened, _) in runs.items():
                ratio = "" if name == "lakehouse, indexes" else f"  ours {seconds / ours_s:6.1f}x faster"
                print(f"    {name:<24} {opened:>3} files {seconds:8.4f} s{ratio}")
        print()

    print("(c) bloom filter build rate, 1,000,000 values, fpp 0.1")
    for name, rate in bloom_rates().items():
        print(f"  {name:<18} {rate / 1e6:6.1f} M values/s")


if __name__ == "__main__":
    main()
