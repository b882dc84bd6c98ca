"""System tables over the data files of a snapshot: ``$files``, ``$partitions``, ``$buckets``.

Strings render values as Paimon's casts to STRING do: a partition row as ``{v1, v2}``, keys as
``[k1, k2]``, per-column stats as ``{col=value, ...}`` ordered by column name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.manifest import binary_row, stats
from lakehouse.manifest.entries import DataFileMeta, FileSource, ManifestEntry
from lakehouse.options import PARTITION_DEFAULT_NAME
from lakehouse.system.metadata import selected_snapshot
from lakehouse.system.values import TS, partition_string, schema_of, table_of, text
from lakehouse.types import DataType

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


def _partition_path(table: TableStore, partition: bytes) -> str | None:
    """``k1=v1/k2=v2`` as ``$partitions`` prints it."""
    schema = table.schema
    types = schema.partition_types()
    if not types:
        return None
    values = binary_row.decode_row(binary_row.deserialize(partition)[1], types)
    default = schema.core_options.get(PARTITION_DEFAULT_NAME)
    return "/".join(
        f"{k}={default if v is None else text(t, v)}"
        for k, t, v in zip(schema.partition_keys, types, values, strict=True)
    )


def _entries(table: TableStore, options: Mapping[str, str]) -> tuple[TableStore, list[ManifestEntry]]:
    snap = selected_snapshot(table, options)
    if snap is None:
        return table, []
    return table, table.live_entries(snap)


# ---- $files ----------------------------------------------------------------------------------

FILES = schema_of(
    ("partition", pa.string(), True),
    ("bucket", pa.int32(), False),
    ("file_path", pa.string(), False),
    ("file_format", pa.string(), False),
    ("schema_id", pa.int64(), False),
    ("level", pa.int32(), False),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("min_key", pa.string(), True),
    ("max_key", pa.string(), True),
    ("null_value_counts", pa.string(), False),
    ("min_value_stats", pa.string(), False),
    ("max_value_stats", pa.string(), False),
    ("min_sequence_number", pa.int64(), True),
    ("max_sequence_number", pa.int64(), True),
    ("creation_time", TS, True),
    ("deleteRowCount", pa.int64(), True),
    ("file_source", pa.string(), True),
    ("first_row_id", pa.int64(), True),
    ("write_cols", pa.list_(pa.string()), True),
)


def files(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    table, entries = _entries(table, options)
    rows = []
    for e in entries:
        f = e.file
        schema = table.schema_by_id(f.schema_id)
        key_types = [k.type for k in schema.fields_named(schema.trimmed_primary_keys)]
        counts, lows, highs = _value_stats(table, f)
        bucket_path = table.bucket_path(e.partition, e.bucket)
        rows.append(
            dict(
                partition=partition_string(table, e.partition),
                bucket=e.bucket,
                file_path=table.paths.data_file(bucket_path, f.file_name, f.external_path),
                file_format=f.file_name.rsplit(".", 1)[-1],
                schema_id=f.schema_id,
                level=f.level,
                record_count=f.row_count,
                file_size_in_bytes=f.file_size,
                min_key=_key_string(key_types, f.min_key),
                max_key=_key_string(key_types, f.max_key),
                null_value_counts=counts,
                min_value_stats=lows,
                max_value_stats=highs,
                min_sequence_number=f.min_sequence_number,
                max_sequence_number=f.max_sequence_number,
                creation_time=f.creation_time,
                deleteRowCount=f.delete_row_count,
                file_source=None if f.file_source is None else FileSource(f.file_source).name,
                first_row_id=f.first_row_id,
                write_cols=None if f.write_cols is None else list(f.write_cols),
            )
        )
    return table_of(FILES, rows)


def _key_string(types: list[DataType], key: bytes) -> str | None:
    if not types or not key:
        return None
    arity, row = binary_row.deserialize(key)
    if arity <= 0:
        return None
    values = binary_row.decode_row(row, types)
    return "[" + ", ".join(text(t, v) for t, v in zip(types, values, strict=True)) + "]"


def _value_stats(table: TableStore, f: DataFileMeta) -> tuple[str, str, str]:
    """Null counts, minimums and maximums per column, as ``{col=value, ...}`` by column name."""
    schema = table.schema_by_id(f.schema_id)
    cols = f.stats_columns
    fields = list(schema.fields) if cols is None else schema.fields_named(list(cols))
    decoded = stats.decode(f.value_stats, [x.type for x in fields], f.row_count)
    by_name = sorted(zip(fields, decoded, strict=True), key=lambda p: p[0].name)

    def render(pick) -> str:
        return "{" + ", ".join(f"{fd.name}={pick(fd, st)}" for fd, st in by_name) + "}"

    return (
        render(lambda fd, st: "null" if st.null_count is None else st.null_count),
        render(lambda fd, st: text(fd.type, st.min)),
        render(lambda fd, st: text(fd.type, st.max)),
    )


# ---- $partitions, $buckets -------------------------------------------------------------------

PARTITIONS = schema_of(
    ("partition", pa.string(), True),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("file_count", pa.int64(), False),
    ("last_update_time", TS, True),
    ("created_at", TS, True),
    ("created_by", pa.string(), True),
    ("updated_by", pa.string(), True),
    ("options", pa.string(), True),
    ("total_buckets", pa.int32(), False),
    ("done", pa.bool_(), False),
    ("deleted_record_count", pa.int64(), True),
)
BUCKETS = schema_of(
    ("partition", pa.string(), True),
    ("bucket", pa.int32(), False),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("file_count", pa.int64(), False),
    ("last_update_time", TS, True),
)


def group_files(entries: list[ManifestEntry], key) -> dict:
    """Per group: record count, bytes, files, newest creation time, total buckets."""
    out: dict = {}
    for e in entries:
        g = out.setdefault(key(e), [0, 0, 0, None, e.total_buckets])
        g[0] += e.file.row_count
        g[1] += e.file.file_size
        g[2] += 1
        if e.file.creation_time is not None:
            g[3] = max(g[3] or 0, e.file.creation_time)
    return out


def partitions(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    table, entries = _entries(table, options)
    rows = [
        dict(
            partition=_partition_path(table, p),
            record_count=n,
            file_size_in_bytes=size,
            file_count=count,
            last_update_time=last,
            created_at=None,
            created_by=None,
            updated_by=None,
            options=None,
            total_buckets=buckets,
            done=False,
            deleted_record_count=None,
        )
        for p, (n, size, count, last, buckets) in group_files(entries, lambda e: e.partition).items()
    ]
    return table_of(PARTITIONS, sorted(rows, key=lambda r: r["partition"] or ""))


def buckets(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    table, entries = _entries(table, options)
    groups = group_files(entries, lambda e: (e.partition, e.bucket))
    rows = [
        dict(
            partition=partition_string(table, p),
            bucket=b,
            record_count=n,
            file_size_in_bytes=size,
            file_count=count,
            last_update_time=last,
        )
        for (p, b), (n, size, count, last, _) in groups.items()
    ]
    return table_of(BUCKETS, sorted(rows, key=lambda r: (r["partition"] or "", r["bucket"])))


TABLES = {"files": files, "partitions": partitions, "buckets": buckets}
