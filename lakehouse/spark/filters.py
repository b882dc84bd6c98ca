"""Spark's pushed filters as engine predicates, where the translation is exact.

Spark hands a data source the conjuncts of a query's WHERE clause (``pyspark.sql.datasource``
filters: comparisons, IN, IS [NOT] NULL, NOT, string prefix...). Each conjunct the engine evaluates
exactly as Spark would becomes a :class:`~lakehouse.predicate.Predicate`; the engine then prunes
partitions, files by stats and file indexes, and filters rows after the merge, so Spark need not
evaluate it again. Every other conjunct goes back to Spark untouched:

- filters on nested fields, on FLOAT/DOUBLE columns (Spark orders NaN above every number, Arrow's
  comparisons never match it), ``LIKE '%x'`` and ``LIKE '%x%'``;
- NOT of a null-safe equality or of an IN list holding NULL (Spark and SQL NOT differ there);
- literals that do not fit the column's type.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import datasource as sf

from lakehouse.errors import SchemaMismatchError
from lakehouse.predicate import Leaf, Not, Predicate, bind

_COMPARISONS = {
    sf.EqualTo: "eq",
    sf.GreaterThan: "gt",
    sf.GreaterThanOrEqual: "ge",
    sf.LessThan: "lt",
    sf.LessThanOrEqual: "le",
}


def to_predicate(
    filters: Sequence[sf.Filter], types: dict[str, pa.DataType], table: str
) -> tuple[Predicate | None, list[sf.Filter]]:
    """The AND of the filters the engine evaluates exactly, and the filters left to Spark."""
    pushed: list[Predicate] = []
    rejected: list[sf.Filter] = []
    for f in filters:
        pred = _translate(f, types)
        if pred is not None:
            try:
                bind(pred, types, table)  # the literals must fit the column's type
            except SchemaMismatchError:
                pred = None
        if pred is None:
            rejected.append(f)
        else:
            pushed.append(pred)
    if not pushed:
        return None, rejected
    combined = pushed[0]
    for p in pushed[1:]:
        combined = combined & p
    return combined, rejected


def _translate(f: sf.Filter, types: dict[str, pa.DataType], negated: bool = False) -> Predicate | None:
    if isinstance(f, sf.Not):
        inner = _translate(f.child, types, negated=True)
        return None if inner is None else Not(inner)
    column = _column(f, types)
    if column is None:
        return None
    if isinstance(f, sf.IsNull):
        return Leaf("is_null", column)
    if isinstance(f, sf.IsNotNull):
        return Leaf("is_not_null", column)
    if pa.types.is_floating(types[column]):
        return None
    if type(f) in _COMPARISONS:
        return None if f.value is None else Leaf(_COMPARISONS[type(f)], column, (f.value,))
    if isinstance(f, sf.EqualNullSafe):
        if negated:
            return None
        return Leaf("is_null", column) if f.value is None else Leaf("eq", column, (f.value,))
    if isinstance(f, sf.In):
        values = tuple(v for v in f.value if v is not None)
        if negated and len(values) < len(f.value):
            return None  # NOT IN (.., NULL) matches nothing in SQL
        return Leaf("in", column, values) if values else None
    if isinstance(f, sf.StringStartsWith):
        return Leaf("starts_with", column, (f.value,))
    return None


def _column(f: sf.Filter, types: dict[str, pa.DataType]) -> str | None:
    """The top-level column a filter tests, None for nested fields and unknown names."""
    path = getattr(f, "attribute", ())
    return path[0] if len(path) == 1 and path[0] in types else None
