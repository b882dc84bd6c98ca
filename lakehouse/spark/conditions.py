"""A read's WHERE condition - SQL text, an engine predicate or a Spark Column - read on the driver.

:func:`lakehouse.spark.read` applies the condition with Spark after reading, and reads it here
for two things:

- the columns it may use (:func:`used_columns`): a predicate's own columns; for text and Columns,
  every table column whose name occurs in the condition's text (a Column's is how Spark prints
  it), case-insensitively (Spark resolves names so), or all of them when the text holds a ``*``
  or a regex (``colRegex``). A superset: an extra column costs a little reading, a missing one
  would fail the query;
- what the engine prunes files with (:func:`pruning_predicate`): an engine predicate
  (``col("dt").isin(days)``) as it is; of SQL text, its top-level AND conjuncts of the forms
  this module reads exactly, as the ``pyspark.sql.datasource`` filters Spark pushes into data
  sources, which :func:`lakehouse.spark.filters.to_predicate` then keeps where the engine is
  exact: ``col <op> literal`` (``=``, ``==``, ``<=>``, ``!=``, ``<>``, ``<``, ``<=``, ``>``,
  ``>=``, either side), ``col [NOT] IN (literals)``, ``col IS [NOT] NULL``, ``col LIKE
  'prefix%'`` (``startswith``), ``col BETWEEN a AND b`` and NOT of these. A literal must be of
  its column's kind (a quoted string for strings, ``DATE '...'`` for dates, a number for numbers,
  TRUE/FALSE for booleans), so no implicit cast of Spark's can differ from the engine's. A Spark
  Column prunes nothing: Spark offers no public view of its expression (pass the same condition
  as an engine predicate or SQL text to prune).

SQL text is tokenized here (quoted strings without escapes, backquoted names); anything else -
ORs, functions, casts, nested fields - is simply not pushed: the condition is still applied in full
by Spark. An engine predicate becomes a Spark Column (:func:`spark_condition`) through Column's
public API, each literal cast to its column's Spark type.
"""

from __future__ import annotations

import datetime
import functools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import Any

from pyspark.sql import Column
from pyspark.sql import datasource as sf
from pyspark.sql import types as st

from lakehouse import INTEGER_ROOTS, STRING_ROOTS, And, DataType, Leaf, Not, Op, Or, Predicate, TableSchema
from lakehouse.spark.filters import to_predicate
from lakehouse.spark.types import spark_type

Condition = Column | str | Predicate


# ---- a condition's shape: references, literals, calls -------------------------------------


@dataclass(frozen=True)
class Ref:
    """A top-level column named in the condition (as written: resolved case-insensitively)."""

    name: str


@dataclass(frozen=True)
class Lit:
    """A literal of a kind a column can be compared with exactly: ``string``, ``int``,
    ``decimal``, ``bool``, ``date``, ``null``; ``other`` never is."""

    value: Any
    kind: str


@dataclass(frozen=True)
class Call:
    """An operator or function: ``and``, ``or``, ``not``, ``eq``, ``eqns``, ``ne``, ``lt``,
    ``le``, ``gt``, ``ge``, ``in``, ``isnull``, ``isnotnull``, ``startswith``, ``like``,
    ``between``; anything else keeps its own name and is not pushed."""

    name: str
    args: tuple


OTHER = Call("?", ())  # something this module does not read

_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "eqns": "eqns", "ne": "ne"}
_COMPARISONS = {
    "eq": sf.EqualTo,
    "eqns": sf.EqualNullSafe,
    "lt": sf.LessThan,
    "le": sf.LessThanOrEqual,
    "gt": sf.GreaterThan,
    "ge": sf.GreaterThanOrEqual,
}
# operator and function names of both Column kinds and of SQL, lowercased
_NAMES = {
    "=": "eq", "==": "eq", "equalto": "eq", "<=>": "eqns", "eqnullsafe": "eqns", "!=": "ne", "<>": "ne",
    "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "and": "and", "or": "or", "not": "not", "!": "not",
    "in": "in", "isnull": "isnull", "isnotnull": "isnotnull", "startswith": "startswith", "like": "like",
}  # fmt: skip


def _call(name: str, args: Sequence) -> Call:
    return Call(_NAMES.get(name.lower(), name.lower()), tuple(args))


# ---- the columns a condition uses ---------------------------------------------------------


def condition_text(condition: Column | str) -> str:
    """The condition as text: SQL as given, a Column as Spark prints it (names and literals)."""
    return condition if isinstance(condition, str) else str(condition)


def used_columns(condition: Condition, columns: Sequence[str]) -> list[str]:
    """The ``columns`` the condition may use (a superset, in table order)."""
    if isinstance(condition, Predicate):
        named = condition.columns()
        return [c for c in columns if c in named]
    text = condition_text(condition).lower()
    if "*" in text or "regex" in text:
        return list(columns)
    return [c for c in columns if c.lower() in text]


