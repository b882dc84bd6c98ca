"""A read's WHERE condition - SQL text or a Spark Column - read on the driver before Spark sees it.

:func:`lakehouse.spark.read` applies the condition with Spark after reading, and reads it here
for two things Spark does not hand out to code outside a query:

- the columns it may use (:func:`used_columns`): every table column whose name occurs in the
  condition's text, case-insensitively (Spark resolves names so), or all of them when the text
  holds a ``*`` or a regex (``colRegex``). A superset: an extra column costs a little reading,
  a missing one would fail the query;
- its top-level AND conjuncts the engine can prune files with (:func:`pushable_filters`), as the
  ``pyspark.sql.datasource`` filters Spark pushes into data sources, which
  :func:`lakehouse.spark.filters.to_predicate` then keeps where the engine is exact:
  ``col <op> literal`` (``=``, ``==``, ``<=>``, ``!=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``,
  either side), ``col [NOT] IN (literals)``, ``col IS [NOT] NULL``, ``col LIKE 'prefix%'``
  (``startswith``), ``col BETWEEN a AND b`` and NOT of these. A literal must be of its
  column's kind (a quoted string for strings, ``DATE '...'`` for dates, a number for numbers,
  TRUE/FALSE for booleans), so no implicit cast of Spark's can differ from the engine's.

SQL text is tokenized (quoted strings without escapes, backquoted names); a Spark Connect Column's
expression tree and a classic Column's JVM column tree are walked. Anything else - ORs, functions,
casts, nested fields - is simply not pushed: the condition is still applied in full by Spark.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import datasource as sf

from lakehouse.spark.kinds import is_connect
from lakehouse.types import INTEGER_ROOTS, STRING_ROOTS, DataType

Condition = Column | str


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


def condition_text(condition: Condition) -> str:
    """The condition as text: SQL as given, a Column as Spark prints it (names and literals)."""
    return condition if isinstance(condition, str) else str(condition)


def used_columns(condition: Condition, columns: Sequence[str]) -> list[str]:
    """The ``columns`` the condition may use (a superset, in table order)."""
    text = condition_text(condition).lower()
    if "*" in text or "regex" in text:
        return list(columns)
    return [c for c in columns if c.lower() in text]


# ---- the conjuncts the engine can prune with ----------------------------------------------


def pushable_filters(condition: Condition, types: dict[str, DataType]) -> list[sf.Filter]:
    """The top-level conjuncts of ``condition`` as data source filters on the columns of
    ``types`` (name -> Paimon type), those of a form and literal kind this module reads exactly."""
    resolve = _resolver(types)
    out: list[sf.Filter] = []
    for conjunct in _conjuncts(_shape(condition)):
        out.extend(_filters(conjunct, resolve, types))
    return out


def _shape(condition: Condition) -> Call | Ref | Lit:
    if isinstance(condition, str):
        return _call("and", parse_conjuncts(condition))
    try:
        if is_connect(condition):  # (a classic Column has every attribute: its struct fields)
            return _connect_shape(condition._expr)
        return _jvm_shape(condition._jc.node())  # classic
    except Exception:  # a form this module does not know: nothing is pushed
        return OTHER


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
    out, at = [], 0
    text = text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.lastgroup == "badstr":
            return None
        at = m.end()
        kind, value = m.lastgroup, m.group(m.lastgroup)
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
    values, current = [], []
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


# ---- Column trees -------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)*`")


def _reference(identifier: str) -> Ref | None:
    """A top-level column of an unparsed identifier (``a``, ```a b```), None for ``t.a``/``a.b``."""
    if not _IDENTIFIER.fullmatch(identifier):
        return None
    return Ref(identifier[1:-1].replace("``", "`") if identifier.startswith("`") else identifier)


def _literal_of(value: Any) -> Lit:
    """A literal of a Python value (as Column literals carry them)."""
    if value is None:
        return Lit(None, "null")
    if isinstance(value, bool):
        return Lit(value, "bool")
    if isinstance(value, int):
        return Lit(value, "int")
    if isinstance(value, str):
        return Lit(value, "string")
    if isinstance(value, Decimal):
        return Lit(value, "decimal")
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return Lit(value, "date")
    return Lit(value, "other")


def _connect_shape(expr: Any) -> Call | Ref | Lit:
    """The shape of a Spark Connect expression tree."""
    from pyspark.sql.connect import expressions as ce
    from pyspark.sql.types import DateType

    if isinstance(expr, ce.ColumnReference):
        return _reference(expr._unparsed_identifier) or OTHER
    if isinstance(expr, ce.LiteralExpression):
        value = expr._value
        if isinstance(expr._dataType, DateType) and value is not None:
            value = DateType().fromInternal(value)
        return _literal_of(value)
    if isinstance(expr, ce.SQLExpression):
        return _call("and", parse_conjuncts(expr._expr))
    if isinstance(expr, ce.UnresolvedFunction) and not expr._is_distinct:
        return _call(expr._name, [_connect_shape(a) for a in expr._args])
    return OTHER


def _jvm_shape(node: Any) -> Call | Ref | Lit:
    """The shape of a classic Column's JVM column tree (``org.apache.spark.sql.internal``)."""
    kind = node.getClass().getSimpleName()
    if kind == "UnresolvedAttribute":
        parts = node.nameParts()
        return Ref(parts.apply(0)) if parts.length() == 1 and not node.isMetadataColumn() else OTHER
    if kind == "Literal":
        return _literal_of(_jvm_value(node.value()))
    if kind == "SqlExpression":
        return _call("and", parse_conjuncts(node.expression()))
    if kind == "UnresolvedFunction" and not node.isDistinct() and not node.isUserDefinedFunction():
        args = node.arguments()
        return _call(node.functionName(), [_jvm_shape(args.apply(i)) for i in range(args.length())])
    return OTHER


def _jvm_value(value: Any) -> Any:
    """A JVM literal's value in Python: Py4J converts strings, numbers and booleans itself."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    kind = value.getClass().getSimpleName()
    if kind == "BigDecimal":
        return Decimal(value.toPlainString())
    if kind in ("LocalDate", "Date"):
        return datetime.date.fromisoformat(value.toString())
    return value  # a float, a timestamp...: an "other" literal, not pushed
