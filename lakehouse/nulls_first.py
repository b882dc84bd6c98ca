"""Arrow sorts and ranks in ascending order with nulls first, as Paimon orders keys, sequence
fields and sort-compaction columns, on every supported pyarrow release: pyarrow 25 places nulls
per sort key and deprecates the one setting for all keys that earlier releases need."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

PER_KEY = int(pa.__version__.split(".")[0]) >= 25


def sort_indices(data: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The row positions of ``data`` sorted by ``columns`` (stable)."""
    if PER_KEY:
        return pc.sort_indices(data, sort_keys=[(c, "ascending", "at_start") for c in columns])
    return pc.sort_indices(data, sort_keys=[(c, "ascending") for c in columns], null_placement="at_start")


def dense_rank(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each value's rank among the distinct values, from 1 (nulls first: one rank for all)."""
    if PER_KEY:
        return pc.rank(values, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    return pc.rank(values, null_placement="at_start", tiebreaker="dense")
