"""Table specs without Python: one YAML file per table, its transformation in Spark SQL.

```yaml
name: dws.user_daily
description: Orders and amounts per user and day
owners: [team:analytics]
columns:                       # Paimon types; NOT NULL where the column must hold a value
  - {name: user_id, type: BIGINT NOT NULL, description: the user}
  - {name: dt, type: STRING NOT NULL}
  - {name: order_count, type: BIGINT}
primary_keys: [user_id, dt]
partition_keys: [dt]           # default [dt]: daily partitions
options: {bucket: "2", merge-engine: aggregation}
upstream: [dwd.orders]
write: overwrite               # or upsert (default)
sql: SELECT user_id, dt, 1 AS order_count FROM {dwd_orders}
```

The query names each upstream table as ``{db_table}``: the run's days of it (read through the
``paimon`` data source, only the run's partitions), passed to ``spark.sql`` as a DataFrame, so
concurrent runs sharing a Spark Connect session never share a temporary view. Optional keys:
``index_checks``, ``blocking_checks``, ``checks`` (Dagster's ready-made ones: ``schema_changes``,
``bounds`` of metadata keys), ``fresh_by`` (a cron), ``publish`` (``direct`` or
``audited``: write-audit-publish), ``incremental`` (true: each ``{db_table}`` is what the
table changed since the last materialization, with a ``_row_kind`` column, and ``{this}`` the
table's own rows before the run - none in a full run), ``iceberg`` (true: Iceberg-compatible
metadata next to the table, which DuckDB, Polars, Trino and pyiceberg read), as on
:class:`TableSpec`.

The same mapping is the ``attributes`` of a :class:`~dagster_lakehouse.components.PaimonTableComponent`
in a ``defs.yaml``: :func:`table_spec` parses both, and a :class:`SpecError` says which key of
it is wrong, so a component can point at the file's line.
"""

from __future__ import annotations

import difflib
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import yaml

from dagster_lakehouse.publish import Publish
from dagster_lakehouse.spec import PARTITION_COLUMN, Bounds, Inputs, TableSpec
from lakehouse import is_known_option, option_names, parse_type, to_arrow
from lakehouse.errors import InvalidArgumentError, InvalidOptionError, LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REQUIRED = ("name", "columns", "sql")
OPTIONAL = {
    "description", "owners", "primary_keys", "partition_keys", "options", "upstream", "write",
    "index_checks", "blocking_checks", "fresh_by", "publish", "incremental", "checks", "pipes", "iceberg",
}  # fmt: skip
CHECKS = ("schema_changes", "bounds")  # the keys of checks:
COMPONENT_KEYS = ("daily_from",)  # what a table component's attributes add to the spec
THIS = "this"  # how an incremental query names its own table
WRITES = ("upsert", "overwrite")

Key = tuple[str | int, ...]  # where in a spec mapping: ("options", "bucket"), ("columns", 2, "type")


class SpecError(InvalidArgumentError):
    """A table spec that cannot be used; ``key`` says where in the spec (() for the whole)."""

    def __init__(self, message: str, key: Key = ()) -> None:
        super().__init__(message)
        self.key = key


def view_name(table: str) -> str:
    """How a query names an upstream table: ``dwd.orders`` -> ``dwd_orders``."""
    return table.replace(".", "_")


@dataclass(frozen=True)
class SqlTransform:
    """A transformation running ``query`` over the run's days of the ``upstream`` tables, or over
    their changes and the table's previous rows when ``incremental``; plain data, so a step run
    elsewhere (:mod:`dagster_lakehouse.pipes`) gets it whole."""

    query: str
    upstream: tuple[str, ...]
    incremental: bool = False

    def __call__(self, inputs: Inputs) -> DataFrame:
        if self.incremental:
            frames = {view_name(t): inputs.changes(t) for t in self.upstream}
            return inputs.spark.sql(self.query, args=None, **frames, **{THIS: inputs.previous()})  # views
        frames = {view_name(t): inputs.read(t) for t in self.upstream}
        return inputs.spark.sql(self.query, args=None, **frames)


def load_table_spec(path: str | Path) -> TableSpec:
    """The table spec a YAML file declares, or a ``defs.yaml`` declaring a table component; a
    typed error names the file and what to fix."""
    path = Path(path)
    where = f"table spec {path}"
    doc = yaml.safe_load(path.read_text())
    if isinstance(doc, Mapping) and {"type", "attributes"} <= set(doc):  # a component's defs.yaml
        doc = {k: v for k, v in (doc["attributes"] or {}).items() if k not in COMPONENT_KEYS}
    try:
        return table_spec(doc)
    except SpecError as e:
        at = f" at {'.'.join(map(str, e.key))}" if e.key else ""
        raise SpecError(f"{where}{at}: {e}", e.key) from None


def load_table_specs(directory: str | Path) -> list[TableSpec]:
    """Every ``*.yaml`` table spec of a directory, by file name."""
    return [load_table_spec(p) for p in sorted(Path(directory).glob("*.yaml"))]