# ---- the conjuncts the engine can prune with ----------------------------------------------


def pruning_predicate(condition: Condition, schema: TableSchema) -> Predicate | None:
    """What of ``condition`` the engine prunes a read of ``schema`` with (see the module's
    documentation); a predicate that does not fit the schema is refused (``SchemaMismatchError``)."""
    if isinstance(condition, Predicate):
        return condition
    if not isinstance(condition, str):
        return None  # a Column: applied by Spark only
    types = {f.name: f.type for f in schema.fields}
    return to_predicate(pushable_filters(condition, types), schema.arrow_schema)[0]


def pushable_filters(condition: str, types: dict[str, DataType]) -> list[sf.Filter]:
    """The top-level conjuncts of SQL ``condition`` as data source filters on the columns of
    ``types`` (name -> Paimon type), those of a form and literal kind this module reads exactly."""
    resolve = _resolver(types)
    out: list[sf.Filter] = []
    for conjunct in parse_conjuncts(condition):
        out.extend(_filters(conjunct, resolve, types))
    return out


def spark_condition(condition: Condition, f: ModuleType, schema: TableSchema) -> Column | str:
    """``condition`` as Spark applies it: an engine predicate as a Column of ``f``'s kind, each
    literal cast to its column's Spark type (the engine compares in the column's type too)."""
    if not isinstance(condition, Predicate):
        return condition
    return _column_of(condition, f, {x.name: spark_type(x.type) for x in schema.fields})


def _conjuncts(node: Call | Ref | Lit) -> list[Call | Ref | Lit]:
    if isinstance(node, Call) and node.name == "and":
        return [c for arg in node.args for c in _conjuncts(arg)]
    return [node]


def _resolver(types: dict[str, DataType]) -> Callable[[Any], str | None]:
    """Column name of a reference: the exact name, else the only one equal ignoring case."""
    lowered: dict[str, list[str]] = {}
    for name in types:
        lowered.setdefault(name.lower(), []).append(name)

    def resolve(node: Any) -> str | None:
        if not isinstance(node, Ref):
            return None
        if node.name in types:
            return node.name
        found = lowered.get(node.name.lower(), [])
        return found[0] if len(found) == 1 else None

    return resolve


def _fits(lit: Any, dtype: DataType) -> bool:
    """Whether literal ``lit`` compares with a column of ``dtype`` as the engine compares them."""
    if not isinstance(lit, Lit):
        return False
    root = dtype.root
    return {
        "string": root in STRING_ROOTS,
        "int": root in INTEGER_ROOTS or root == "DECIMAL",
        "decimal": root == "DECIMAL",
        "bool": root == "BOOLEAN",
        "date": root == "DATE",
    }.get(lit.kind, False)


def _filters(node: Any, resolve: Callable, types: dict[str, DataType]) -> list[sf.Filter]:
    """The filters one conjunct is exactly (empty: not pushable)."""
    if not isinstance(node, Call):
        return []
    args = node.args
    if node.name == "not" and len(args) == 1:
        inner = _filters(args[0], resolve, types)
        return [sf.Not(inner[0])] if len(inner) == 1 else []
    if node.name in _FLIPPED and len(args) == 2:
        op, (left, right) = node.name, args
        if resolve(left) is None:
            op, left, right = _FLIPPED[op], right, left
        column = resolve(left)
        if column is None or not isinstance(right, Lit):
            return []
        if right.kind == "null":
            return [sf.IsNull((column,))] if op == "eqns" else []
        if not _fits(right, types[column]):
            return []
        if op == "ne":
            return [sf.Not(sf.EqualTo((column,), right.value))]
        return [_COMPARISONS[op]((column,), right.value)]
    column = resolve(args[0]) if args else None
    if column is None:
        return []
    rest = args[1:]
    if node.name in ("isnull", "isnotnull") and not rest:
        return [sf.IsNull((column,)) if node.name == "isnull" else sf.IsNotNull((column,))]
    if node.name == "in" and rest and all(_fits(v, types[column]) for v in rest):
        return [sf.In((column,), tuple(v.value for v in rest))]
    if node.name in ("startswith", "like") and len(rest) == 1 and _fits(rest[0], types[column]):
        prefix = rest[0].value if node.name == "startswith" else _like_prefix(rest[0].value)
        return [] if prefix is None else [sf.StringStartsWith((column,), prefix)]
    if node.name == "between" and len(rest) == 2 and all(_fits(v, types[column]) for v in rest):
        return [sf.GreaterThanOrEqual((column,), rest[0].value), sf.LessThanOrEqual((column,), rest[1].value)]
    return []


