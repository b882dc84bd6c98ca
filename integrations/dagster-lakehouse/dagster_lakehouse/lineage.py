"""Column lineage of a materialization: which columns of the upstream tables feed each column it
writes, from Spark's analyzed plan of the DataFrame (``EXPLAIN EXTENDED``, plain SQL: the same on a
local session, a cluster and Spark Connect).

Every attribute of an analyzed plan has an id (``price#16``) that stays the same through the
operators that pass it on; an expression that makes a new one is printed as ``<expr> AS name#id``.
So each output column is traced from its id, through the aliases that made it, down to ids of
the columns of the upstream DataFrames the transformation read. Operators that make attributes
without an alias (a ``Generate``'s, the second branch of a ``Union``) end the trace there: their
columns get the dependencies found before them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dagster import AssetKey, TableColumnDep, TableColumnLineage

from lakehouse import ROW_KIND

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_ANALYZED = "== Analyzed Logical Plan =="
_ID = re.compile(r"#(\d+)L?\b")
_ALIAS = re.compile(r"^(?P<expr>.*) AS (?P<name>.+?)#(?P<id>\d+)L?$", re.S)
_ATTRIBUTE = re.compile(r"^(?P<name>.+?)#(?P<id>\d+)L?$")


def analyzed_plan(frame: DataFrame) -> str:
    """The analyzed logical plan of ``frame`` under a projection of all its columns, whose first
    line lists them with their ids."""
    explained = frame.sparkSession.sql("EXPLAIN EXTENDED SELECT * FROM {frame}", args=None, frame=frame)
    text = str(explained.collect()[0][0])
    start = text.find(_ANALYZED)
    if start < 0:  # a Spark that explains otherwise: no lineage
        return ""
    end = text.find("\n== ", start + len(_ANALYZED))
    section = text[start + len(_ANALYZED) : end if end >= 0 else len(text)].strip()
    return section.split("\n", 1)[1] if "\n" in section else ""  # after its line of names and types


def _items(line: str) -> list[str]:
    """The expressions of a plan line, split at commas and brackets outside parentheses."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in line:
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and char in ",[]":
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    items.append("".join(current).strip())
    return [i for i in items if i]


def output_columns(plan: str) -> list[tuple[str, int]]:
    """The columns of the plan's root projection, with their ids, in order."""
    columns = []
    for item in _items(plan.split("\n", 1)[0].removeprefix("Project")):
        found = _ATTRIBUTE.match(item)
        if found:
            columns.append((found["name"], int(found["id"])))
    return columns


def _aliases(plan: str) -> dict[int, set[int]]:
    """Each attribute id an expression makes -> the ids the expression reads."""
    made: dict[int, set[int]] = {}
    for line in plan.splitlines():
        for item in _items(line):
            found = _ALIAS.match(item)
            if found:
                made[int(found["id"])] = {int(i) for i in _ID.findall(found["expr"])}
    return made


def column_lineage(frame: DataFrame, read: Sequence[tuple[AssetKey, DataFrame]]) -> TableColumnLineage:
    """Which columns of the assets ``read`` (an asset's key, a DataFrame read of its table) feed
    each column of ``frame``."""
    sources: dict[int, tuple[AssetKey, str]] = {}
    for key, source in read:
        for name, attribute in output_columns(analyzed_plan(source)):
            if name != ROW_KIND:
                sources[attribute] = (key, name)
    plan = analyzed_plan(frame)
    made = _aliases(plan)
    deps: dict[str, list[TableColumnDep]] = {}
    for name, attribute in output_columns(plan):
        found = sorted(_trace(attribute, made, sources), key=lambda d: (d[0].to_user_string(), d[1]))
        deps[name] = [TableColumnDep(asset_key=k, column_name=c) for k, c in found]
    return TableColumnLineage(deps_by_column={k: v for k, v in deps.items() if v})


def _trace(
    attribute: int, made: Mapping[int, set[int]], sources: Mapping[int, tuple[AssetKey, str]]
) -> set[tuple[AssetKey, str]]:
    """The upstream columns an attribute is made from, through every alias in between."""
    found: set[tuple[AssetKey, str]] = set()
    seen: set[int] = set()
    frontier = [attribute]
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in sources:
            found.add(sources[current])
        frontier.extend(made.get(current, ()))
    return found