def table_spec(doc: Any, transform: Callable[[Inputs], DataFrame] | None = None) -> TableSpec:
    """The table a spec mapping declares, checked as far as it can be without running it: its
    keys, column types, keys among the columns, options the engine knows and their values, and
    the tables its SQL names (``transform`` replaces the SQL, which is then not required)."""
    if not isinstance(doc, Mapping):
        raise SpecError("expected a mapping of name, columns, sql, ...")
    required = [k for k in REQUIRED if not (k == "sql" and transform is not None)]
    missing = [k for k in required if k not in doc]
    unknown = sorted(set(doc) - set(REQUIRED) - OPTIONAL)
    if missing or unknown:
        raise SpecError(
            f"missing {missing}, unknown {unknown}; keys are {[*REQUIRED, *sorted(OPTIONAL)]}",
            (unknown[0],) if unknown else (),
        )
    write = doc.get("write", "upsert")
    if write not in WRITES:
        raise SpecError(f"write is {write!r}; use one of {list(WRITES)}", ("write",))
    publishes = [p.value for p in Publish]
    if doc.get("publish", Publish.DIRECT.value) not in publishes:
        raise SpecError(f"publish is {doc['publish']!r}; use one of {publishes}", ("publish",))
    upstream = tuple(doc.get("upstream", ()))
    incremental = bool(doc.get("incremental", False))
    schema = pa.schema([_field(i, c) for i, c in enumerate(doc["columns"])])
    keys = {
        k: tuple(doc.get(k, default))
        for k, default in (("primary_keys", ()), ("partition_keys", (PARTITION_COLUMN,)))
    }
    for k, names in keys.items():
        for i, n in enumerate(names):
            if n not in schema.names:
                raise SpecError(f"{k} names {n!r}, which is not a column; columns are {schema.names}", (k, i))
    options = {str(k): _option_value(v) for k, v in (doc.get("options") or {}).items()}
    for k in options:
        if not is_known_option(k):
            raise SpecError(f"no table option is named {k!r}{_did_you_mean(k)}", ("options", k))
    if transform is None:
        _check_views(doc["sql"], upstream, incremental)
    spec = TableSpec(
        name=doc["name"],
        schema=schema,
        transform=transform or SqlTransform(doc["sql"], upstream, incremental),
        primary_keys=keys["primary_keys"],
        partition_keys=keys["partition_keys"],
        options=options,
        upstream=upstream,
        write=write,
        description=doc.get("description", ""),
        owners=tuple(doc.get("owners", ())),
        index_checks=bool(doc.get("index_checks", False)),
        blocking_checks=bool(doc.get("blocking_checks", False)),
        fresh_by=doc.get("fresh_by"),
        publish=Publish(doc.get("publish", Publish.DIRECT.value)),
        incremental=incremental,
        pipes=bool(doc.get("pipes", False)),
        iceberg=bool(doc.get("iceberg", False)),
        **_checks(doc.get("checks")),
    )
    try:
        spec.table_schema  # noqa: B018 - validates keys, options and types now, naming the table
    except InvalidOptionError as e:
        raise SpecError(str(e), ("options", e.option) if e.option in options else ("options",)) from None
    except LakehouseError as e:
        raise SpecError(str(e)) from None
    return spec


def _checks(doc: Any) -> dict[str, Any]:
    """``checks: {schema_changes: false, bounds: {dagster/row_count: {min: 1, max: 1000000}}}``."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or set(doc) - set(CHECKS):
        raise SpecError(f"checks takes {list(CHECKS)}, got {doc!r}", ("checks",))
    out: dict[str, Any] = {}
    if "schema_changes" in doc:
        out["schema_changes"] = bool(doc["schema_changes"])
    if "bounds" in doc:
        bounds = doc["bounds"] or {}
        if not isinstance(bounds, Mapping):
            raise SpecError("bounds maps metadata keys to {min: ..., max: ...}", ("checks", "bounds"))
        out["bounds"] = {str(k): _bounds(str(k), v) for k, v in bounds.items()}
    return out


def _bounds(key: str, doc: Any) -> Bounds:
    where: Key = ("checks", "bounds", key)
    if not isinstance(doc, Mapping) or not doc or set(doc) - {"min", "max"}:
        raise SpecError(f"bounds of {key} are {{min: ..., max: ...}}, got {doc!r}", where)
    values = [doc.get(k) for k in ("min", "max")]
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int | float)) for v in values):
        raise SpecError(f"bounds of {key} are numbers, got {doc!r}", where)
    low, high = values
    if low is not None and high is not None and low > high:
        raise SpecError(f"bounds of {key}: min {low} is above max {high}", where)
    return Bounds(low, high)


def _field(i: int, column: Any) -> pa.Field:
    if not isinstance(column, Mapping) or not {"name", "type"} <= set(column):
        raise SpecError(f"a column needs a name and a type, got {column!r}", ("columns", i))
    try:
        dtype = parse_type(column["type"])
        arrow = to_arrow(dtype)
    except (ValueError, LakehouseError) as e:
        raise SpecError(f"column {column['name']!r}: {e}", ("columns", i, "type")) from None
    metadata = {"description": column["description"]} if column.get("description") else None
    return pa.field(column["name"], arrow, nullable=dtype.nullable, metadata=metadata)


def _option_value(value: Any) -> str:
    """An option as Paimon stores it: YAML's true is ``true``, not Python's ``True``."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, option_names(), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_views(query: str, upstream: tuple[str, ...], incremental: bool) -> None:
    """Every ``{name}`` the query reads is an upstream table (or ``{this}``, incremental)."""
    views = {view_name(t) for t in upstream} | ({THIS} if incremental else set())
    try:
        named = [field for _, field, _, _ in string.Formatter().parse(query) if field is not None]
    except ValueError as e:
        raise SpecError(
            f"the query's braces do not pair ({e}); tables are named as {{db_table}}", ("sql",)
        ) from None
    for name in named:
        if name == THIS and not incremental:
            raise SpecError(
                f"the query reads {{{THIS}}}, the table's own rows, which only an incremental table reads; "
                f"declare incremental: true, or read the upstream tables",
                ("sql",),
            )
        if name not in views:
            raise SpecError(
                f"the query reads {{{name}}}, which is not an upstream table; it can read "
                f"{sorted(f'{{{v}}}' for v in views)}: add the table to upstream",
                ("sql",),
            )
