"""Iceberg manifests and manifest lists (format version 2) as Avro files, with Iceberg's field
ids on every field (``IcebergManifestFile``, ``IcebergManifestList``): what an Iceberg reader
plans a snapshot from. A manifest lists data files with their partition values, row counts and
column bounds; a manifest list lists manifests with their partitions' bounds."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import fastavro

from lakehouse.format.iceberg_schema import PARTITION_FIELD_ID_START, bound_bytes, iceberg_type, iceberg_value
from lakehouse.types import DataType

ADDED = 1  # manifest_entry.status
DATA = 0  # content: data files (manifests) / data (data_file.content)
FORMAT_VERSION = "2"


@dataclass
class DataFile:
    """One data file as an Iceberg manifest lists it."""

    path: str
    partition: list[Any]  # Paimon's physical values of the partition columns
    record_count: int
    size: int
    null_counts: dict[int, int] = field(default_factory=dict)  # by field id
    lower: dict[int, bytes] = field(default_factory=dict)
    upper: dict[int, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Partitioning:
    """The partition columns (names and Paimon types) of the identity spec."""

    names: tuple[str, ...]
    types: tuple[DataType, ...]
    source_ids: tuple[int, ...]

    def record(self, values: list[Any]) -> dict[str, Any]:
        """A file's partition values as the manifest's Avro record holds them."""
        return {
            name: _partition_value(value, dtype)
            for name, dtype, value in zip(self.names, self.types, values, strict=True)
        }


def _opt(name: str, avro_type: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None, "field-id": field_id}


def _req(name: str, avro_type: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": avro_type, "field-id": field_id}


def _int_map(name: str, value: str, field_id: int, key_id: int) -> dict[str, Any]:
    """An Iceberg map of int keys: an Avro array of key/value records."""
    items = {
        "type": "record",
        "name": f"k{key_id}_v{key_id + 1}",
        "fields": [_req("key", "int", key_id), _req("value", value, key_id + 1)],
    }
    return _opt(name, {"type": "array", "logicalType": "map", "items": items}, field_id)


_AVRO_PRIMITIVE = {
    "boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
    "string": "string", "binary": "bytes", "date": {"type": "int", "logicalType": "date"},
    "time": {"type": "long", "logicalType": "time-micros"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False},
    "timestamptz": {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True},
}  # fmt: skip


def _partition_avro(dtype: DataType, source_id: int) -> Any:
    iceberg = iceberg_type(dtype, source_id)
    if isinstance(iceberg, str) and iceberg.startswith("decimal"):
        return "bytes"  # unscaled big-endian, as bounds hold decimals
    return _AVRO_PRIMITIVE[iceberg]


def _partition_value(value: Any, dtype: DataType) -> Any:
    """A partition value as the manifest's Avro holds it."""
    if value is None:
        return None
    return bound_bytes(value, dtype) if dtype.root == "DECIMAL" else iceberg_value(value, dtype)


def manifest_schema(partitioning: Partitioning) -> dict[str, Any]:
    partition = {
        "type": "record",
        "name": "r102",
        "fields": [
            _opt(name, _partition_avro(dtype, source), PARTITION_FIELD_ID_START + i)
            for i, (name, dtype, source) in enumerate(
                zip(partitioning.names, partitioning.types, partitioning.source_ids, strict=True)
            )
        ],
    }
    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            _req("content", "int", 134),
            _req("file_path", "string", 100),
            _req("file_format", "string", 101),
            _req("partition", partition, 102),
            _req("record_count", "long", 103),
            _req("file_size_in_bytes", "long", 104),
            _int_map("null_value_counts", "long", 110, 121),
            _int_map("lower_bounds", "bytes", 125, 126),
            _int_map("upper_bounds", "bytes", 128, 129),
        ],
    }
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            _req("status", "int", 0),
            _opt("snapshot_id", "long", 1),
            _opt("sequence_number", "long", 3),
            _opt("file_sequence_number", "long", 4),
            _req("data_file", data_file, 2),
        ],
    }


