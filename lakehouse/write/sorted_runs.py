"""The sorted runs of a primary-key write buffer, produced and merged in bounded memory.

A flush turns one bucket's buffered rows into a sorted run: one row per key, merged by the
table's merge engine in arrival order (``SortBufferWriteBuffer.forEach``). The run comes out as
slices of complete keys of about ``slice_bytes``: the bucket's rows are ordered once by key
alone, and only one slice of them is copied and merged at a time, so that a flush never copies
the buffer whole. A bucket whose buffers were spilled (``write-buffer-spillable``, the last one
too once the bucket has spilled) merges its spilled runs as compaction merges level-0 runs, at
most ``sort-spill-threshold`` runs at once, each read a batch at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.format import parquet
from lakehouse.mergetree.engine import MergeEngine
from lakehouse.mergetree.groups import key_ends
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.mergetree.spill import SpillDir, bounded_runs
from lakehouse.mergetree.stream import merged_steps
from lakehouse.write.rows import take_rows


def buffered_run(
    engine: MergeEngine,
    data: pa.Table,
    kinds: pa.Array,
    rows: np.ndarray,
    base: int,
    slice_bytes: int,
) -> Iterator[pa.Table]:
    """The rows ``rows`` of ``data`` (positions in arrival order, numbered ``base + position``)
    merged per key, in key order, a slice of complete keys at a time."""
    slice_rows = max(1024, slice_bytes * max(1, data.num_rows) // max(1, data.nbytes))
    if len(rows) <= slice_rows:
        yield _merged(engine, data, kinds, rows, base)
        return
    keys = comparable_keys(take_rows(data.select(engine.key), rows), engine.key)
    order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in engine.key]).to_numpy()
    ends = key_ends(keys, engine.key, order)
    del keys
    start = 0
    while start < len(rows):
        # the end of the last key that starts within the next slice_rows rows
        stop = ends[max(0, np.searchsorted(ends, start + slice_rows, side="right") - 1)]
        stop = max(stop, ends[np.searchsorted(ends, start, side="right")])
        yield _merged(engine, data, kinds, rows[np.sort(order[start:stop])], base)
        start = stop


def _merged(engine: MergeEngine, data: pa.Table, kinds: pa.Array, rows: np.ndarray, base: int) -> pa.Table:
    """One row per key of the rows ``rows`` (ascending positions: arrival order). Engines that
    keep versions whole pick them from the deciding columns: only the kept rows are copied."""
    if engine.keeps_versions:
        deciding = _versions(data.select(engine.deciding_columns), kinds, rows, base)
        return _versions(data, kinds, rows[engine.winners(deciding, arrival_order=True)], base)
    return engine.merge(_versions(data, kinds, rows, base), arrival_order=True)


def _versions(data: pa.Table, kinds: pa.Array, rows: np.ndarray, base: int) -> pa.Table:
    """The rows ``rows`` of ``data`` with their sequence numbers and kinds."""
    versions = take_rows(data, rows).append_column(parquet.SEQUENCE_NUMBER, pa.array(rows + base))
    return versions.append_column(parquet.VALUE_KIND, kinds.take(pa.array(rows)))


def merged_runs(
    engine: MergeEngine, runs: list[Iterator[pa.Table]], threshold: int, spill: Callable[[], SpillDir]
) -> Iterator[pa.Table]:
    """Sorted runs (oldest first, each key-unique) merged into one, step by step in key order;
    more than ``threshold`` runs are first merged into spilled runs."""
    runs = bounded_runs(runs, threshold, spill, lambda some: merge_sorted(engine, some))
    return merge_sorted(engine, runs)


def merge_sorted(engine: MergeEngine, runs: list[Iterator[pa.Table]]) -> Iterator[pa.Table]:
    """The merge of key-unique sorted runs, keeping deletes (the output is not the oldest data).
    A write numbers its rows as they arrive, so each run's rows are newer than all of the runs
    before it: each key's versions come in order (``arrival_order``)."""
    if len(runs) == 1:
        yield from runs[0]
        return
    yield from merged_steps(
        runs, engine.key, functools.partial(engine.merge, arrival_order=True), tagged=False
    )
