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

from lakehouse import Predicate, col


def to_predicate(filters: Sequence[sf.Filter], schema: pa.Schema) -> tuple[Predicate | None, list[sf.Filter]]:
    """The AND of the filters the engine evaluates exactly on a table of ``schema``, and the
    filters left to Spark."""
    types = {f.name: f.type for f in schema}
    pushed: list[Predicate] = []
    rejected: list[sf.Filter] = []
    for f in filters:
        pred = _translate(f, types)
        if pred is not None and pred.fits(types):  # the literals must fit the column's type
            pushed.append(pred)
        else:
            rejected.append(f)
    if not pushed:
        return None, rejected
    combined = pushed[0]
    for p in pushed[1:]:
        combined = combined & p
    return combined, rejected


def _translate(f: sf.Filter, types: dict[str, pa.DataType], negated: bool = False) -> Predicate | None:
    if isinstance(f, sf.Not):
        inner = _translate(f.child, types, negated=True)
        return None if inner is None else ~inner
    column = _column(f, types)
    if column is None:
        return None
    c = col(column)
    if isinstance(f, sf.IsNull):
        return c.is_null()
    if isinstance(f, sf.IsNotNull):
        return c.is_not_null()
    if pa.types.is_floating(types[column]):
        return None
    if isinstance(f, sf.EqualNullSafe):
        if negated:
            return None
        return c.is_null() if f.value is None else c == f.value
    if isinstance(f, sf.In):
        values = [v for v in f.value if v is not None]
        if negated and len(values) < len(f.value):
            return None  # NOT IN (.., NULL) matches nothing in SQL
        return c.isin(values) if values else None
    if isinstance(f, sf.StringStartsWith):
        return c.startswith(f.value)
    value = getattr(f, "value", None)
    if value is None:
        return None
    if isinstance(f, sf.EqualTo):
        return c == value
    if isinstance(f, sf.GreaterThan):
        return c > value
    if isinstance(f, sf.GreaterThanOrEqual):
        return c >= value
    if isinstance(f, sf.LessThan):
        return c < value
    if isinstance(f, sf.LessThanOrEqual):
        return c <= value
    return None


def _column(f: sf.Filter, types: dict[str, pa.DataType]) -> str | None:
    """The top-level column a filter tests, None for nested fields and unknown names."""
    path: tuple[str, ...] = getattr(f, "attribute", ())
    return path[0] if len(path) == 1 and path[0] in types else None
