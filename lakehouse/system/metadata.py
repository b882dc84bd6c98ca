"""System tables over a table's metadata files: snapshots, schemas, options, tags, branches,
consumers, manifests, statistics, aggregation fields and table indexes.

Columns and types are those of Paimon's ``SnapshotsTable``, ``SchemasTable``, ... Timestamps
(``TIMESTAMP(3)``) carry the epoch milliseconds Paimon stores.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import CorruptFileError, InvalidArgumentError
from lakehouse.manifest.entries import IndexFileMeta
from lakehouse.ops.branches import list_branches
from lakehouse.options import SCAN_SNAPSHOT_ID, SCAN_TAG_NAME
from lakehouse.snapshot import Snapshot
from lakehouse.store import consumers, tags
from lakehouse.system.values import TS, partition_string, row_string, schema_of, table_of

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


def travel(table: TableStore, options: Mapping[str, str]) -> tuple[Snapshot | None, TableStore]:
    """The snapshot ``scan.snapshot-id`` or ``scan.tag-name`` names (else the latest) and the
    table as a read of it sees it (:meth:`TableStore.travel`)."""
    sid, tag = options.get(SCAN_SNAPSHOT_ID), options.get(SCAN_TAG_NAME)
    if sid is not None and tag is not None:
        raise InvalidArgumentError(f"table {table.name}: set only one of scan.snapshot-id and scan.tag-name")
    if sid is not None and not str(sid).isdigit():
        raise InvalidArgumentError(f"table {table.name}: scan.snapshot-id={sid!r} is not a snapshot id")
    return table.travel(int(sid) if sid is not None else None, None, tag)


def selected_snapshot(table: TableStore, options: Mapping[str, str]) -> Snapshot | None:
    """The snapshot the options address (see :func:`travel`)."""
    return travel(table, options)[0]


def _flat_json(value) -> str:
    """``JsonSerdeUtil.toFlatJson``: compact JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---- $snapshots -----------------------------------------------------------------------------