def _like_prefix(pattern: str) -> str | None:
    """``abc`` of the LIKE pattern ``abc%`` (no other wildcard, no escape), else None."""
    prefix = pattern[:-1]
    if not pattern.endswith("%") or any(c in prefix for c in "%_\\"):
        return None
    return prefix


# ---- SQL text -----------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'[^'\\]*')
    | (?P<badstr>'|")
    | (?P<quoted>`(?:[^`]|``)*`)
    | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z]*)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op><=>|<=|>=|<>|!=|==|=|<|>|\(|\)|,|-|\S)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "BETWEEN", "CASE", "TRUE", "FALSE", "DATE"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class _Token:
    kind: str  # str, quoted, num, word, kw, op, bad
    text: str


def _tokens(text: str) -> list[_Token] | None:
    """The tokens of SQL text; None when it holds something this tokenizer does not read (a
    string with quotes or escapes inside, a double-quoted string, which may be a name)."""
    out: list[_Token] = []
    at = 0
    text = text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        kind = None if m is None else m.lastgroup  # every alternative is a named group
        if m is None or kind is None or kind == "badstr":
            return None
        at = m.end()
        value = m.group(kind)
        if kind == "op" and text[at - 1 : at + 1] in ("--", "/*"):
            return None  # a comment: what follows it is no condition
        if kind == "word" and value.upper() in _KEYWORDS:
            kind, value = "kw", value.upper()
        elif kind == "str":
            if at < len(text) and text[at] in "'\"":
                return None  # adjacent strings concatenate in Spark SQL
            value = value[1:-1]
        elif kind == "quoted":
            kind, value = "word", value[1:-1].replace("``", "`")
        out.append(_Token(kind, value))
    return out


def parse_conjuncts(text: str) -> list[Call | Ref | Lit]:
    """The top-level AND conjuncts of SQL condition ``text``, each as far as this module reads
    it (:data:`OTHER` where not); none when the text is not one AND of conjuncts (a top-level OR,
    a CASE, a comment, something the tokenizer refuses)."""
    tokens = _tokens(text)
    return [] if tokens is None else _conjuncts_of(tokens)


def _conjuncts_of(tokens: list[_Token]) -> list[Call | Ref | Lit]:
    parts = _split_and(tokens)
    if parts is None:
        return []
    out: list[Call | Ref | Lit] = []
    for part in parts:
        out.extend(_conjuncts_of(part[1:-1]) if _wrapped(part) else [_conjunct(part)])
    return out


def _split_and(tokens: list[_Token]) -> list[list[_Token]] | None:
    """``tokens`` split at their top-level ANDs (not the AND of a BETWEEN); None if they hold a
    top-level OR or a CASE, or unbalanced parentheses."""
    parts: list[list[_Token]] = [[]]
    depth, between = 0, False
    for t in tokens:
        if t.kind == "op" and t.text == "(":
            depth += 1
        elif t.kind == "op" and t.text == ")":
            depth -= 1
            if depth < 0:
                return None
        elif t.kind == "kw" and (t.text == "CASE" or depth == 0 and t.text == "OR"):
            return None  # ANDs inside a CASE are not conjuncts; ORs are not pushed
        elif depth == 0 and t.kind == "kw" and t.text == "BETWEEN":
            between = True
        elif depth == 0 and t.kind == "kw" and t.text == "AND":
            if between:
                between = False
            else:
                parts.append([])
                continue
        parts[-1].append(t)
    if depth != 0 or any(not p for p in parts):
        return None
    return parts


def _wrapped(tokens: list[_Token]) -> bool:
    """Whether ``tokens`` are one parenthesized group ``( ... )``."""
    if len(tokens) < 2 or tokens[0].text != "(" or tokens[-1].text != ")":
        return False
    depth = 0
    for i, t in enumerate(tokens):
        if t.kind == "op" and t.text in "()":
            depth += 1 if t.text == "(" else -1
            if depth == 0 and i < len(tokens) - 1:
                return False
    return True


