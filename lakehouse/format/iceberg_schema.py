"""A Paimon schema as Iceberg sees it: types, field ids, the identity partition spec, and the
single-value serialization of column bounds (``IcebergDataField``, ``IcebergConversions``).

Iceberg finds a column in a Parquet file by the field id Paimon wrote there, so every field keeps
its Paimon id; the elements, keys and values of nested types get the ids Paimon's Parquet writer
gives them (:func:`~lakehouse.format.parquet.structured_field_id`). Partitions are identity
partitions of the partition columns, with partition field ids from 1000.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from lakehouse.errors import UnsupportedFeatureError
from lakehouse.format.parquet import structured_field_id
from lakehouse.options import DELETION_VECTORS_BITMAP64, DELETION_VECTORS_ENABLED, CoreOptions
from lakehouse.types import (
    BINARY_ROOTS,
    STRING_ROOTS,
    TIMESTAMP_ROOTS,
    ArrayType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
    timestamp_unit,
    type_param,
)

PARTITION_FIELD_ID_START = 1000  # partition field i has id 1000 + i
UNPARTITIONED_LAST_PARTITION_ID = 999
_PRIMITIVE = {
    "BOOLEAN": "boolean", "TINYINT": "int", "SMALLINT": "int", "INT": "int", "BIGINT": "long",
    "FLOAT": "float", "DOUBLE": "double", "DATE": "date", "TIME": "time",
    **dict.fromkeys(STRING_ROOTS, "string"), **dict.fromkeys(BINARY_ROOTS, "binary"),
}  # fmt: skip


def iceberg_type(dtype: DataType, field_id: int, version: int, depth: int = 1) -> Any:
    """The Iceberg type (JSON value), in format ``version``, of a field of type ``dtype`` whose
    id is ``field_id``."""
    root = dtype.root
    if root in _PRIMITIVE:
        return _PRIMITIVE[root]
    if root == "DECIMAL":
        return f"decimal({type_param(dtype, 'precision')}, {type_param(dtype, 'scale')})"
    if root in TIMESTAMP_ROOTS:
        name = "timestamp" if root == "TIMESTAMP" else "timestamptz"
        if timestamp_unit(type_param(dtype, "precision")) != "ns":
            return name
        if version < 3:
            raise UnsupportedFeatureError(
                f"a {dtype} column is an Iceberg {name}_ns, which needs Iceberg format version 3; "
                f"set 'metadata.iceberg.format-version'='3' or use a precision of 6 or less"
            )
        return f"{name}_ns"
    if isinstance(dtype, ArrayType):
        return {
            "type": "list",
            "element-id": structured_field_id(field_id, depth),
            "element-required": not dtype.element.nullable,
            "element": iceberg_type(dtype.element, field_id, version, depth + 1),
        }
    if isinstance(dtype, MapType | MultisetType):
        key = dtype.key if isinstance(dtype, MapType) else dtype.element
        value_required = not dtype.value.nullable if isinstance(dtype, MapType) else True
        return {
            "type": "map",
            "key-id": structured_field_id(field_id, depth, key=True),
            "key": iceberg_type(key, field_id, version, depth + 1),
            "value-id": structured_field_id(field_id, depth),
            "value-required": value_required,
            "value": iceberg_type(dtype.value, field_id, version, depth + 1)
            if isinstance(dtype, MapType)
            else "int",
        }
    if isinstance(dtype, RowType):
        return {"type": "struct", "fields": [iceberg_field(f, version) for f in dtype.fields]}
    raise UnsupportedFeatureError(f"a {dtype} column has no Iceberg type; Iceberg readers cannot read it")


def iceberg_field(f: DataField, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f.id,
        "name": f.name,
        "required": not f.type.nullable,
        "type": iceberg_type(f.type, f.id, version),
    }
    if f.description is not None:
        out["doc"] = f.description
    return out


def iceberg_schema(schema_id: int, fields: Sequence[DataField], version: int) -> dict[str, Any]:
    """The Iceberg schema, in format ``version``, of one Paimon schema (same id, same field ids)."""
    return {"type": "struct", "schema-id": schema_id, "fields": [iceberg_field(f, version) for f in fields]}


def check_iceberg(
    fields: Sequence[DataField], partition_keys: Sequence[str], options: CoreOptions, table: str
) -> None:
    """Refuse, when a table is created or altered, Iceberg metadata its readers could not use:
    deletion vectors (Iceberg readers would not apply them) and types without a counterpart in
    the Iceberg format version asked for."""
    settings = options.iceberg
    if not settings.enabled:
        return
    if options.get_bool(DELETION_VECTORS_ENABLED) and not (
        settings.format_version >= 3 and options.get_bool(DELETION_VECTORS_BITMAP64)
    ):
        raise UnsupportedFeatureError(
            f"table {table}: Iceberg readers apply deletion vectors from Iceberg format version 3, and "
            f"only 64-bit ones; set 'metadata.iceberg.format-version'='3' and "
            f"'deletion-vectors.bitmap64'='true' (or disable 'deletion-vectors.enabled')"
        )
    try:
        iceberg_schema(0, fields, settings.format_version)
    except UnsupportedFeatureError as e:
        raise UnsupportedFeatureError(f"table {table}: {e}") from None
    for f in fields:
        if (
            f.name in partition_keys
            and f.type.root in TIMESTAMP_ROOTS
            and timestamp_unit(type_param(f.type, "precision")) == "ns"
        ):
            raise UnsupportedFeatureError(
                f"table {table}: partition column {f.name} is a {f.type}; Iceberg manifests hold its "
                f"values as Avro timestamp-nanos, which Paimon does not write and Iceberg readers "
                f"(pyiceberg) do not read - partition by a column of precision 6 or less"
            )


def partition_spec(partition_fields: Sequence[DataField]) -> dict[str, Any]:
    """The identity partition spec (id 0) of the partition columns."""
    fields = [
        {"name": f.name, "transform": "identity", "source-id": f.id, "field-id": PARTITION_FIELD_ID_START + i}
        for i, f in enumerate(partition_fields)
    ]
    return {"spec-id": 0, "fields": fields}


def last_partition_id(partition_fields: Sequence[DataField]) -> int:
    count = len(partition_fields)
    return PARTITION_FIELD_ID_START + count - 1 if count else UNPARTITIONED_LAST_PARTITION_ID


# ---- values ---------------------------------------------------------------------------------


def iceberg_value(value: Any, dtype: DataType) -> Any:
    """A physical Paimon value (stats, partition rows) as Iceberg's Avro and bounds hold it:
    timestamps in microseconds (nanoseconds those of precision 7-9), times in microseconds,
    decimals unscaled."""
    if value is None:
        return None
    root = dtype.root
    if root in TIMESTAMP_ROOTS:
        unit = timestamp_unit(type_param(dtype, "precision"))
        return value * {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}[unit]  # ns: a timestamp_ns
    if root == "TIME":
        return value * 1000  # millis of the day
    if root == "DECIMAL":
        return int(Decimal(value).scaleb(type_param(dtype, "scale")))
    return value


def bound_bytes(value: Any, dtype: DataType) -> bytes | None:
    """Iceberg's single-value serialization of a column bound; None when it has none (nested
    types, NaN float bounds)."""
    root = dtype.root
    value = iceberg_value(value, dtype)
    if root == "BOOLEAN":
        return b"\x01" if value else b"\x00"
    if root in ("TINYINT", "SMALLINT", "INT", "DATE"):
        return struct.pack("<i", value)
    if root in ("BIGINT", "TIME") or root in TIMESTAMP_ROOTS:
        return struct.pack("<q", value)
    if root in ("FLOAT", "DOUBLE"):
        if value != value:  # NaN bounds nothing
            return None
        return struct.pack("<f" if root == "FLOAT" else "<d", value)
    if root in STRING_ROOTS:
        return str(value).encode("utf-8")
    if root in BINARY_ROOTS:
        return bytes(value)
    if root == "DECIMAL":
        return value.to_bytes(((value if value >= 0 else ~value).bit_length() + 8) // 8, "big", signed=True)
    return None


def bound_key(data: bytes, dtype: DataType) -> Any:
    """A value of :func:`bound_bytes` decoded so that bounds of ``dtype`` compare as the values do."""
    root = dtype.root
    if root in ("TINYINT", "SMALLINT", "INT", "DATE", "BIGINT", "TIME", "BOOLEAN") or root in TIMESTAMP_ROOTS:
        return int.from_bytes(data, "little", signed=True)
    if root in ("FLOAT", "DOUBLE"):
        return struct.unpack("<f" if root == "FLOAT" else "<d", data)[0]
    if root == "DECIMAL":
        return int.from_bytes(data, "big", signed=True)
    return data  # strings (UTF-8 orders as code points do) and binaries
