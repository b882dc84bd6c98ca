"""Taking rows out of a write buffer without copying it whole.

A write buffer is the concatenation of the pieces it was given: a table of many chunks. Arrow's
``take`` over a chunked column concatenates the column first, so every slice a flush takes would
copy the buffer's column again; :func:`take_rows` takes from each chunk the rows it holds.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """The rows at positions ``rows`` of ``table``, in that order, copying only them."""
    rows = np.asarray(rows, dtype=np.int64)
    batches = table.to_batches()
    if len(batches) <= 1:
        return table.take(pa.array(rows))
    order = None
    if len(rows) > 1 and (np.diff(rows) < 0).any():
        order = np.argsort(rows, kind="stable")
        rows = rows[order]
    starts = np.cumsum([0] + [b.num_rows for b in batches])
    cuts = np.searchsorted(rows, starts).tolist()
    parts = [
        batch.take(pa.array(rows[cuts[i] : cuts[i + 1]] - starts[i]))
        for i, batch in enumerate(batches)
        if cuts[i + 1] > cuts[i]
    ]
    out = pa.Table.from_batches(parts, schema=table.schema)
    if order is not None:  # back to the order asked for: a copy of the taken rows only
        out = out.combine_chunks().take(pa.array(np.argsort(order)))
    return out
