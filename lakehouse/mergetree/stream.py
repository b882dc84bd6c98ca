"""A k-way merge of sorted runs in Arrow batches, in bounded memory.

Every run is read a batch at a time. A step takes, from every buffered run, the rows whose key
is at most the smallest "last buffered key" among runs that still have rows to come: no later
batch can hold such a key, so those rows are complete and are merged by the engine with one
vectorized sort. Memory stays at about one batch per run whatever the bucket's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.format.dictionaries import concat
from lakehouse.io.memory import release_arrow_freed
from lakehouse.mergetree.engine import ORDINAL
from lakehouse.mergetree.keyorder import comparable

R = TypeVar("R")


def merge_steps(
    runs: Sequence[Iterator[pa.Table]], key: list[str], tagged: bool = True
) -> Iterator[pa.Table]:
    """The complete versions of the next keys of sorted runs (each a batch iterator), step by
    step in key order, each key's versions run after run. ``tagged``: each row carries its run's
    ordinal unless the batches carry their own (``ORDINAL``: later wins ties); untagged steps
    suit runs whose rows are newer run after run (a stable sort by key alone then puts each
    key's versions in order). Each step is ready for one merge. A run whose batch a step
    took whole is asked for its next one before the step is handed on: a run that ends there
    no longer bounds the step, which then takes more of the others (runs of one batch each, a
    small bucket's, merge in one step, not one per run)."""
    buffers = [_next_batch(run) for run in runs]  # None once the run has ended
    while True:
        taken: list[pa.Table] = []
        while any(buffer is not None for buffer in buffers):
            live = [(i, buffer) for i, buffer in enumerate(buffers) if buffer is not None]
            bound = min(last_key(buffer, key) for _, buffer in live)
            emptied = []
            for i, buffer in live:
                count = count_at_most(buffer, key, bound)
                if count:
                    step = buffer.slice(0, count)
                    taken.append(_tagged(step, i) if tagged else step)
                    buffers[i] = buffer.slice(count)
                    if count == buffer.num_rows:
                        emptied.append(i)
            for i in emptied:
                buffers[i] = _next_batch(runs[i])
            if not emptied or any(buffers[i] is not None for i in emptied):
                break  # a run has a new batch: the next step starts from it
        if not taken:
            return
        yield concat(taken)


def merged_steps(
    runs: Sequence[Iterator[pa.Table]], key: list[str], merge: Callable[[pa.Table], R], tagged: bool = True
) -> Iterator[R]:
    """``merge`` of each step of :func:`merge_steps`, the step's versions dropped and what the
    merge freed handed back before the result goes on (a job merging a whole bucket would
    otherwise keep every page it freed: :func:`~lakehouse.io.memory.release_arrow_freed`)."""
    for versions in merge_steps(runs, key, tagged):
        merged = merge(versions)
        del versions
        release_arrow_freed()
        yield merged


def _next_batch(run: Iterator[pa.Table]) -> pa.Table | None:
    """The run's next batch with rows, None once it has none left."""
    for batch in run:
        if batch.num_rows:
            return batch
    return None


def _tagged(step: pa.Table, run: int) -> pa.Table:
    """``step`` with each row's run ordinal, unless its rows carry their own."""
    if ORDINAL in step.column_names:
        return step
    return step.append_column(ORDINAL, pa.array(np.full(step.num_rows, run, np.int32)))


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
            count = 0
            chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
            for chunk in chunks:  # each in place: a chunked column's to_numpy copies them all
                values = chunk.to_numpy()
                found = int(np.searchsorted(values, bound[0], side="right"))
                count += found
                if found < len(values):
                    break
            return count
    below = np.zeros(table.num_rows, bool)
    equal = np.ones(table.num_rows, bool)
    for name, value in zip(key, bound, strict=True):
        column = comparable(table.column(name))
        scalar = pa.scalar(value, column.type)
        below |= equal & np.asarray(pc.less(column, scalar))
        equal &= np.asarray(pc.equal(column, scalar))
    return int((below | equal).sum())