MANIFEST_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "manifest_file",
    "fields": [
        _req("manifest_path", "string", 500),
        _req("manifest_length", "long", 501),
        _req("partition_spec_id", "int", 502),
        _req("content", "int", 517),
        _req("sequence_number", "long", 515),
        _req("min_sequence_number", "long", 516),
        _req("added_snapshot_id", "long", 503),
        _req("added_files_count", "int", 504),
        _req("existing_files_count", "int", 505),
        _req("deleted_files_count", "int", 506),
        _req("added_rows_count", "long", 512),
        _req("existing_rows_count", "long", 513),
        _req("deleted_rows_count", "long", 514),
        _opt(
            "partitions",
            {
                "type": "array",
                "element-id": 508,
                "items": {
                    "type": "record",
                    "name": "r508",
                    "fields": [
                        _req("contains_null", "boolean", 509),
                        _opt("contains_nan", "boolean", 518),
                        _opt("lower_bound", "bytes", 510),
                        _opt("upper_bound", "bytes", 511),
                    ],
                },
            },
            507,
        ),
    ],
}


def _pairs(values: dict[int, Any]) -> list[dict[str, Any]] | None:
    return [{"key": k, "value": v} for k, v in sorted(values.items())] or None


def _avro(schema: dict[str, Any], records: list[dict[str, Any]], codec: str, meta: dict[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec, metadata=meta)
    return out.getvalue()


def manifest_bytes(
    files: list[DataFile],
    snapshot_id: int,
    partitioning: Partitioning,
    schema_json: dict[str, Any],
    spec_json: dict[str, Any],
    codec: str,
) -> bytes:
    """A manifest of ``files``, all ADDED by snapshot ``snapshot_id`` (its sequence number)."""
    records = [
        {
            "status": ADDED,
            "snapshot_id": snapshot_id,
            "sequence_number": snapshot_id,
            "file_sequence_number": snapshot_id,
            "data_file": {
                "content": DATA,
                "file_path": f.path,
                "file_format": "PARQUET",
                "partition": partitioning.record(f.partition),
                "record_count": f.record_count,
                "file_size_in_bytes": f.size,
                "null_value_counts": _pairs(f.null_counts),
                "lower_bounds": _pairs(f.lower),
                "upper_bounds": _pairs(f.upper),
            },
        }
        for f in files
    ]
    meta = {
        "schema": json.dumps(schema_json),
        "schema-id": str(schema_json["schema-id"]),
        "partition-spec": json.dumps(spec_json["fields"]),
        "partition-spec-id": "0",
        "format-version": FORMAT_VERSION,
        "content": "data",
    }
    return _avro(manifest_schema(partitioning), records, codec, meta)


@dataclass(frozen=True)
class ManifestInfo:
    """A written manifest as its manifest list describes it."""

    path: str
    length: int
    files: int
    rows: int
    partitions: list[dict[str, Any]]  # r508 records, one per partition column


def partition_summaries(files: list[DataFile], partitioning: Partitioning) -> list[dict[str, Any]]:
    """Per partition column: whether some file's value is null, and the bounds of the others."""
    out = []
    for i, dtype in enumerate(partitioning.types):
        values = [f.partition[i] for f in files]
        present = [v for v in values if v is not None]
        root = dtype.root
        nan = root in ("FLOAT", "DOUBLE") and any(v != v for v in present)
        bounded = [v for v in present if v == v]
        lo = hi = None
        if bounded:
            lo, hi = bound_bytes(min(bounded), dtype), bound_bytes(max(bounded), dtype)
        out.append(
            {
                "contains_null": len(present) < len(values),
                "contains_nan": nan if root in ("FLOAT", "DOUBLE") else None,
                "lower_bound": lo,
                "upper_bound": hi,
            }
        )
    return out


def manifest_list_bytes(
    manifests: list[ManifestInfo], snapshot_id: int, parent_id: int | None, codec: str
) -> bytes:
    records = [
        {
            "manifest_path": m.path,
            "manifest_length": m.length,
            "partition_spec_id": 0,
            "content": DATA,
            "sequence_number": snapshot_id,
            "min_sequence_number": snapshot_id,
            "added_snapshot_id": snapshot_id,
            "added_files_count": m.files,
            "existing_files_count": 0,
            "deleted_files_count": 0,
            "added_rows_count": m.rows,
            "existing_rows_count": 0,
            "deleted_rows_count": 0,
            "partitions": m.partitions,
        }
        for m in manifests
    ]
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_id is None else str(parent_id),
        "sequence-number": str(snapshot_id),
        "format-version": FORMAT_VERSION,
    }
    return _avro(MANIFEST_LIST_SCHEMA, records, codec, meta)


def manifest_paths(data: bytes) -> list[str]:
    """The manifests a manifest list names."""
    return [r["manifest_path"] for r in fastavro.reader(io.BytesIO(data)) if isinstance(r, dict)]
