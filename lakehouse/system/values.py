"""How system tables present what they show: Arrow schemas and rows, and values, rows and
partitions as strings the way Paimon's casts to STRING print them (a partition row as
``{v1, v2}``)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.manifest import binary_row
from lakehouse.paths import value_string
from lakehouse.types import DataType

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

TS = pa.timestamp("ms")


def schema_of(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    """An Arrow schema from (name, type, nullable) triples."""
    return pa.schema([pa.field(n, t, nullable=null) for n, t, null in fields])


def table_of(schema: pa.Schema, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def text(dtype: DataType, value: Any) -> str:
    """A physical value as Paimon's cast to STRING prints it."""
    if value is None:
        return "null"
    if dtype.root == "DATE":
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=value)).isoformat()
    if dtype.root in ("BINARY", "VARBINARY"):
        return bytes(value).hex()
    return value_string(dtype, value)


def row_string(types: list[DataType], values: list[Any]) -> str:
    return "{" + ", ".join(text(t, v) for t, v in zip(types, values, strict=True)) + "}"


def partition_string(table: TableStore, partition: bytes) -> str | None:
    types = table.schema.partition_types()
    if not types:
        return None
    return row_string(types, binary_row.decode_row(binary_row.deserialize(partition)[1], types))
