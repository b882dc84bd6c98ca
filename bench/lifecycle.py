"""Lifecycle benchmark: snapshot expiration and planning after many commits.

Builds an append table of ``--commits`` commits (default 1,000), each adding one small file to
each of ``--partitions`` partitions (default 10: 10,000 live files), then times:
- planning the latest snapshot, ours (cold: manifest cache emptied; and warm) against pypaimon's
  ``new_scan().plan()`` on the same table;
- one overwrite replacing every file, then expiring all snapshots but the last (``retain_min=1``,
  ``max_deletes`` = all): time, snapshots expired and files removed.

    .venv/bin/python bench/lifecycle.py [--commits N] [--partitions P]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import pyarrow as pa
from core import best_of

from lakehouse import Catalog
from lakehouse.manifest import files as manifest_files

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("p", pa.string()), pa.field("v", pa.float64())])


def batch(commit: int, partitions: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([commit * partitions + i for i in range(partitions)], pa.int64()),
            "p": pa.array([f"p{i}" for i in range(partitions)]),
            "v": pa.array([float(commit)] * partitions),
        },
        schema=SCHEMA,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as warehouse:
        cat = Catalog(warehouse)
        cat.create_database("db")
        t = cat.create_table("db.t", SCHEMA, partition_keys=["p"])
        start = time.perf_counter()
        for c in range(args.commits):
            t.write(batch(c, args.partitions))
        print(
            f"built {args.commits} commits, {args.commits * args.partitions} files in "
            f"{time.perf_counter() - start:.1f} s"
        )

        def cold_plan():
            manifest_files._CACHE.clear()
            return t.plan()

        plan = t.plan()
        ours_cold, ours_warm = best_of(cold_plan)[0], best_of(t.plan)[0]
        from pypaimon import CatalogFactory

        theirs_table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
        theirs_splits = theirs_table.new_read_builder().new_scan().plan().splits()
        theirs = best_of(lambda: theirs_table.new_read_builder().new_scan().plan())[0]
        print(
            f"plan latest ({plan.stats['files_selected']} files; pypaimon {len(theirs_splits)} splits): "
            f"ours cold {ours_cold * 1000:.0f} ms, warm {ours_warm * 1000:.0f} ms, "
            f"pypaimon {theirs * 1000:.0f} ms -> {theirs / ours_cold:.1f}x (cold), "
            f"{theirs / ours_warm:.1f}x (warm)"
        )

        t.write(batch(args.commits, args.partitions), overwrite=True)
        snapshots = len(t.snapshots.snapshot_ids())
        manifest_files._CACHE.clear()
        start = time.perf_counter()
        result = t.expire_snapshots(retain_min=1, older_than_ms=2**62, max_deletes=snapshots)
        took = time.perf_counter() - start
        d = result.deleted
        print(
            f"expire {result.snapshots_expired} snapshots in {took:.2f} s: {d.data_files} data files, "
            f"{d.metadata_files} manifests/lists removed; table reads {t.read().num_rows} rows"
        )


if __name__ == "__main__":
    main()
