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

from lakehouse.format.iceberg_schema import (
    PARTITION_FIELD_ID_START,
    bound_bytes,
    bound_key,
    iceberg_type,
    iceberg_value,
)
from lakehouse.manifest import binary_row
from lakehouse.types import DataType, type_param

EXISTING, ADDED, DELETED = 0, 1, 2  # manifest_entry.status
DATA, DELETES = (
    0,
    1,
)  # content: of manifests (data files, delete files) and of data_file (data, position deletes)


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

    def values(self, partition: bytes) -> list[Any]:
        """The physical values of a serialized Paimon partition row."""
        return binary_row.decode_row(binary_row.deserialize(partition)[1], list(self.types))

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
    """The Avro type of a partition value (Iceberg's: a decimal is a fixed of the fewest bytes
    its precision needs)."""
    if dtype.root == "DECIMAL":
        precision, scale = type_param(dtype, "precision"), type_param(dtype, "scale")
        size = next(n for n in range(1, 17) if 2 ** (8 * n - 1) > 10**precision - 1)
        return {"type": "fixed", "name": f"decimal_{source_id}", "size": size, "logicalType": "decimal",
                "precision": precision, "scale": scale}  # fmt: skip
    return _AVRO_PRIMITIVE[
        iceberg_type(dtype, source_id, version=3)
    ]  # the schema's check refused what readers lack


def _partition_value(value: Any, dtype: DataType) -> Any:
    """A partition value as the manifest's Avro holds it (a decimal as a ``Decimal``)."""
    if value is None or dtype.root == "DECIMAL":
        return value
    return iceberg_value(value, dtype)


_V3_DATA_FILE = [  # row lineage, and where a deletion vector is
    _opt("first_row_id", "long", 142),
    _opt("referenced_data_file", "string", 143),
    _opt("content_offset", "long", 144),
    _opt("content_size_in_bytes", "long", 145),
]


def manifest_schema(partitioning: Partitioning, version: int) -> dict[str, Any]:
    """The Avro schema of a manifest in Iceberg format ``version`` (3 adds row lineage)."""
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
            *(_V3_DATA_FILE if version >= 3 else []),
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


