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
``index_checks``, ``blocking_checks``, ``fresh_by`` (a cron), ``publish`` (``direct`` or
``audited``: write-audit-publish), ``incremental`` (true: each ``{db_table}`` is what the
table changed since the last materialization, with a ``_row_kind`` column, and ``{this}`` the
table's own rows before the run - none in a full run), as on :class:`TableSpec`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import yaml

from dagster_lakehouse.publish import Publish
from dagster_lakehouse.spec import PARTITION_COLUMN, Inputs, TableSpec
from lakehouse import parse_type, to_arrow
from lakehouse.errors import InvalidArgumentError, LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REQUIRED = ("name", "columns", "sql")
OPTIONAL = {
    "description", "owners", "primary_keys", "partition_keys", "options", "upstream", "write",
    "index_checks", "blocking_checks", "fresh_by", "publish", "incremental",
}  # fmt: skip
THIS = "this"  # how an incremental query names its own table
WRITES = ("upsert", "overwrite")


def view_name(table: str) -> str:
    """How a query names an upstream table: ``dwd.orders`` -> ``dwd_orders``."""
    return table.replace(".", "_")


def sql_transform(
    query: str, upstream: tuple[str, ...], incremental: bool = False
) -> Callable[[Inputs], DataFrame]:
    """A transformation running ``query`` over the run's days of the upstream tables, or over
    their changes and the table's previous rows when ``incremental``."""

    def transform(inputs: Inputs) -> DataFrame:
        if incremental:
            frames = {view_name(t): inputs.changes(t) for t in upstream}
            return inputs.spark.sql(
                query, args=None, **frames, **{THIS: inputs.previous()}
            )  # views, no parameters
        frames = {view_name(t): inputs.read(t) for t in upstream}
        return inputs.spark.sql(query, args=None, **frames)

    return transform


def load_table_spec(path: str | Path) -> TableSpec:
    """The table spec a YAML file declares; a typed error names the file and what to fix."""
    path = Path(path)
    doc = yaml.safe_load(path.read_text())
    where = f"table spec {path}"
    if not isinstance(doc, dict):
        raise InvalidArgumentError(f"{where}: expected a mapping of name, columns, sql, ...")
    missing = [k for k in REQUIRED if k not in doc]
    unknown = sorted(set(doc) - set(REQUIRED) - OPTIONAL)
    if missing or unknown:
        raise InvalidArgumentError(
            f"{where}: missing {missing}, unknown {unknown}; keys are {[*REQUIRED, *sorted(OPTIONAL)]}"
        )
    write = doc.get("write", "upsert")
    if write not in WRITES:
        raise InvalidArgumentError(f"{where}: write is {write!r}; use one of {list(WRITES)}")
    publishes = [p.value for p in Publish]
    if doc.get("publish", Publish.DIRECT.value) not in publishes:
        raise InvalidArgumentError(f"{where}: publish is {doc['publish']!r}; use one of {publishes}")
    upstream = tuple(doc.get("upstream", ()))
    spec = TableSpec(
        name=doc["name"],
        schema=pa.schema([_field(where, c) for c in doc["columns"]]),
        transform=sql_transform(doc["sql"], upstream, bool(doc.get("incremental", False))),
        primary_keys=tuple(doc.get("primary_keys", ())),
        partition_keys=tuple(doc.get("partition_keys", (PARTITION_COLUMN,))),
        options={str(k): str(v) for k, v in (doc.get("options") or {}).items()},
        upstream=upstream,
        write=write,
        description=doc.get("description", ""),
        owners=tuple(doc.get("owners", ())),
        index_checks=bool(doc.get("index_checks", False)),
        blocking_checks=bool(doc.get("blocking_checks", False)),
        fresh_by=doc.get("fresh_by"),
        publish=Publish(doc.get("publish", Publish.DIRECT.value)),
        incremental=bool(doc.get("incremental", False)),
    )
    spec.table_schema  # noqa: B018 - validates keys, options and types now, naming the table
    return spec


def load_table_specs(directory: str | Path) -> list[TableSpec]:
    """Every ``*.yaml`` table spec of a directory, by file name."""
    return [load_table_spec(p) for p in sorted(Path(directory).glob("*.yaml"))]


def _field(where: str, column: Any) -> pa.Field:
    if not isinstance(column, dict) or not {"name", "type"} <= set(column):
        raise InvalidArgumentError(f"{where}: a column needs a name and a type, got {column!r}")
    try:
        dtype = parse_type(column["type"])
        arrow = to_arrow(dtype)
    except (ValueError, LakehouseError) as e:
        raise InvalidArgumentError(f"{where}, column {column['name']!r}: {e}") from None
    metadata = {"description": column["description"]} if column.get("description") else None
    return pa.field(column["name"], arrow, nullable=dtype.nullable, metadata=metadata)