SNAPSHOTS = schema_of(
    ("snapshot_id", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("commit_user", pa.string(), False),
    ("commit_identifier", pa.int64(), False),
    ("commit_kind", pa.string(), False),
    ("commit_time", TS, False),
    ("base_manifest_list", pa.string(), False),
    ("delta_manifest_list", pa.string(), False),
    ("changelog_manifest_list", pa.string(), True),
    ("total_record_count", pa.int64(), True),
    ("delta_record_count", pa.int64(), True),
    ("changelog_record_count", pa.int64(), True),
    ("watermark", pa.int64(), True),
    ("next_row_id", pa.int64(), True),
    ("operation", pa.string(), True),
    ("writer_version", pa.string(), True),
)


def snapshots(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    manager = table.snapshots
    rows = []
    for sid in manager.snapshot_ids():
        s = manager.snapshot(sid)
        rows.append(
            dict(
                snapshot_id=s.id,
                schema_id=s.schema_id,
                commit_user=s.commit_user,
                commit_identifier=s.commit_identifier,
                commit_kind=s.commit_kind.value,
                commit_time=s.time_millis,
                base_manifest_list=s.base_manifest_list,
                delta_manifest_list=s.delta_manifest_list,
                changelog_manifest_list=s.changelog_manifest_list,
                total_record_count=s.total_record_count,
                delta_record_count=s.delta_record_count,
                changelog_record_count=s.changelog_record_count,
                watermark=s.watermark,
                next_row_id=s.next_row_id,
                operation=s.operation,
                writer_version=s.writer_version,
            )
        )
    return table_of(SNAPSHOTS, rows)


# ---- $schemas, $options, $aggregation_fields --------------------------------------------------

SCHEMAS = schema_of(
    ("schema_id", pa.int64(), False),
    ("fields", pa.string(), False),
    ("partition_keys", pa.string(), False),
    ("primary_keys", pa.string(), False),
    ("options", pa.string(), False),
    ("comment", pa.string(), True),
    ("update_time", TS, False),
)


def schemas(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    rows = []
    for sid in table.schema_manager.schema_ids():
        s = table.schema_by_id(sid)
        rows.append(
            dict(
                schema_id=s.id,
                fields=_flat_json([f.to_json() for f in s.fields]),
                partition_keys=_flat_json(list(s.partition_keys)),
                primary_keys=_flat_json(list(s.primary_keys)),
                options=_flat_json(dict(s.options)),
                comment=s.comment,
                update_time=s.time_millis,
            )
        )
    return table_of(SCHEMAS, rows)


OPTIONS = schema_of(("key", pa.string(), False), ("value", pa.string(), False))


def table_options(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    """The options set on the table (defaults are not shown, as in Paimon)."""
    return table_of(OPTIONS, [dict(key=k, value=v) for k, v in sorted(table.schema.options.items())])


AGGREGATION_FIELDS = schema_of(
    ("field_name", pa.string(), False),
    ("field_type", pa.string(), False),
    ("function", pa.string(), True),
    ("function_options", pa.string(), True),
    ("comment", pa.string(), True),
)


def aggregation_fields(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    """Per column, the ``fields.<name>.*`` option values and keys (Java prints multimaps as lists)."""
    rows = []
    opts = table.schema.options
    for f in table.schema.fields:
        prefix = f"fields.{f.name}."
        keys = [k for k in opts if k.startswith(prefix)]
        rows.append(
            dict(
                field_name=f.name,
                field_type=str(f.type),
                function=f"[{', '.join(opts[k] for k in keys)}]",
                function_options=f"[{', '.join(keys)}]",
                comment=f.description,
            )
        )
    return table_of(AGGREGATION_FIELDS, rows)


# ---- $tags, $branches, $consumers -------------------------------------------------------------

TAGS = schema_of(
    ("tag_name", pa.string(), False),
    ("snapshot_id", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("commit_time", TS, False),
    ("record_count", pa.int64(), True),
    ("create_time", TS, True),
    ("time_retained", pa.string(), True),
)


def tag_table(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    rows = [
        dict(
            tag_name=t.name,
            snapshot_id=t.snapshot.id,
            schema_id=t.snapshot.schema_id,
            commit_time=t.snapshot.time_millis,
            record_count=t.snapshot.total_record_count,
            create_time=None,
            time_retained=None,
        )
        for t in sorted(tags.list_tags(table), key=lambda t: t.name)
    ]
    return table_of(TAGS, rows)


BRANCHES = schema_of(("branch_name", pa.string(), False), ("create_time", TS, False))


def branches(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    """The table's branches other than ``main`` (``BranchesTable``: its directory's time)."""
    rows = [dict(branch_name=b.name, create_time=b.create_time_ms) for b in list_branches(table)]
    return table_of(BRANCHES, rows)


CONSUMERS = schema_of(("consumer_id", pa.string(), False), ("next_snapshot_id", pa.int64(), False))


def consumer_table(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    rows = [dict(consumer_id=c, next_snapshot_id=n) for c, n in consumers.consumers(table).items()]
    return table_of(CONSUMERS, rows)


# ---- $manifests, $statistics, $table_indexes --------------------------------------------------

MANIFESTS = schema_of(
    ("file_name", pa.string(), False),
    ("file_size", pa.int64(), False),
    ("num_added_files", pa.int64(), False),
    ("num_deleted_files", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("min_partition_stats", pa.string(), True),
    ("max_partition_stats", pa.string(), True),
    ("min_row_id", pa.int64(), True),
    ("max_row_id", pa.int64(), True),
)


def manifests(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    from lakehouse.manifest import stats

    snap = selected_snapshot(table, options)
    if snap is None:
        return MANIFESTS.empty_table()
    store = table.manifests()
    types = table.schema_by_id(snap.schema_id).partition_types()
    rows = []
    for m in store.read_list(snap.base_manifest_list) + store.read_list(snap.delta_manifest_list):
        bounds = stats.decode(m.partition_stats, types, m.num_added_files + m.num_deleted_files)
        rows.append(
            dict(
                file_name=m.file_name,
                file_size=m.file_size,
                num_added_files=m.num_added_files,
                num_deleted_files=m.num_deleted_files,
                schema_id=m.schema_id,
                min_partition_stats=row_string(types, [b.min for b in bounds]) if types else None,
                max_partition_stats=row_string(types, [b.max for b in bounds]) if types else None,
                min_row_id=m.min_row_id,
                max_row_id=m.max_row_id,
            )
        )
    return table_of(MANIFESTS, rows)


STATISTICS = schema_of(
    ("snapshot_id", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("mergedRecordCount", pa.int64(), True),
    ("mergedRecordSize", pa.int64(), True),
    ("colstat", pa.string(), True),
)


def statistics(table: TableStore, options: Mapping[str, str]) -> pa.Table:
    """The ANALYZE statistics of the selected snapshot; empty: this engine writes none, and
    reads those of other engines (``statistics/<file>`` JSON) as they are."""
    snap = selected_snapshot(table, options)
    if snap is None or not snap.statistics:
        return STATISTICS.empty_table()
    from lakehouse.store.references import STATISTICS_DIR

    path = f"{table.paths.root}/{STATISTICS_DIR}/{snap.statistics}"
    try:
        obj = json.loads(table.io.read_bytes(path))
        row = dict(
            snapshot_id=obj.get("snapshotId", snap.id),
            schema_id=obj.get("schemaId", snap.schema_id),
            mergedRecordCount=obj.get("mergedRecordCount"),
            mergedRecordSize=obj.get("mergedRecordSize"),
            colstat=_flat_json(obj.get("colStats", {})),
        )
        counts = [row[k] for k in ("snapshot_id", "schema_id", "mergedRecordCount", "mergedRecordSize")]
        if not all(v is None or type(v) is int and -(2**63) <= v < 2**63 for v in counts):
            raise ValueError(f"a count is not a whole number: {counts}")
    except FileNotFoundError:
        raise CorruptFileError(
            f"table {table.name}: statistics file {path} of snapshot {snap.id} is missing; restore it"
        ) from None
    except (ValueError, AttributeError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CorruptFileError(
            f"table {table.name}: statistics file {path} of snapshot {snap.id} is corrupt ({e}); restore it "
            f"from a backup, or recompute the statistics (ANALYZE)"
        ) from None
    return table_of(STATISTICS, [row])


DV_RANGE = pa.struct(
    [
        pa.field("f0", pa.string(), nullable=False),
        pa.field("f1", pa.int32(), nullable=False),
        pa.field("f2", pa.int32(), nullable=False),
        pa.field("_CARDINALITY", pa.int64()),
    ]
)
TABLE_INDEXES = schema_of(
    ("partition", pa.string(), True),
    ("bucket", pa.int32(), False),
    ("index_type", pa.string(), False),
    ("file_name", pa.string(), False),
    ("file_size", pa.int64(), False),
    ("row_count", pa.int64(), False),
    ("dv_ranges", pa.list_(DV_RANGE), True),
    ("row_range_start", pa.int64(), True),
    ("row_range_end", pa.int64(), True),
    ("index_field_id", pa.int32(), True),
    ("index_field_name", pa.string(), True),
)


def table_indexes(table: TableStore, options: Mapping[str, str]) -> pa.Table:

    snap = selected_snapshot(table, options)
    rows = []
    for e in table.index_entries(snap) if snap is not None else []:
        f: IndexFileMeta = e.index_file
        ranges = None
        if f.dv_ranges is not None:
            ranges = [
                dict(f0=r.data_file, f1=r.offset, f2=r.length, _CARDINALITY=r.cardinality)
                for r in f.dv_ranges
            ]
        rows.append(
            dict(
                partition=partition_string(table, e.partition),
                bucket=e.bucket,
                index_type=f.index_type,
                file_name=f.file_name,
                file_size=f.file_size,
                row_count=f.row_count,
                dv_ranges=ranges,
                row_range_start=None,
                row_range_end=None,
                index_field_id=None,
                index_field_name=None,
            )
        )
    return table_of(TABLE_INDEXES, rows)


TABLES = {
    "snapshots": snapshots,
    "schemas": schemas,
    "options": table_options,
    "aggregation_fields": aggregation_fields,
    "tags": tag_table,
    "branches": branches,
    "consumers": consumer_table,
    "manifests": manifests,
    "statistics": statistics,
    "table_indexes": table_indexes,
}