_MANIFEST_LIST_SCHEMA: dict[str, Any] = {
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


def manifest_list_schema(version: int) -> dict[str, Any]:
    """The Avro schema of a manifest list in Iceberg format ``version`` (3 adds row lineage)."""
    if version < 3:
        return _MANIFEST_LIST_SCHEMA
    return {
        **_MANIFEST_LIST_SCHEMA,
        "fields": [*_MANIFEST_LIST_SCHEMA["fields"], _opt("first_row_id", "long", 520)],
    }


def _pairs(values: dict[int, Any]) -> list[dict[str, Any]] | None:
    return [{"key": k, "value": v} for k, v in sorted(values.items())] or None


def _avro(schema: dict[str, Any], records: list[dict[str, Any]], codec: str, meta: dict[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec, metadata=meta)
    return out.getvalue()


def read_records(data: bytes) -> list[dict[str, Any]]:
    """The records of a manifest or a manifest list this module wrote."""
    return [r for r in fastavro.reader(io.BytesIO(data)) if isinstance(r, dict)]


def _added(snapshot_id: int, data_file: dict[str, Any]) -> dict[str, Any]:
    """A manifest entry of a file snapshot ``snapshot_id`` adds (its sequence numbers)."""
    return {
        "status": ADDED,
        "snapshot_id": snapshot_id,
        "sequence_number": snapshot_id,
        "file_sequence_number": snapshot_id,
        "data_file": data_file,
    }


def added_entry(f: DataFile, snapshot_id: int, partitioning: Partitioning) -> dict[str, Any]:
    """The manifest entry of a data file snapshot ``snapshot_id`` adds."""
    return _added(
        snapshot_id,
        {
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
    )


def deletion_vector_entry(
    puffin: str,
    puffin_size: int,
    data_file: str,
    partition: list[Any],
    offset: int,
    length: int,
    cardinality: int,
    snapshot_id: int,
    partitioning: Partitioning,
) -> dict[str, Any]:
    """The manifest entry (format 3) of the deletion vector of ``data_file``: a blob of ``length``
    bytes at ``offset`` of a Puffin file, deleting ``cardinality`` rows."""
    return _added(
        snapshot_id,
        {
            "content": DELETES,
            "file_path": puffin,
            "file_format": "PUFFIN",
            "partition": partitioning.record(partition),
            "record_count": cardinality,
            "file_size_in_bytes": puffin_size,
            "referenced_data_file": data_file,
            "content_offset": offset,
            "content_size_in_bytes": length,
        },
    )


def manifest_bytes(
    entries: list[dict[str, Any]],
    partitioning: Partitioning,
    schema_json: dict[str, Any],
    spec_json: dict[str, Any],
    codec: str,
    version: int,
    content: int = DATA,
) -> bytes:
    """A manifest of ``entries`` (records of :func:`added_entry`, or read back and restated; of
    :func:`deletion_vector_entry` for ``DELETES``) in Iceberg format ``version``."""
    meta = {
        "schema": json.dumps(schema_json),
        "schema-id": str(schema_json["schema-id"]),
        "partition-spec": json.dumps(spec_json["fields"]),
        "partition-spec-id": "0",
        "format-version": str(version),
        "content": "deletes" if content == DELETES else "data",
    }
    return _avro(manifest_schema(partitioning, version), entries, codec, meta)


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


def merge_summaries(
    summaries: list[list[dict[str, Any]]], partitioning: Partitioning
) -> list[dict[str, Any]]:
    """The partition summaries of a manifest holding the files of manifests summarized so."""
    out = []
    for i, dtype in enumerate(partitioning.types):
        column = [s[i] for s in summaries]
        lows = [c["lower_bound"] for c in column if c["lower_bound"] is not None]
        highs = [c["upper_bound"] for c in column if c["upper_bound"] is not None]
        nans = [c["contains_nan"] for c in column if c["contains_nan"] is not None]
        out.append(
            {
                "contains_null": any(c["contains_null"] for c in column),
                "contains_nan": any(nans) if nans else None,
                "lower_bound": min(lows, key=lambda b: bound_key(b, dtype)) if lows else None,
                "upper_bound": max(highs, key=lambda b: bound_key(b, dtype)) if highs else None,
            }
        )
    return out


def may_contain(summary: list[dict[str, Any]], partition: list[Any], partitioning: Partitioning) -> bool:
    """Whether a manifest of partition summaries ``summary`` may hold a file of ``partition``."""
    for column, value, dtype in zip(summary, partition, partitioning.types, strict=True):
        if value is None:
            if not column["contains_null"]:
                return False
            continue
        key = bound_bytes(value, dtype)
        if key is None:  # NaN
            if not column["contains_nan"]:
                return False
            continue
        lo, hi = column["lower_bound"], column["upper_bound"]
        if lo is None or hi is None:
            return False
        if not bound_key(lo, dtype) <= bound_key(key, dtype) <= bound_key(hi, dtype):
            return False
    return True


def list_record(
    path: str,
    length: int,
    entries: list[dict[str, Any]],
    snapshot_id: int,
    partitions: list[dict[str, Any]],
    content: int = DATA,
) -> dict[str, Any]:
    """A manifest list's record of a manifest snapshot ``snapshot_id`` wrote, with ``entries``."""
    counts = {ADDED: [0, 0], EXISTING: [0, 0], DELETED: [0, 0]}
    for e in entries:
        count = counts[e["status"]]
        count[0] += 1
        count[1] += e["data_file"]["record_count"]
    live = [e["sequence_number"] for e in entries if e["status"] != DELETED]
    return {
        "manifest_path": path,
        "manifest_length": length,
        "partition_spec_id": 0,
        "content": content,
        "sequence_number": snapshot_id,
        "min_sequence_number": min(live, default=snapshot_id),
        "added_snapshot_id": snapshot_id,
        "added_files_count": counts[ADDED][0],
        "existing_files_count": counts[EXISTING][0],
        "deleted_files_count": counts[DELETED][0],
        "added_rows_count": counts[ADDED][1],
        "existing_rows_count": counts[EXISTING][1],
        "deleted_rows_count": counts[DELETED][1],
        "partitions": partitions,
    }


def manifest_list_bytes(
    records: list[dict[str, Any]], snapshot_id: int, parent_id: int | None, codec: str, version: int
) -> bytes:
    """The manifest list of snapshot ``snapshot_id`` in Iceberg format ``version``: records of
    :func:`list_record`, its own and those it keeps from its parent."""
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_id is None else str(parent_id),
        "sequence-number": str(snapshot_id),
        "format-version": str(version),
    }
    return _avro(manifest_list_schema(version), records, codec, meta)


def assign_row_ids(records: list[dict[str, Any]], next_row_id: int) -> tuple[list[dict[str, Any]], int]:
    """Row lineage (format 3): the manifests of a list that have no first row id yet get the next
    ones, as many as their added and existing rows; returns them and how many ids they took."""
    out, watermark = [], next_row_id
    for r in records:
        if r["content"] == DATA and r.get("first_row_id") is None:
            r = {**r, "first_row_id": watermark}
            watermark += r["added_rows_count"] + r["existing_rows_count"]
        out.append(r)
    return out, watermark - next_row_id


def with_row_ids(entries: list[dict[str, Any]], first_row_id: int | None) -> list[dict[str, Any]]:
    """The entries of a manifest whose files inherit row ids from ``first_row_id`` (in order,
    DELETED ones none), each holding its own: copied into another manifest, a file keeps its ids."""
    if first_row_id is None:
        return entries
    out, watermark = [], first_row_id
    for e in entries:
        f = e["data_file"]
        if e["status"] != DELETED and f.get("first_row_id") is None:
            e = {**e, "data_file": {**f, "first_row_id": watermark}}
            watermark += f["record_count"]
        out.append(e)
    return out
