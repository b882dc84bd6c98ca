"""REST catalog load test, on loopback: ``lakehouse rest-catalog`` in a process of its own,
clients in others, each phase bounded in time (it stops by itself).

- ``loadTable``: client processes issue ``GET .../tables/<t>`` back to back (what every job does
  when it opens a table): requests per second, median and p99 latency;
- commit: writer processes append one-row commits to one table through the server
  (``POST .../commit``, conflicts retried), timed per write; the same writers on another new
  table of the same warehouse through the filesystem catalog (no server: a create-if-absent of
  the snapshot file) for the ratio. Every row is then counted: none lost, none twice.

    .venv/bin/python bench/rest.py [--seconds S] [--clients N] [--writers N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from lakehouse import Catalog
from lakehouse.rest.client import connect
from lakehouse.spark.loopback import LOOPBACK, accepts, free_port, stop_groups, wait_until

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int32())])


def load_tables(uri: str, token: str, seconds: float) -> list[float]:
    """One client: ``GET`` the table until the time is up; each request's seconds."""
    endpoint, _ = connect(uri, {"token": token})
    path = endpoint.resources.table("bench", "t")
    took = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        endpoint.request("GET", path)
        took.append(time.perf_counter() - start)
    return took


def commit(warehouse: str, token: str | None, name: str, writer: int, seconds: float) -> list[float]:
    """One writer: one-row appends to table ``name`` until the time is up; each write's seconds."""
    catalog = Catalog(warehouse, options={"token": token} if token else None)
    table = catalog.load_table(name)
    took = []
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        rows = pa.table({"id": [i], "writer": [writer]}, schema=SCHEMA)
        start = time.perf_counter()
        table.write(rows)
        took.append(time.perf_counter() - start)
        i += 1
    return took


def summary(name: str, took: list[list[float]], seconds: float) -> float:
    """Print a phase's rate and latencies; its rate per second."""
    flat = sorted(t for part in took for t in part)
    rate = len(flat) / seconds
    p99 = flat[min(len(flat) - 1, int(len(flat) * 0.99))]
    print(f"{name:<34} {rate:>9.1f}/s  median {statistics.median(flat) * 1000:7.2f} ms  "
          f"p99 {p99 * 1000:7.2f} ms  ({len(flat)} in {seconds:.0f} s)")  # fmt: skip
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=4, help="loadTable client processes")
    parser.add_argument("--writers", type=int, default=4, help="committing processes")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lakehouse-bench-rest-"))
    warehouse, token, port = str(root / "warehouse"), secrets.token_hex(16), free_port()
    (root / "grants.json").write_text(json.dumps({"tokens": {token: {"*": "write"}}}))
    command = [sys.executable, "-m", "lakehouse.cli", "rest-catalog", "--warehouse", warehouse,
               "--port", str(port), "--grants", str(root / "grants.json")]  # fmt: skip
    with (root / "server.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: accepts(port), [server], 60, f"the server did not start; see {root}/server.log")
        uri = f"http://{LOOPBACK}:{port}"
        catalog = Catalog(uri, options={"token": token})
        catalog.create_database("bench")
        catalog.create_table("bench.t", SCHEMA).write(pa.table({"id": [0], "writer": [0]}, schema=SCHEMA))
        for name in ("bench.via_rest", "bench.via_files"):  # the same start for both
            catalog.create_table(name, SCHEMA)
        print(f"loopback, {args.seconds:.0f} s per phase; server log in {root}/server.log")
        context = multiprocessing.get_context("spawn")
        with context.Pool(max(args.clients, args.writers)) as pool:
            loads = pool.starmap(load_tables, [(uri, token, args.seconds)] * args.clients)
            summary(f"loadTable, {args.clients} clients", loads, args.seconds)
            through = pool.starmap(commit, [(uri, token, "bench.via_rest", w, args.seconds)
                                            for w in range(args.writers)])  # fmt: skip
            rest = summary(f"commit via REST, {args.writers} writers", through, args.seconds)
            direct = pool.starmap(commit, [(warehouse, None, "bench.via_files", w, args.seconds)
                                           for w in range(args.writers)])  # fmt: skip
            files = summary(f"commit to files, {args.writers} writers", direct, args.seconds)
        print(f"REST commits / filesystem commits: {rest / files:.2f}x")
        for name, took in (("bench.via_rest", through), ("bench.via_files", direct)):
            rows = catalog.load_table(name).row_count()
            assert rows == sum(map(len, took)), f"{name}: rows lost or duplicated"
    finally:
        stop_groups([server], grace_s=10)


if __name__ == "__main__":
    main()
