"""Rows of a primary-key merge, ordered by key and then merge order, with each key's row range.

Every merge engine works on the same picture: all versions of a key side by side, oldest first
(``sequence.field`` values, then the sequence number, then the file they came from). Engines
reduce each range to one row with vectorized per-range operations (``np.*.reduceat``, Arrow
hash aggregations over range ids); nothing walks the rows one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import nulls_first
from lakehouse.format.parquet import VALUE_KIND
from lakehouse.mergetree.keyorder import comparable_keys
from lakehouse.rowkind import is_retract


def key_ends(keys: pa.Table, key: list[str], order: np.ndarray) -> np.ndarray:
    """Where each key's rows end (exclusive, int64) once the rows of ``keys`` are put in ``order``
    (a sort by ``key``)."""
    n = len(order)
    change = np.zeros(max(0, n - 1), dtype=bool)
    if n > 1:
        for k in key:
            col = keys.column(k).take(order).combine_chunks()
            change |= np.asarray(pc.not_equal(col.slice(1), col.slice(0, n - 1)).fill_null(True))
    return np.flatnonzero(np.append(change, n > 0)).astype(np.int64) + 1


@dataclass
class KeyGroups:
    """``table`` in merge order (``order``): key ``g`` owns sorted positions ``starts[g]:ends[g]``."""

    table: pa.Table
    order: np.ndarray | None  # None: already in merge order
    starts: np.ndarray
    ends: np.ndarray
    kinds: np.ndarray  # int8 row kind per sorted position
    # the columns taken in merge order so far: an engine asks for a sequence field several times
    _ordered: dict[str, pa.Array] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls, table: pa.Table, key: list[str], order: list[str], kind_column: str, tiebreak: str | None = None
    ) -> KeyGroups:
        """Sort ``table`` by ``key`` (as keys compare) then ``order`` (nulls first, as Paimon's
        sequence comparators), then the ``tiebreak`` column, which rows taken from the groups
        leave out: a take copies every column it is given."""
        idx = None
        keys = comparable_keys(table, key)
        if tiebreak is not None:
            order = [*order, tiebreak]
        if table.num_rows > 1:
            columns = keys
            for c in order:
                columns = columns.append_column(c, table.column(c))
            idx, ends = _merge_order(columns, key, order)
        else:
            ends = np.arange(1, table.num_rows + 1, dtype=np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64) if len(ends) else ends
        kinds = table.column(kind_column).to_numpy().astype(np.int8)
        if tiebreak is not None:
            table = table.drop_columns([tiebreak])
        return cls(table, idx, starts, ends, kinds if idx is None else kinds[idx])

    def column(self, name: str) -> pa.Array:
        """A column in merge order (taken once)."""
        ordered = self._ordered.get(name)
        if ordered is None:
            ordered = self.table.column(name).combine_chunks()
            if self.order is not None:
                ordered = ordered.take(self.order)
            self._ordered[name] = ordered
        return ordered

    def take(self, name: str, sorted_positions: np.ndarray) -> pa.Array:
        """Column ``name`` at ``sorted_positions`` (-1: null): from the column in merge order
        where :meth:`column` took it so already, else straight from ``table`` (a take of the
        rows asked for, not of every row and then of those: a key's winning value, say)."""
        ordered = self._ordered.get(name)
        if ordered is not None:
            return take_or_null(ordered, sorted_positions)
        found = sorted_positions >= 0
        rows = np.where(found, self.positions(found * sorted_positions), -1)
        return take_or_null(self.table.column(name), rows)

    def valid(self, name: str) -> np.ndarray:
        """Whether each row (in merge order) holds a value in column ``name``."""
        ordered = self._ordered.get(name)
        if ordered is not None:
            return np.asarray(ordered.is_valid())
        valid = np.asarray(self.table.column(name).is_valid())
        return valid if self.order is None else valid[self.order]

    def positions(self, sorted_positions: np.ndarray) -> np.ndarray:
        """Where the rows at ``sorted_positions`` are in ``table``."""
        return sorted_positions if self.order is None else self.order[sorted_positions]

    def rows(self, sorted_positions: np.ndarray, columns: list[str] | None = None) -> pa.Table:
        """The rows at ``sorted_positions`` (of ``columns``, default all)."""
        table = self.table if columns is None else self.table.select(columns)
        return table.take(self.positions(sorted_positions))

    def subset(self, keys: np.ndarray) -> tuple[KeyGroups, np.ndarray]:
        """The groups of ``keys`` (ascending) alone, and where their rows are in this merge order."""
        sizes = (self.ends - self.starts)[keys]
        ends = np.cumsum(sizes)
        starts = ends - sizes
        rows = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(starts - self.starts[keys], sizes)
        return KeyGroups(self.table, self.positions(rows), starts, ends, self.kinds[rows]), rows

    @property
    def count(self) -> int:
        return len(self.starts)

    def group_ids(self) -> np.ndarray:
        """The key (range) id of every row."""
        return np.repeat(np.arange(self.count), self.ends - self.starts)

    def last_where(self, mask: np.ndarray) -> np.ndarray:
        """Per key, the last row index where ``mask`` holds (-1: none)."""
        if self.count == 0:
            return np.zeros(0, np.int64)
        idx = np.where(mask, np.arange(len(mask)), -1)
        return np.maximum.reduceat(idx, self.starts)

    def first_where(self, mask: np.ndarray) -> np.ndarray:
        """Per key, the first row index where ``mask`` holds (-1: none)."""
        if self.count == 0:
            return np.zeros(0, np.int64)
        n = len(mask)
        idx = np.minimum.reduceat(np.where(mask, np.arange(n), n), self.starts)
        return np.where(idx == n, -1, idx)

    def history_starts(self, deletes: np.ndarray, complete: np.ndarray) -> np.ndarray:
        """Per row, where the part of its key's history that counts begins: right after the
        key's last ``deletes`` row, at its last ``complete`` row (a row that replaced
        everything before it), or at its first row - whichever is latest."""
        begin = np.maximum(np.maximum(self.last_where(deletes) + 1, self.last_where(complete)), self.starts)
        return np.repeat(begin, self.ends - self.starts)


def _merge_order(columns: pa.Table, key: list[str], order: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``columns`` sorted by ``key`` then ``order`` (nulls first, stable), and
    where each key's rows end in that order.

    A single integer key without nulls (integral and floating-point keys compare as integers) is
    sorted by numpy's stable sort, which merges the presorted runs that a merge concatenates in
    about linear time. A key's versions then stand in the order their runs were concatenated,
    which is mostly ``order`` already (older runs first): only when some are not are the rows of
    keys with several versions put in ``order`` by Arrow's sort. Other keys are sorted by Arrow
    whole."""
    column = columns.column(key[0])
    if len(key) != 1 or column.null_count or not pa.types.is_integer(column.type):
        idx = nulls_first.sort_indices(columns, key + order).to_numpy()
        return idx, key_ends(columns, key, idx)
    values = column.to_numpy()
    idx = np.argsort(values, kind="stable")
    ordered = values[idx]
    last = np.empty(len(idx), bool)  # whether a sorted row is its key's last
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    last[-1:] = True
    ends = (np.flatnonzero(last) + 1).astype(np.int64, copy=False)
    repeated = ~last[:-1]  # a sorted row and the next share their key
    if not order or len(ends) == len(idx) or _in_order(columns, order, idx, repeated):
        return idx, ends
    shared = np.zeros(len(idx), bool)
    shared[:-1] |= repeated
    shared[1:] |= repeated
    positions = np.flatnonzero(shared)  # whole runs of equal keys, in key order
    versions = idx[positions]
    ordered = nulls_first.sort_indices(columns.take(pa.array(versions)), key + order).to_numpy()
    idx[positions] = versions[ordered]
    return idx, ends


def _in_order(columns: pa.Table, order: list[str], idx: np.ndarray, repeated: np.ndarray) -> bool:
    """Whether, in the order ``idx``, each row that shares its key with the next (``repeated``)
    comes before or ties with it by the ``order`` columns; False when one is not integral or
    holds nulls (Arrow's sort decides those). Compares every neighbour pair, which costs less
    than picking out the repeated ones first."""
    before = np.zeros(len(repeated), bool)
    tied = np.ones(len(repeated), bool)
    for name in order:
        column = columns.column(name)
        if column.null_count or not pa.types.is_integer(column.type):
            return False
        values = column.to_numpy()[idx]
        a, b = values[:-1], values[1:]
        before |= tied & (a < b)
        tied &= a == b
    return bool((before | tied | ~repeated).all())


def positions_of(owners: np.ndarray, count: int) -> np.ndarray:
    """For each of ``count`` keys, the index of its entry among ``owners`` (-1: none): scatters
    per-key results that cover only some keys back onto all of them."""
    where = np.full(count, -1, np.int64)
    where[owners] = np.arange(len(owners))
    return where


def take_or_null(values: pa.ChunkedArray | pa.Array, indices: np.ndarray) -> pa.Array:
    """``values[indices]`` with null where an index is -1."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    missing = indices < 0
    return values.take(pa.array(np.where(missing, 0, indices), mask=missing if missing.any() else None))


def drop_retracts(table: pa.Table) -> pa.Table:
    """Rows whose kind is not -U/-D: what a read shows of merged rows."""
    keep = ~is_retract(table.column(VALUE_KIND).to_numpy())
    return table if keep.all() else table.filter(pa.array(keep))
