"""Merging rows of a primary-key table: the deduplicate engine (the latest version of a key wins).

Both the writer (folding duplicate keys of one write before flushing a sorted run) and the
reader (merging the sorted runs of a bucket) use :func:`last_per_key`; it sorts with Arrow and
finds run boundaries with vectorized comparisons, never touching rows one by one.
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


def last_per_key(table: pa.Table, key_columns: list[str], order_columns: list[str]) -> pa.Table:
    """Sort by key, then by ``order_columns`` (stable), and keep the last row of every key."""
    if table.num_rows <= 1:
        return table
    sort_keys = [(c, "ascending") for c in key_columns + order_columns]
    ordered = table.take(pc.sort_indices(table, sort_keys=sort_keys))
    ends = run_ends([ordered.column(c) for c in key_columns])
    if ends.all():
        return ordered
    return ordered.filter(pa.array(ends))


def drop_retracts(table: pa.Table, kind_column: str) -> pa.Table:
    """Remove -U/-D rows (after merging, a deleted key is simply absent)."""
    kinds = table.column(kind_column)
    mask = pc.invert(pc.is_in(kinds, value_set=pa.array(RETRACT_KINDS, kinds.type)))
    return table.filter(mask)
