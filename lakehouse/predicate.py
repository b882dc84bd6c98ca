"""Filter predicates: ``col("price") > 100``, their SQL semantics, and how planning uses them.

A predicate is a tree of leaves (one column, one comparison) joined by AND, OR and NOT. The same
tree serves three purposes:

- exact row filtering, as an Arrow compute expression;
- partition pruning, evaluated on a file's partition values;
- stats pruning, evaluated on a file's min/max/null counts, answering "may any row match?".

Nulls follow SQL: a comparison with null is unknown and never matches, also under NOT. Planning
first pushes NOT down to the leaves (``x != 5`` for ``NOT x = 5``), which keeps the stats test
sound: "may match" of a negation is not the negation of "may match".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import ArgumentTypeError, SchemaMismatchError


class Op(StrEnum):
    """The comparison of a :class:`Leaf` (its ``op``)."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    IN = "in"
    NOT_IN = "not_in"
    IS_NULL = "is_null"
    IS_NOT_NULL = "is_not_null"
    STARTS_WITH = "starts_with"
    NOT_STARTS_WITH = "not_starts_with"


# op -> op of its negation (SQL three-valued logic: NOT(x = 1) is x <> 1 for non-null x).
_NEGATION = {
    "eq": "ne",
    "ne": "eq",
    "lt": "ge",
    "ge": "lt",
    "le": "gt",
    "gt": "le",
    "in": "not_in",
    "not_in": "in",
    "is_null": "is_not_null",
    "is_not_null": "is_null",
    "starts_with": "not_starts_with",
    "not_starts_with": "starts_with",
}


class Predicate:
    """Base of predicate trees; combine with ``&``, ``|`` and ``~``."""

    def __and__(self, other: Predicate) -> Predicate:
        return And((self, other))

    def __or__(self, other: Predicate) -> Predicate:
        return Or((self, other))

    def __invert__(self) -> Predicate:
        return Not(self)

    def columns(self) -> set[str]:
        raise NotImplementedError

    def fits(self, types: Mapping[str, pa.DataType]) -> bool:
        """Whether it names only columns of ``types`` (name -> Arrow type) and each literal fits its
        column's type: what a read of such columns takes as a filter."""
        try:
            bind(self, types, "")
        except SchemaMismatchError:
            return False
        return True


@dataclass(frozen=True)
class Leaf(Predicate):
    """One comparison of one column with literals (none for IS NULL, several for IN); ``op`` is
    an :class:`Op`."""

    op: str
    column: str
    literals: tuple[Any, ...] = ()

    def columns(self) -> set[str]:
        return {self.column}

    def negate(self) -> Leaf:
        return Leaf(_NEGATION[self.op], self.column, self.literals)


@dataclass(frozen=True)
class And(Predicate):
    children: tuple[Predicate, ...]

    def columns(self) -> set[str]:
        return set().union(*(c.columns() for c in self.children))


@dataclass(frozen=True)
class Or(Predicate):
    children: tuple[Predicate, ...]

    def columns(self) -> set[str]:
        return set().union(*(c.columns() for c in self.children))


@dataclass(frozen=True)
class Not(Predicate):
    child: Predicate

    def columns(self) -> set[str]:
        return self.child.columns()


