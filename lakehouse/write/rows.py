"""A write buffer's rows: the pieces it was given, and taking rows out of them.

A write buffer is the concatenation of the pieces it was given: a table of many chunks. Arrow's
``take`` over a chunked column concatenates the column first, so every slice a flush takes would
copy the buffer's column again; :func:`take_rows` takes from each chunk the rows it holds. That
costs a call per chunk, and a flush takes each bucket's rows from every chunk: given in small
batches (a Spark task's 10,000 rows, a stream's), the buffer is joined into blocks as it fills
(:class:`Pieces`), one copy of each row that saves the takes more (a primary-key write of 4.8M
shuffled rows in batches of 10,000 into 60 buckets, on one core: 9.2-9.5 s before, 7.5-7.6 s
with blocks).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# What a writer's buffer joins its small pieces into: blocks this large take as fast as one
# array (blocks of 1 MB took 15% longer), and joining holds one of them twice meanwhile
BLOCK_BYTES = 4 << 20


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


class Pieces:
    """The pieces a writer buffers and their bytes. Consecutive pieces of one schema each smaller
    than ``block`` bytes are joined into one contiguous piece once they add up to it (holding
    one block twice meanwhile); larger pieces stay as given."""

    def __init__(self, block: int) -> None:
        self.block = block
        self.pieces: list[pa.Table] = []
        self.nbytes = 0
        self._run = 0  # how many of the last pieces are small, of one schema
        self._run_bytes = 0

    def add(self, piece: pa.Table) -> None:
        size = piece.nbytes
        self.pieces.append(piece)
        self.nbytes += size
        if size >= self.block or (self._run and piece.schema != self.pieces[-2].schema):
            self._run, self._run_bytes = 0, 0  # a run of small pieces ends before this one
            if size >= self.block:
                return
        self._run += 1
        self._run_bytes += size
        if self._run_bytes >= self.block:
            run = self.pieces[-self._run :]
            del self.pieces[-self._run :]
            self.pieces.append(pa.concat_tables(run).combine_chunks())
            self._run, self._run_bytes = 0, 0

    def __len__(self) -> int:
        return len(self.pieces)

    def take(self) -> list[pa.Table]:
        """The pieces, leaving none."""
        pieces = self.pieces
        self.pieces, self.nbytes, self._run, self._run_bytes = [], 0, 0, 0
        return pieces
