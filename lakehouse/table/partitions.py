"""Partition specs like ``{"dt": "2024-01-01"}``: validated against the schema, matched against
the serialized partition BinaryRows in manifests. Used by partition overwrites and by maintenance
restricted to some partitions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from lakehouse.errors import SchemaMismatchError
from lakehouse.manifest import binary_row
from lakehouse.predicate import literal
from lakehouse.schema import TableSchema

PartitionFilter = Callable[[bytes], bool]


def partition_spec(schema: TableSchema, table: str, spec: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Partition key -> physical value (None for the default partition); ``what`` names the caller."""
    default = schema.core_options.get("partition.default-name")
    out = {}
    for key, value in spec.items():
        if key not in schema.partition_keys:
            raise SchemaMismatchError(
                f"{what} names {key!r}, which is not a partition key of table {table} "
                f"(partition keys: {list(schema.partition_keys)})"
            )
        if value is None or value == default:
            out[key] = None
            continue
        atype = schema.arrow_types()[key]
        try:
            scalar = literal(value, atype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise SchemaMismatchError(
                f"{what} value {value!r} does not fit partition column {key!r} ({atype}) "
                f"of table {table}: {e}"
            ) from None
        out[key] = binary_row.physical_value(scalar, schema.field(key).type)
    return out


def partition_values(schema: TableSchema, partition: bytes) -> dict[str, Any]:
    """Partition key -> physical value of a serialized partition row."""
    values = binary_row.decode_row(binary_row.deserialize(partition)[1], schema.partition_types())
    return dict(zip(schema.partition_keys, values, strict=True))


def partition_filter(
    schema: TableSchema, table: str, specs: Iterable[Mapping[str, Any]], what: str
) -> PartitionFilter:
    """A test for partitions matching any of ``specs`` (a spec may name only some partition keys)."""
    parsed = [partition_spec(schema, table, s, what) for s in specs]

    def matches(partition: bytes) -> bool:
        values = partition_values(schema, partition)
        return any(all(values[k] == v for k, v in spec.items()) for spec in parsed)

    return matches


def in_partitions(
    schema: TableSchema,
    table: str,
    entries: list,
    partitions: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None,
    what: str,
) -> list:
    """The manifest entries in any of ``partitions`` (one spec or several; None: all)."""
    if partitions is None:
        return entries
    specs = [partitions] if isinstance(partitions, Mapping) else list(partitions)
    keep = partition_filter(schema, table, specs, what)
    return [e for e in entries if keep(e.partition)]
