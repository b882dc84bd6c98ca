"""A k-way merge of sorted runs in Arrow batches, in bounded memory.

Every run is read a batch at a time. A step takes, from every buffered run, the rows whose key
is at most the smallest "last buffered key" among runs that still have rows to come: no later
batch can hold such a key, so those rows are complete and are merged by the engine with one
vectorized sort. Memory stays at about one batch per run whatever the bucket's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.format.dictionaries import concat
from lakehouse.mergetree.engine import ORDINAL
from lakehouse.mergetree.keyorder import comparable


def merge_steps(runs: Sequence[Iterator[pa.Table]], key: list[str]) -> Iterator[pa.Table]:
    """The complete versions of the next keys of sorted runs (each a batch iterator), step by
    step in key order, tagged with their run's ordinal unless the batches carry their own
    (``ORDINAL``: later wins ties): each step is ready for one merge."""
    buffers: list[pa.Table | None] = [None] * len(runs)
    done = [False] * len(runs)
    while True:
        for i, run in enumerate(runs):
            buffer = buffers[i]
            while not done[i] and (buffer is None or buffer.num_rows == 0):
                buffer = next(run, None)
                done[i] = buffer is None
            buffers[i] = buffer
        live = [(i, buffer) for i, buffer in enumerate(buffers) if buffer is not None and buffer.num_rows]
        if not live:
            return
        bounds = [last_key(buffer, key) for i, buffer in live if not done[i]]
        taken = []
        for i, buffer in live:
            count = buffer.num_rows if not bounds else count_at_most(buffer, key, min(bounds))
            if count:
                step = buffer.slice(0, count)
                if ORDINAL not in step.column_names:
                    step = step.append_column(ORDINAL, pa.array(np.full(count, i, np.int32)))
                taken.append(step)
                buffers[i] = buffer.slice(count)
        yield concat(taken)


def first_key(table: pa.Table, key: list[str]) -> tuple:
    """The key of the first row, as keys compare (:mod:`lakehouse.mergetree.keyorder`)."""
    return key_at(table, key, 0)


def last_key(table: pa.Table, key: list[str]) -> tuple:
    """The key of the last row, as keys compare."""
    return key_at(table, key, table.num_rows - 1)


def key_at(table: pa.Table, key: list[str], row: int) -> tuple:
    return tuple(comparable(table.column(k).slice(row, 1))[0].as_py() for k in key)


def count_at_most(table: pa.Table, key: list[str], bound: tuple) -> int:
    """How many leading rows of key-sorted ``table`` have a key <= ``bound`` (lexicographic, as
    keys compare: ``bound`` from :func:`last_key`). A single integral key without nulls is
    found by binary search; other keys are compared column by column."""
    if len(key) == 1:
        column = comparable(table.column(key[0]))
        if pa.types.is_integer(column.type) and not column.null_count:
            return int(np.searchsorted(column.to_numpy(), bound[0], side="right"))
    below = np.zeros(table.num_rows, bool)
    equal = np.ones(table.num_rows, bool)
    for name, value in zip(key, bound, strict=True):
        column = comparable(table.column(name))
        scalar = pa.scalar(value, column.type)
        below |= equal & np.asarray(pc.less(column, scalar))
        equal &= np.asarray(pc.equal(column, scalar))
    return int((below | equal).sum())
