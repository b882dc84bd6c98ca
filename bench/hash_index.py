"""Dynamic-bucket assigner benchmark: 10,000,000 distinct keys into one partition.

Generates int64 primary keys, hashes them as Paimon does (``BinaryRow.hashCode`` of the key row,
:func:`lakehouse.bucket.dynamic.key_hashes`) in batches of 1,000,000, and with
``dynamic-bucket.target-row-num`` = 2,000,000 (so 5 buckets) reports
(a) keys/s assigning the new keys, and re-assigning the same keys once known (target >= 2M keys/s);
(b) bytes per key held by the index: the ``nbytes`` of its arrays, checked with ``tracemalloc``
    and the resident-set growth (target <= 12);
(c) the same with a per-key Python dict doing Java's rules, as a baseline.

    .venv/bin/python bench/hash_index.py [--keys N] [--batch N] [--baseline-keys N]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import resource
import time
import tracemalloc

import numpy as np
import pyarrow as pa

from lakehouse.bucket.dynamic import DynamicBucketOptions, HashBucketAssigner, key_hashes
from lakehouse.types import BIGINT

TARGET_ROW_NUM = 2_000_000


def hashed_batches(keys: int, batch: int) -> tuple[list[np.ndarray], float]:
    """Key hashes of ``keys`` distinct scrambled int64 keys, per batch, and the hashing time."""
    ids = np.arange(keys, dtype=np.int64) * 2_654_435_761 + 17  # distinct, spread over the int64 range
    start = time.perf_counter()
    batches = [
        key_hashes(pa.table({"id": ids[i : i + batch]}), ["id"], [BIGINT]) for i in range(0, keys, batch)
    ]
    return batches, time.perf_counter() - start


def assign_all(assigner: HashBucketAssigner, batches: list[np.ndarray]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    buckets = [assigner.assign("p", 0, hashes) for hashes in batches]
    return time.perf_counter() - start, np.concatenate(buckets)


def rss_bytes() -> int:
    """Resident set size, after handing freed heap memory back to the system."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def dict_assign(table: dict[int, int], counts: list[int], hashes: np.ndarray) -> list[int]:
    """Java's rules one key at a time over a dict (one assigner, unlimited buckets)."""
    out = []
    for h in hashes.tolist():
        bucket = table.get(h)
        if bucket is None:
            if counts[-1] >= TARGET_ROW_NUM:
                counts.append(0)
            bucket = len(counts) - 1
            counts[-1] += 1
            table[h] = bucket
        out.append(bucket)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=1_000_000)
    parser.add_argument("--baseline-keys", type=int, default=10_000_000)
    args = parser.parse_args()
    options = DynamicBucketOptions(target_row_num=TARGET_ROW_NUM)

    batches, hashing = hashed_batches(args.keys, args.batch)
    distinct = len(np.unique(np.concatenate(batches)))
    print(f"{args.keys:,} keys in batches of {args.batch:,}: {distinct:,} distinct key hashes")
    print(f"  hashing (key_hashes)     {hashing:6.2f} s  {args.keys / hashing / 1e6:6.2f} M keys/s")

    rss_before = rss_bytes()
    assigner = HashBucketAssigner(options)
    new_time, first = assign_all(assigner, batches)
    known_time, again = assign_all(assigner, batches)
    assert np.array_equal(first, again)
    counts = np.bincount(first)
    del first, again
    rss_growth = rss_bytes() - rss_before
    print(f"  assign new keys          {new_time:6.2f} s  {args.keys / new_time / 1e6:6.2f} M keys/s")
    print(f"  re-assign known keys     {known_time:6.2f} s  {args.keys / known_time / 1e6:6.2f} M keys/s")
    print(f"  hash + assign new keys            {args.keys / (hashing + new_time) / 1e6:6.2f} M keys/s")
    print(f"  buckets {len(counts)}, keys per bucket {counts.tolist()}")
    print(f"  index arrays (nbytes)    {assigner.nbytes / distinct:6.2f} bytes/key")
    print(f"  resident set growth      {rss_growth / distinct:6.2f} bytes/key")
    del assigner

    tracemalloc.start()
    assigner = HashBucketAssigner(options)
    for hashes in batches:
        assigner.assign("p", 0, hashes)
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"  tracemalloc: held        {held / distinct:6.2f} bytes/key, peak {peak / distinct:.2f} bytes/key"
    )
    del assigner

    n = min(args.baseline_keys, args.keys)
    base = np.concatenate(batches)[:n]
    table: dict[int, int] = {}
    counts_list = [0]
    rss_before = rss_bytes()
    start = time.perf_counter()
    for i in range(0, n, args.batch):
        dict_assign(table, counts_list, base[i : i + args.batch])
    dict_new = time.perf_counter() - start
    dict_rss = rss_bytes() - rss_before
    start = time.perf_counter()
    for i in range(0, n, args.batch):
        dict_assign(table, counts_list, base[i : i + args.batch])
    dict_known = time.perf_counter() - start
    print(f"dict baseline, {n:,} keys:")
    print(f"  assign new keys          {dict_new:6.2f} s  {n / dict_new / 1e6:6.2f} M keys/s")
    print(f"  re-assign known keys     {dict_known:6.2f} s  {n / dict_known / 1e6:6.2f} M keys/s")
    print(f"  resident set growth      {dict_rss / len(table):6.2f} bytes/key")


if __name__ == "__main__":
    main()
