"""Avro encoding of manifests, manifest lists and index manifests, as Java Paimon writes them.

Schemas mirror ``AvroSchemaConverter`` applied to Paimon's row types: top record
``org.apache.paimon.avro.generated.record``, nested rows ``record_<FIELD>``, nullable fields as
``["null", X]`` with null first, and a leading ``_VERSION`` format identifier. Files are read with
the schema stored in them and fields looked up by name, so files from pypaimon (other record
names, extra fields) read as well.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import fastavro

from lakehouse.errors import InvalidOptionError
from lakehouse.manifest.avro_container import Container, parse
from lakehouse.manifest.entries import (
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)

_JAVA_CODECS = ("null", "deflate", "snappy", "bzip2", "xz", "zstandard")  # CodecFactory.fromString
MANIFEST_VERSION = 2  # ManifestEntrySerializer / ManifestFileMetaSerializer format identifier
_NAMESPACE = "org.apache.paimon.avro.generated"


def _nullable(avro_type: Any) -> list:
    return ["null", avro_type]


def _opt(name: str, avro_type: Any) -> dict:
    return {"name": name, "type": _nullable(avro_type), "default": None}


def _record(name: str, fields: list) -> dict:
    return {"type": "record", "name": name, "fields": fields}


def _top_record(fields: list) -> dict:
    """The top-level record of a manifest file: ``_VERSION`` first (ManifestSchemaUtils)."""
    parsed = fastavro.parse_schema(
        {
            "type": "record",
            "name": "record",
            "namespace": _NAMESPACE,
            "fields": [{"name": "_VERSION", "type": "int"}, *fields],
        }
    )
    assert isinstance(parsed, dict)  # a record's schema parses to a dict
    return parsed


def _stats(record_name: str) -> dict:
    return _record(
        record_name,
        [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            _opt("_NULL_COUNTS", {"type": "array", "items": ["null", "long"]}),
        ],
    )


MANIFEST_LIST_SCHEMA = _top_record(
    [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats("record__PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        _opt("_MIN_BUCKET", "int"),
        _opt("_MAX_BUCKET", "int"),
        _opt("_MIN_LEVEL", "int"),
        _opt("_MAX_LEVEL", "int"),
        _opt("_MIN_ROW_ID", "long"),
        _opt("_MAX_ROW_ID", "long"),
    ]
)

MANIFEST_ENTRY_SCHEMA = _top_record(
    [
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {
            "name": "_FILE",
            "type": _record(
                "record__FILE",
                [
                    {"name": "_FILE_NAME", "type": "string"},
                    {"name": "_FILE_SIZE", "type": "long"},
                    {"name": "_ROW_COUNT", "type": "long"},
                    {"name": "_MIN_KEY", "type": "bytes"},
                    {"name": "_MAX_KEY", "type": "bytes"},
                    {"name": "_KEY_STATS", "type": _stats("record__FILE__KEY_STATS")},
                    {"name": "_VALUE_STATS", "type": _stats("record__FILE__VALUE_STATS")},
                    {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
                    {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
                    {"name": "_SCHEMA_ID", "type": "long"},
                    {"name": "_LEVEL", "type": "int"},
                    {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
                    _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
                    _opt("_DELETE_ROW_COUNT", "long"),
                    _opt("_EMBEDDED_FILE_INDEX", "bytes"),
                    _opt("_FILE_SOURCE", "int"),
                    _opt("_VALUE_STATS_COLS", {"type": "array", "items": "string"}),
                    _opt("_EXTERNAL_PATH", "string"),
                    _opt("_FIRST_ROW_ID", "long"),
                    _opt("_WRITE_COLS", {"type": "array", "items": "string"}),
                    _opt("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
                ],
            ),
        },
    ]
)


INDEX_MANIFEST_VERSION = 1  # IndexManifestEntrySerializer format identifier

_DV_RANGE = _record(
    "record__DELETIONS_VECTORS_RANGES",
    [
        {"name": "f0", "type": "string"},
        {"name": "f1", "type": "int"},
        {"name": "f2", "type": "int"},
        _opt("_CARDINALITY", "long"),
    ],
)
_GLOBAL_INDEX = _record(
    "record__GLOBAL_INDEX",
    [
        {"name": "_ROW_RANGE_START", "type": "long"},
        {"name": "_ROW_RANGE_END", "type": "long"},
        {"name": "_INDEX_FIELD_ID", "type": "int"},
        _opt("_EXTRA_FIELD_IDS", {"type": "array", "items": "int"}),
        _opt("_INDEX_META", "bytes"),
        _opt("_SOURCE_META", "bytes"),
    ],
)
INDEX_MANIFEST_SCHEMA = _top_record(
    [
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        _opt("_DELETIONS_VECTORS_RANGES", {"type": "array", "items": _nullable(_DV_RANGE)}),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_GLOBAL_INDEX", _GLOBAL_INDEX),
    ]
)


# ---- records <-> dataclasses -----------------------------------------------------------------


def _stats_record(s: SimpleStats) -> dict:
    return {"_MIN_VALUES": s.min_values, "_MAX_VALUES": s.max_values, "_NULL_COUNTS": list(s.null_counts)}


def _stats_from(r: dict) -> SimpleStats:
    return SimpleStats(r["_MIN_VALUES"], r["_MAX_VALUES"], tuple(r.get("_NULL_COUNTS") or ()))


def _tuple_or_none(v: list | None) -> tuple | None:
    return None if v is None else tuple(v)


def entry_record(e: ManifestEntry) -> dict:
    f = e.file
    return {
        "_VERSION": MANIFEST_VERSION,
        "_KIND": int(e.kind),
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": {
            "_FILE_NAME": f.file_name,
            "_FILE_SIZE": f.file_size,
            "_ROW_COUNT": f.row_count,
            "_MIN_KEY": f.min_key,
            "_MAX_KEY": f.max_key,
            "_KEY_STATS": _stats_record(f.key_stats),
            "_VALUE_STATS": _stats_record(f.value_stats),
            "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
            "_SCHEMA_ID": f.schema_id,
            "_LEVEL": f.level,
            "_EXTRA_FILES": list(f.extra_files),
            "_CREATION_TIME": f.creation_time,
            "_DELETE_ROW_COUNT": f.delete_row_count,
            "_EMBEDDED_FILE_INDEX": f.embedded_index,
            "_FILE_SOURCE": None if f.file_source is None else int(f.file_source),
            "_VALUE_STATS_COLS": None if f.value_stats_cols is None else list(f.value_stats_cols),
            "_EXTERNAL_PATH": f.external_path,
            "_FIRST_ROW_ID": f.first_row_id,
            "_WRITE_COLS": None if f.write_cols is None else list(f.write_cols),
            "_WRITE_COLS_SEQUENCES": None if f.write_cols_sequences is None else list(f.write_cols_sequences),
        },
    }


def entry_from(r: dict) -> ManifestEntry:
    f = r["_FILE"]
    creation = f.get("_CREATION_TIME")
    if isinstance(creation, datetime):
        creation = _millis(creation)
    meta = DataFileMeta(
        file_name=f["_FILE_NAME"],
        file_size=f["_FILE_SIZE"],
        row_count=f["_ROW_COUNT"],
        min_key=f["_MIN_KEY"],
        max_key=f["_MAX_KEY"],
        key_stats=_stats_from(f["_KEY_STATS"]),
        value_stats=_stats_from(f["_VALUE_STATS"]),
        min_sequence_number=f["_MIN_SEQUENCE_NUMBER"],
        max_sequence_number=f["_MAX_SEQUENCE_NUMBER"],
        schema_id=f["_SCHEMA_ID"],
        level=f["_LEVEL"],
        extra_files=tuple(f.get("_EXTRA_FILES") or ()),
        creation_time=creation,
        delete_row_count=f.get("_DELETE_ROW_COUNT"),
        embedded_index=f.get("_EMBEDDED_FILE_INDEX"),
        file_source=f.get("_FILE_SOURCE"),
        value_stats_cols=_tuple_or_none(f.get("_VALUE_STATS_COLS")),
        external_path=f.get("_EXTERNAL_PATH"),
        first_row_id=f.get("_FIRST_ROW_ID"),
        write_cols=_tuple_or_none(f.get("_WRITE_COLS")),
        write_cols_sequences=_tuple_or_none(f.get("_WRITE_COLS_SEQUENCES")),
    )
    return ManifestEntry(FileKind(r["_KIND"]), r["_PARTITION"], r["_BUCKET"], r["_TOTAL_BUCKETS"], meta)


def manifest_meta_record(m: ManifestFileMeta) -> dict:
    return {
        "_VERSION": MANIFEST_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": _stats_record(m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
    }


def manifest_meta_from(r: dict) -> ManifestFileMeta:
    return ManifestFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        num_added_files=r["_NUM_ADDED_FILES"],
        num_deleted_files=r["_NUM_DELETED_FILES"],
        partition_stats=_stats_from(r["_PARTITION_STATS"]),
        schema_id=r["_SCHEMA_ID"],
        min_bucket=r.get("_MIN_BUCKET"),
        max_bucket=r.get("_MAX_BUCKET"),
        min_level=r.get("_MIN_LEVEL"),
        max_level=r.get("_MAX_LEVEL"),
        min_row_id=r.get("_MIN_ROW_ID"),
        max_row_id=r.get("_MAX_ROW_ID"),
    )


def index_entry_record(e: IndexManifestEntry) -> dict:
    f = e.index_file
    ranges = None
    if f.dv_ranges is not None:
        ranges = [
            {"f0": d.data_file, "f1": d.offset, "f2": d.length, "_CARDINALITY": d.cardinality}
            for d in f.dv_ranges
        ]
    return {
        "_VERSION": INDEX_MANIFEST_VERSION,
        "_KIND": int(e.kind),
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_INDEX_TYPE": f.index_type,
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_DELETIONS_VECTORS_RANGES": ranges,
        "_EXTERNAL_PATH": f.external_path,
        "_GLOBAL_INDEX": f.global_index,
    }


def index_entry_from(r: dict) -> IndexManifestEntry:
    ranges = r.get("_DELETIONS_VECTORS_RANGES")
    dv = (
        None
        if ranges is None
        else tuple(
            DeletionVectorMeta(d["f0"], d["f1"], d["f2"], d.get("_CARDINALITY"))
            for d in ranges
            if d is not None
        )
    )
    meta = IndexFileMeta(
        r["_INDEX_TYPE"],
        r["_FILE_NAME"],
        r["_FILE_SIZE"],
        r["_ROW_COUNT"],
        dv,
        r.get("_EXTERNAL_PATH"),
        r.get("_GLOBAL_INDEX"),
    )
    return IndexManifestEntry(FileKind(r["_KIND"]), r["_PARTITION"], r["_BUCKET"], meta)


def _millis(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


# ---- container files -------------------------------------------------------------------------


def avro_codec(compression: str) -> str:
    """Avro codec for ``manifest.compression`` (AvroFileFormat: "zstd" means zstandard)."""
    name = "zstandard" if compression.lower() == "zstd" else compression
    if name not in _JAVA_CODECS:
        raise InvalidOptionError(
            f"manifest.compression={compression!r} is not an Avro codec; use zstd, snappy, deflate or null"
        )
    return name


BLOCK_BYTES = 16000  # encoded records per block, about


@dataclass(frozen=True)
class _Payload:
    """Encoded records to write as one block (what ``Writer.write_block`` takes of a block)."""

    bytes_: io.BytesIO
    num_records: int


class ContainerWriter:
    """Incrementally encodes one Avro object container file in memory."""

    def __init__(self, schema: dict, codec: str) -> None:
        self._buf = io.BytesIO()
        level = 1 if codec == "zstandard" else None  # file.compression.zstd-level default
        # blocks of about 16 KB (fastavro's and pypaimon's default): a file of more blocks is
        # decoded in more lanes at once (avro_columns), for 2% more bytes than 64 KB blocks
        self._writer = fastavro.write.Writer(
            self._buf, schema, codec=codec, compression_level=level, sync_interval=BLOCK_BYTES
        )
        self._copied: list[bytes] = []  # encoded records of copied blocks, not yet written
        self._copied_records = self._copied_bytes = 0

    def write(self, record: dict) -> None:
        if self._copied:  # records stay in the order they came
            self._write_copied()
        self._writer.write(record)

    def append_file(self, container: Container) -> bool:
        """Append every record of a container file by copying the encoded records of its blocks
        (coalesced into blocks of about the usual size), none decoded; False, appending nothing,
        when the file was written with another schema (its records would not read under this
        file's header)."""
        if container.schema != self._writer.metadata["avro.schema"]:
            return False
        for count, data in container.blocks:
            self._copied.append(data)
            self._copied_records += count
            self._copied_bytes += len(data)
            if self._copied_bytes >= BLOCK_BYTES:
                self._write_copied()
        return True

    def _write_copied(self) -> None:
        if self._copied_records:
            payload = _Payload(io.BytesIO(b"".join(self._copied)), self._copied_records)
            self._writer.write_block(payload)
        self._copied, self._copied_records, self._copied_bytes = [], 0, 0

    def flushed_size(self) -> int:
        """Bytes of the file so far, after encoding every pending record."""
        self._write_copied()
        self._writer.flush()
        return self._buf.tell()

    def finish(self) -> bytes:
        self._write_copied()
        self._writer.flush()
        return self._buf.getvalue()


def write_container(schema: dict, records: Iterable[dict], codec: str) -> bytes:
    """Encode records as one Avro object container file."""
    writer = ContainerWriter(schema, codec)
    for r in records:
        writer.write(r)
    return writer.finish()


def read_container(data: bytes) -> Iterator[dict]:
    """Decode the records of an Avro object container file with its own schema (checked first:
    :mod:`lakehouse.manifest.avro_container`; damage is :class:`CorruptFileError`)."""
    return parse(data).records()
