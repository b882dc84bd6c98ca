"""Bucket pruning: the buckets a filter can reach when it fixes every bucket key.

A filter whose conjuncts pin each bucket-key column of a fixed-bucket table to a few values
(``k = 5``, ``k IN (1, 2)``, ``k = 1 OR k = 2``) can only match rows in the buckets those values
hash to; files of other buckets are skipped before their statistics are looked at, as Paimon's
``BucketSelectConverter`` does. The values are hashed by the writers' own bucket function, per
bucket count a file was written with (a rescaled table has files of several).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.predicate import And, Leaf, Or, Predicate

if TYPE_CHECKING:
    from lakehouse.schema import TableSchema

MAX_COMBINATIONS = 1000  # more value combinations than this: no pruning (as Paimon)


class BucketSelector:
    """The buckets of every bucket count that rows with the given key-value combinations hash to."""

    def __init__(self, columns: list[pa.Array], schema: TableSchema) -> None:
        self._columns = columns
        self._types = [f.type for f in schema.fields_named(schema.bucket_keys)]
        self._selected: dict[int, frozenset[int]] = {}

    @classmethod
    def of(cls, schema: TableSchema, bound: Predicate | None) -> BucketSelector | None:
        """The selector of a bound NNF filter on a fixed-bucket table; None when the filter leaves
        some bucket key open (every bucket may match)."""
        if bound is None or schema.core_options.bucket <= 0:
            return None
        keys = schema.bucket_keys
        allowed: dict[str, list[pa.Scalar]] = {}
        for conjunct in _conjuncts(bound):
            pinned = _pinned(conjunct)
            if pinned is None or pinned[0] not in keys:
                continue
            column, values = pinned
            if column in allowed:  # both conjuncts hold: the values in both
                kept = {v.as_py() for v in values}
                values = [v for v in allowed[column] if v.as_py() in kept]
            allowed[column] = values
        if set(allowed) != set(keys) or np.prod([len(allowed[k]) for k in keys]) > MAX_COMBINATIONS:
            return None
        types = schema.arrow_types()
        combinations = list(itertools.product(*(allowed[k] for k in keys)))
        columns = [pa.array([c[i].as_py() for c in combinations], type=types[k]) for i, k in enumerate(keys)]
        return cls(columns, schema)

    def matches(self, bucket: int, total_buckets: int) -> bool:
        """Whether a file of ``bucket`` (of ``total_buckets``) can hold a matching row."""
        if total_buckets <= 0:  # not written with fixed buckets: nothing to tell
            return True
        selected = self._selected.get(total_buckets)
        if selected is None:
            hashed = (
                fixed_buckets(self._columns, self._types, total_buckets).tolist()
                if len(self._columns[0])
                else []
            )
            selected = self._selected[total_buckets] = frozenset(hashed)
        return bucket in selected


def _conjuncts(pred: Predicate) -> list[Predicate]:
    """The predicates all of which ``pred`` requires (nested ANDs flattened)."""
    return [c for child in pred.children for c in _conjuncts(child)] if isinstance(pred, And) else [pred]


def _pinned(pred: Predicate) -> tuple[str, list[pa.Scalar]] | None:
    """The column ``pred`` restricts to finitely many non-null values, and those values: an
    equality, an IN list, or an OR of those on one column; None for anything else."""
    if isinstance(pred, Leaf) and pred.op in ("eq", "in"):
        return pred.column, [v for v in pred.literals if v.is_valid]
    if isinstance(pred, Or):
        parts = [p for p in map(_pinned, pred.children) if p is not None]
        if len(parts) == len(pred.children) and len({column for column, _ in parts}) == 1:
            return parts[0][0], [v for _, values in parts for v in values]
    return None