class Column:
    """A column reference; comparisons build predicates."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, value: Any) -> Leaf:  # type: ignore[override]
        return Leaf("eq", self.name, (value,))

    def __ne__(self, value: Any) -> Leaf:  # type: ignore[override]
        return Leaf("ne", self.name, (value,))

    def __lt__(self, value: Any) -> Leaf:
        return Leaf("lt", self.name, (value,))

    def __le__(self, value: Any) -> Leaf:
        return Leaf("le", self.name, (value,))

    def __gt__(self, value: Any) -> Leaf:
        return Leaf("gt", self.name, (value,))

    def __ge__(self, value: Any) -> Leaf:
        return Leaf("ge", self.name, (value,))

    def isin(self, values: Iterable[Any]) -> Leaf:
        return Leaf("in", self.name, tuple(values))

    def is_null(self) -> Leaf:
        return Leaf("is_null", self.name)

    def is_not_null(self) -> Leaf:
        return Leaf("is_not_null", self.name)

    def between(self, low: Any, high: Any) -> Predicate:
        """Inclusive range, as SQL BETWEEN."""
        return And((Leaf("ge", self.name, (low,)), Leaf("le", self.name, (high,))))

    def startswith(self, prefix: str) -> Leaf:
        return Leaf("starts_with", self.name, (prefix,))


def col(name: str) -> Column:
    """Reference a column by name in a filter."""
    return Column(name)


# ---- normalization ------------------------------------------------------------------------


def push_not_down(pred: Predicate, negate: bool = False) -> Predicate:
    """Rewrite into negation normal form: NOT appears only inside leaves."""
    if isinstance(pred, Not):
        return push_not_down(pred.child, not negate)
    if isinstance(pred, And | Or):
        children = tuple(push_not_down(c, negate) for c in pred.children)
        flip = isinstance(pred, And) == negate
        return Or(children) if flip else And(children)
    if isinstance(pred, Leaf):
        return pred.negate() if negate else pred
    raise TypeError(f"not a predicate: {pred!r}")


def bind(pred: Predicate, types: Mapping[str, pa.DataType], table: str) -> Predicate:
    """Check column names and cast literals to their column's Arrow type (in NNF)."""
    if not isinstance(pred, Predicate):
        raise ArgumentTypeError(
            f"filter on table {table} must be a predicate built with col(...), e.g. col('id') > 1, "
            f"not {type(pred).__name__} {pred!r}"
        )

    def cast(leaf: Leaf) -> Leaf:
        if leaf.column not in types:
            raise SchemaMismatchError(
                f"filter on table {table} names unknown column {leaf.column!r}; columns are {sorted(types)}"
            )
        atype = types[leaf.column]
        if leaf.op in ("starts_with", "not_starts_with"):
            if not (pa.types.is_string(atype) or pa.types.is_large_string(atype)):
                raise SchemaMismatchError(
                    f"startswith on table {table} needs a string column, {leaf.column!r} is {atype}"
                )
            return leaf
        try:
            lits = tuple(literal(v, atype) for v in leaf.literals)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(
                f"filter literal {leaf.literals!r} does not fit column {leaf.column!r} ({atype}) "
                f"of table {table}: {e}"
            ) from e
        return Leaf(leaf.op, leaf.column, lits)

    return map_leaves(push_not_down(pred), cast)


