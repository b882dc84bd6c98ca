"""Write-path memory benchmark: peak RSS and wall time of large writes, one subprocess per run.

Each run writes N generated orders rows (``bench/core.py``'s columns, random primary keys) into a
fresh table, fed as a ``RecordBatchReader`` of 64K-row batches so that the input itself is never
in memory: what the process holds is the engine's. The child reports its peak RSS (``VmHWM``) and
the seconds the write took; the parent prints them with the budget the engine aims at
(2 x ``write-buffer-size`` + 300 MB). Scenarios:

- ``pk``: primary-key table, bucket B, one write (one commit) of N rows;
- ``append``: append table, bucket-unaware, one write of N rows;
- ``partitions``: the same into 2,000 partitions (``user_id`` modulo 2,000), which a write
  cannot keep a file open for each (``write-max-writers-to-spill``);
- ``compact``: the ``pk`` table after a second write of N/10 upserts, then ``compact(full=True)``
  (timed and measured alone: the child's peak after the writes is reset before it).

    .venv/bin/python bench/memory.py [--rows 4M,12M,24M] [--buckets 4,16] [--only pk,append]
        [--option write-buffer-spillable=false]

Arrow's allocator is the children's too: the engine's (jemalloc) unless
``ARROW_DEFAULT_MEMORY_POOL`` names one; ``ARROW_DEFAULT_MEMORY_POOL=mimalloc .venv/bin/python
bench/memory.py`` measures a write under pyarrow's own default.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from core import DAYS, REGIONS, STATUSES, WORDS, pick

from lakehouse import Catalog

BATCH = 64 * 1024
BUFFER_MB = 256
SCENARIOS = ["pk", "append", "partitions", "compact"]
PARTITIONS = 2_000


def batches(rows: int, seed: int, key_space: int) -> Iterator[pa.RecordBatch]:
    """Orders rows with keys drawn at random from ``key_space``, generated batch by batch."""
    rng = np.random.default_rng(seed)
    base = np.datetime64("2024-01-01T00:00:00", "us")
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        words = [pick(WORDS, rng.integers(0, len(WORDS), n)) for _ in range(3)]
        comment = pc.binary_join_element_wise(*words, " ")
        yield pa.RecordBatch.from_pydict(
            {
                "order_id": pa.array(rng.integers(0, key_space, n, dtype=np.int64)),
                "user_id": pa.array(rng.integers(0, 100_000, n, dtype=np.int64)),
                "status": pick(STATUSES, rng.integers(0, len(STATUSES), n)),
                "region": pick(REGIONS, rng.integers(0, len(REGIONS), n)),
                "price": pa.array(np.round(rng.uniform(1, 1000, n), 2)),
                "ts": pa.array(base + rng.integers(0, 4 * 86_400_000_000, n).astype("timedelta64[us]")),
                "dt": pick(DAYS, rng.integers(0, len(DAYS), n)),
                "comment": comment,
            },
            schema=SCHEMA,
        )


SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        ("user_id", pa.int64()),
        ("status", pa.string()),
        ("region", pa.string()),
        ("price", pa.float64()),
        ("ts", pa.timestamp("us")),
        pa.field("dt", pa.string(), nullable=False),
        ("comment", pa.string()),
    ]
)


def reader(rows: int, seed: int, key_space: int) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(SCHEMA, batches(rows, seed, key_space))


def partitioned(rows: int, seed: int) -> pa.RecordBatchReader:
    """The orders with a partition column ``p``: their ``user_id`` modulo ``PARTITIONS``."""
    schema = SCHEMA.append(pa.field("p", pa.int64(), nullable=False))
    return pa.RecordBatchReader.from_batches(
        schema,
        (
            pa.RecordBatch.from_arrays(
                [*b.columns, pa.array(b.column("user_id").to_numpy() % PARTITIONS)], schema=schema
            )
            for b in batches(rows, seed, rows)
        ),
    )


def peak_rss() -> int:
    """This process's peak resident set (VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    """Start a new peak from the current resident set (Linux: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def child(scenario: str, rows: int, buckets: int, options: dict[str, str]) -> dict:
    """One run, in this process: returns seconds and peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(tmp)
        catalog.create_database("m")
        keyed = scenario in ("pk", "compact")
        data = partitioned(rows, 1) if scenario == "partitions" else reader(rows, 1, rows)
        table = catalog.create_table(
            "m.t",
            data.schema,
            primary_keys=["order_id", "dt"] if keyed else [],
            partition_keys=["p"] if scenario == "partitions" else ["dt"],
            options={"bucket": str(buckets) if keyed else "-1", **options},
        )
        if scenario == "compact":
            table.write(data)
            table.write(reader(rows // 10, 2, rows))
            reset_peak()
        start = time.perf_counter()
        if scenario == "compact":
            table.compact(full=True)
        else:
            table.write(data)
        return {"seconds": time.perf_counter() - start, "peak": peak_rss()}


def run(scenario: str, rows: int, buckets: int, options: dict[str, str]) -> dict:
    args = [sys.executable, __file__, "--child", scenario, str(rows), str(buckets), json.dumps(options)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        scenario, rows, buckets, options = sys.argv[2:6]
        print(json.dumps(child(scenario, int(rows), int(buckets), json.loads(options))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="4M,12M,24M")
    parser.add_argument("--buckets", default="4,16")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--option", action="append", default=[], help="table option key=value")
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    buffer_mb = BUFFER_MB
    if "write-buffer-size" in options:
        buffer_mb = int(options["write-buffer-size"].lower().removesuffix("mb").strip())
    budget = 2 * buffer_mb + 300
    pool = pa.default_memory_pool().backend_name  # ARROW_DEFAULT_MEMORY_POOL, as the children see it
    print(f"budget: 2 x write-buffer-size + 300 MB = {budget} MB; options {options or 'default'}; {pool}\n")
    print(f"{'scenario':<10}{'rows':>12}{'buckets':>9}{'seconds':>10}{'peak RSS MB':>13}  within budget")
    for scenario in args.only.split(","):
        for rows in map(count, args.rows.split(",")):
            for buckets in [1] if scenario in ("append", "partitions") else map(int, args.buckets.split(",")):
                got = run(scenario, rows, buckets, options)
                peak = got["peak"] / 2**20
                print(
                    f"{scenario:<10}{rows:>12,}{buckets:>9}{got['seconds']:>10.1f}{peak:>13.0f}  "
                    f"{'yes' if peak <= budget else 'NO'}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