def _conjunct(tokens: list[_Token]) -> Call | Ref | Lit:
    """One conjunct of the forms this module reads, else :data:`OTHER`."""
    if tokens and tokens[0].kind == "kw" and tokens[0].text == "NOT":
        rest = tokens[1:]
        inner = _conjunct(rest[1:-1] if _wrapped(rest) else rest)
        return OTHER if inner is OTHER else Call("not", (inner,))
    if len(tokens) < 3 or tokens[0].kind != "word":
        return _flipped(tokens)
    ref, second, rest = Ref(tokens[0].text), tokens[1], tokens[2:]
    if second.kind == "op" and second.text in _NAMES:
        lit = _literal(rest)
        return OTHER if lit is None else Call(_NAMES[second.text], (ref, lit))
    negated = second.kind == "kw" and second.text == "NOT"
    if negated:
        second, rest = rest[0], rest[1:]
        if second.kind != "kw" or second.text not in ("IN", "LIKE"):
            return OTHER
    if second.kind == "kw" and second.text == "IS":
        words = [t.text for t in rest]
        if words == ["NULL"]:
            return Call("isnull", (ref,))
        if words == ["NOT", "NULL"]:
            return Call("isnotnull", (ref,))
        return OTHER
    if second.kind == "kw" and second.text == "IN":
        values = _literal_list(rest)
        found = OTHER if values is None else Call("in", (ref, *values))
    elif second.kind == "kw" and second.text == "LIKE":
        lit = _literal(rest)
        found = OTHER if lit is None else Call("like", (ref, lit))
    elif second.kind == "kw" and second.text == "BETWEEN":
        bounds = [i for i, t in enumerate(rest) if t.kind == "kw" and t.text == "AND"]
        if len(bounds) != 1:
            return OTHER
        low, high = _literal(rest[: bounds[0]]), _literal(rest[bounds[0] + 1 :])
        found = OTHER if low is None or high is None else Call("between", (ref, low, high))
    else:
        return OTHER
    return Call("not", (found,)) if negated and found is not OTHER else found


def _flipped(tokens: list[_Token]) -> Call | Ref | Lit:
    """``literal <op> column``."""
    for i, t in enumerate(tokens):
        if t.kind == "op" and t.text in _NAMES and t.text not in ("-", "!"):
            lit = _literal(tokens[:i])
            rest = tokens[i + 1 :]
            if lit is None or len(rest) != 1 or rest[0].kind != "word":
                return OTHER
            return Call(_NAMES[t.text], (lit, Ref(rest[0].text)))
    return OTHER


def _literal(tokens: list[_Token]) -> Lit | None:
    """One literal, or None when ``tokens`` are not exactly one literal."""
    texts = [t.text for t in tokens]
    if len(tokens) == 1:
        t = tokens[0]
        if t.kind == "str":
            return Lit(t.text, "string")
        if t.kind == "kw" and t.text in ("TRUE", "FALSE"):
            return Lit(t.text == "TRUE", "bool")
        if t.kind == "kw" and t.text == "NULL":
            return Lit(None, "null")
        if t.kind == "num":
            return _number(t.text)
    if len(tokens) == 2 and texts[0] == "-" and tokens[1].kind == "num":
        lit = _number(tokens[1].text)
        return Lit(-lit.value, lit.kind) if lit.kind in ("int", "decimal") else lit
    if texts[:1] == ["DATE"] and len(tokens) == 2 and tokens[1].kind == "str" and _DATE.fullmatch(texts[1]):
        try:
            return Lit(datetime.date.fromisoformat(texts[1]), "date")
        except ValueError:
            return None
    return None


def _number(text: str) -> Lit:
    if text.isdigit():
        return Lit(int(text), "int")
    if re.fullmatch(r"\d+\.\d+", text):
        return Lit(Decimal(text), "decimal")  # Spark reads 1.5 as a DECIMAL literal
    return Lit(text, "other")  # 1e3 (DOUBLE), 1L, 2BD...: not pushed


def _literal_list(tokens: list[_Token]) -> list[Lit] | None:
    """``( lit, lit, ... )``."""
    if not _wrapped(tokens):
        return None
    values: list[Lit] = []
    current: list[_Token] = []
    for t in [*tokens[1:-1], _Token("op", ",")]:
        if t.kind == "op" and t.text == ",":
            lit = _literal(current)
            if lit is None:
                return None
            values.append(lit)
            current = []
        else:
            current.append(t)
    return values


# ---- engine predicates as Columns ---------------------------------------------------------

_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
}


def _column_of(pred: Predicate, f: ModuleType, types: Mapping[str, st.DataType]) -> Column:
    if isinstance(pred, And | Or):
        parts = [_column_of(c, f, types) for c in pred.children]
        return functools.reduce(operator.and_ if isinstance(pred, And) else operator.or_, parts)
    if isinstance(pred, Not):
        return ~_column_of(pred.child, f, types)
    assert isinstance(pred, Leaf)
    column = f.col(quoted(pred.column))
    values = [f.lit(v).cast(types[pred.column]) for v in pred.literals]
    if pred.op in _COMPARE:
        return _COMPARE[pred.op](column, values[0])
    if pred.op in (Op.IN, Op.NOT_IN):
        found = column.isin(values)
        return found if pred.op == Op.IN else ~found
    if pred.op in (Op.IS_NULL, Op.IS_NOT_NULL):
        return column.isNull() if pred.op == Op.IS_NULL else column.isNotNull()
    found = column.startswith(f.lit(pred.literals[0]))
    return found if pred.op == Op.STARTS_WITH else ~found


def quoted(name: str) -> str:
    """A column name as Spark resolves it literally (dots and all)."""
    return "`" + name.replace("`", "``") + "`"