def literal(value: Any, atype: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the column's type (Python values convert directly, else cast).

    A number must keep its value in an integer or decimal column: Arrow would turn 1.5 into
    INT 1 (and 1.25 into DECIMAL(10, 1) 1.2), and ``x = 1.5`` would then match ``x = 1``.
    """
    if isinstance(value, pa.Scalar):
        return value if value.type == atype else value.cast(atype)
    try:
        converted = pa.scalar(value, type=atype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        converted = literal(pa.scalar(value), atype)
    exact = pa.types.is_integer(atype) or pa.types.is_decimal(atype)
    if exact and isinstance(value, (float, Decimal)) and converted.is_valid:
        kept = converted.as_py()
        if (float(kept) if isinstance(value, float) else kept) != value:
            raise pa.ArrowInvalid(f"{value!r} would become {kept!r}")
    return converted


def map_leaves(pred: Predicate, fn: Callable[[Leaf], Predicate]) -> Predicate:
    if isinstance(pred, Leaf):
        return fn(pred)
    if isinstance(pred, And):
        return And(tuple(map_leaves(c, fn) for c in pred.children))
    if isinstance(pred, Or):
        return Or(tuple(map_leaves(c, fn) for c in pred.children))
    if isinstance(pred, Not):
        return Not(map_leaves(pred.child, fn))
    raise TypeError(f"not a predicate: {pred!r}")


def only_columns(pred: Predicate, keep: set[str]) -> Predicate | None:
    """The weakest predicate over ``keep`` implied by ``pred`` (NNF); None means always true.

    Leaves on other columns become "true", so the result may only ever widen what matches.
    """
    if isinstance(pred, Leaf):
        return pred if pred.column in keep else None
    if isinstance(pred, And):
        kept = [p for p in (only_columns(c, keep) for c in pred.children) if p is not None]
        return None if not kept else kept[0] if len(kept) == 1 else And(tuple(kept))
    if isinstance(pred, Or):
        alternatives: list[Predicate] = []
        for c in pred.children:
            p = only_columns(c, keep)
            if p is None:  # one alternative always true: so is the OR
                return None
            alternatives.append(p)
        return Or(tuple(alternatives))
    raise TypeError(f"expected a predicate in negation normal form, got {pred!r}")


# ---- evaluation ---------------------------------------------------------------------------


def to_expression(pred: Predicate) -> pc.Expression:
    """The Arrow compute expression of a bound NNF predicate (nulls never match)."""
    if isinstance(pred, And):
        out = to_expression(pred.children[0])
        for c in pred.children[1:]:
            out = out & to_expression(c)
        return out
    if isinstance(pred, Or):
        out = to_expression(pred.children[0])
        for c in pred.children[1:]:
            out = out | to_expression(c)
        return out
    if not isinstance(pred, Leaf):
        raise TypeError(f"expected a predicate in negation normal form, got {pred!r}")
    f = pc.field(pred.column)
    lits = pred.literals
    op = pred.op
    if op == "eq":
        return f == lits[0]
    if op == "ne":
        return f != lits[0]
    if op == "lt":
        return f < lits[0]
    if op == "le":
        return f <= lits[0]
    if op == "gt":
        return f > lits[0]
    if op == "ge":
        return f >= lits[0]
    if op == "in":
        return f.isin(_value_set(lits))
    if op == "not_in":
        return ~f.isin(_value_set(lits)) & f.is_valid()
    if op == "is_null":
        return f.is_null()
    if op == "is_not_null":
        return f.is_valid()
    if op == "starts_with":
        return pc.starts_with(f, pattern=lits[0])
    if op == "not_starts_with":
        return ~pc.starts_with(f, pattern=lits[0])
    raise ValueError(f"unknown predicate op {op!r}")


def _value_set(lits: tuple[Any, ...]) -> pa.Array:
    return pa.array(
        [v.as_py() if isinstance(v, pa.Scalar) else v for v in lits],
        lits[0].type if lits and isinstance(lits[0], pa.Scalar) else None,
    )


@dataclass(frozen=True)
class ColumnStats:
    """What a file's metadata says about one column: physical min/max (None = unknown)."""

    min: Any
    max: Any
    null_count: int | None
    row_count: int


def may_match(
    pred: Predicate, stats: Callable[[str], ColumnStats | None], physical: Callable[[str, Any], Any]
) -> bool:
    """Whether any row described by ``stats`` can satisfy the bound NNF predicate.

    ``stats(column)`` returns None when nothing is known about the column; ``physical(column,
    literal)`` converts a bound literal to the physical value the stats hold.
    """
    if isinstance(pred, And):
        return all(may_match(c, stats, physical) for c in pred.children)
    if isinstance(pred, Or):
        return any(may_match(c, stats, physical) for c in pred.children)
    if not isinstance(pred, Leaf):
        raise TypeError(f"expected a predicate in negation normal form, got {pred!r}")
    s = stats(pred.column)
    if s is None:
        return True
    op = pred.op
    all_null = s.null_count is not None and s.null_count >= s.row_count
    if op == "is_null":
        return s.null_count is None or s.null_count > 0
    if op == "is_not_null":
        return not all_null
    if all_null:
        return False
    lo, hi = s.min, s.max
    if lo is None or hi is None:
        return True
    if op in ("starts_with", "not_starts_with"):
        prefix = pred.literals[0]
        if op == "not_starts_with":
            return not (lo.startswith(prefix) and hi.startswith(prefix))
        n = len(prefix)
        return bool(lo[:n] <= prefix <= hi[:n])
    values = [physical(pred.column, v) for v in pred.literals]
    if op == "eq":
        return bool(lo <= values[0] <= hi)
    if op == "ne":
        return not (lo == hi == values[0])
    if op == "lt":
        return bool(lo < values[0])
    if op == "le":
        return bool(lo <= values[0])
    if op == "gt":
        return bool(hi > values[0])
    if op == "ge":
        return bool(hi >= values[0])
    if op == "in":
        return any(v is not None and lo <= v <= hi for v in values)
    if op == "not_in":
        return not (lo == hi and lo in values)
    raise ValueError(f"unknown predicate op {op!r}")
