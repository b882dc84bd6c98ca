"""Merging rows of a primary-key table: the deduplicate engine (the latest version of a key wins).

Both the writer (folding duplicate keys of one write before flushing a sorted run) and the
reader (merging the sorted runs of a bucket) use :func:`last_per_key_indices`; it sorts with Arrow
and finds run boundaries with vectorized comparisons, never touching rows one by one, and the
rows are gathered once at the end.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RETRACT_KINDS = (1, 3)  # -U and -D: RowKind.isRetract


def run_ends(columns: list[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Mask of rows that end a run of equal values across ``columns`` (rows already sorted)."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=bool)
    change = np.zeros(n - 1, dtype=bool)
    for col in columns:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if n > 1:
            change |= np.asarray(pc.not_equal(col.slice(1), col.slice(0, n - 1)).fill_null(True))
    return np.append(change, True)


def last_per_key_indices(table: pa.Table, key_columns: list[str], order_columns: list[str]) -> np.ndarray:
    """Indices sorting ``table`` by key, then ``order_columns`` (stably), keeping each key's last row."""
    if table.num_rows <= 1:
        return np.arange(table.num_rows)
    sort_keys = [(c, "ascending") for c in key_columns + order_columns]
    order = pc.sort_indices(table.select(key_columns + order_columns), sort_keys=sort_keys)
    keys = table.select(key_columns).take(order)
    ends = run_ends([keys.column(c) for c in key_columns])
    order = order.to_numpy()
    return order if ends.all() else order[ends]


def live_indices(table: pa.Table, indices: np.ndarray, kind_column: str) -> np.ndarray:
    """``indices`` without the rows whose kind is -U or -D (after merging, a deleted key is absent)."""
    kinds = table.column(kind_column).take(pa.array(indices)).to_numpy()
    retract = np.isin(kinds, RETRACT_KINDS)
    return indices[~retract] if retract.any() else indices


def deduplicate(
    runs: list[pa.Table], key_columns: list[str], order_columns: list[str], kind_column: str
) -> pa.Table:
    """The deduplicate engine over sorted runs: each key's last row by ``order_columns``, deletes dropped.

    A single run is already sorted and key-unique (every data file is), so it is only filtered.
    """
    table = runs[0] if len(runs) == 1 else pa.concat_tables(runs)
    if len(runs) == 1:
        picked = np.arange(table.num_rows)
    else:
        picked = last_per_key_indices(table, key_columns, order_columns)
    live = live_indices(table, picked, kind_column)
    return table if len(live) == table.num_rows else table.take(pa.array(live))
