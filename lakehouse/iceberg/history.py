"""One Iceberg snapshot per Paimon snapshot, written from its parent's (``IcebergCommitCallback``):
the manifests the parent lists are kept; those listing a file the snapshot deleted are restated
(the file DELETED, the others EXISTING, sequence numbers kept); the files it added go to a new
manifest; and once small manifests pile up they are merged. A snapshot with no parent (the first,
or one whose history was lost) lists every visible file as added.

Iceberg readers see every data file of an append table, and of a primary-key table the files of
the top level: the data as of its last full compaction (Paimon's rule: level-0 files are not
merged rows). With deletion vectors (format 3), they see every file above level 0 and apply the
vectors (:mod:`lakehouse.iceberg.deletes`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.format.iceberg_schema import bound_bytes
from lakehouse.iceberg.deletes import delete_manifests
from lakehouse.iceberg.layout import Layout, external, internal, write_manifest, write_manifests
from lakehouse.iceberg.manifest import (
    DATA,
    DELETED,
    DELETES,
    EXISTING,
    DataFile,
    added_entry,
    assign_row_ids,
    manifest_list_bytes,
    may_contain,
    merge_summaries,
    partition_summaries,
    read_records,
    with_row_ids,
)
from lakehouse.manifest.entries import FileKind, ManifestEntry
from lakehouse.manifest.stats import decode
from lakehouse.snapshot import CommitKind, Snapshot

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass
class Changes:
    """The visible files a snapshot added and removed, by their path as Iceberg names it;
    ``add_only`` when it deleted none (so none it added can be listed already: a file deleted and
    added again, as an index rewrite restates it, is the same file)."""

    added: dict[str, DataFile]
    removed: dict[str, DataFile]
    add_only: bool = True


def visible(layout: Layout, entry: ManifestEntry) -> bool:
    """Whether Iceberg readers see the file: any of an append table; of a primary-key table those
    of the top level, or with deletion vectors (which Iceberg readers apply) those above level 0."""
    schema = layout.table.schema
    if not schema.primary_keys:
        return True
    return (
        entry.file.level > 0
        if layout.deletion_vectors
        else entry.file.level == schema.core_options.num_levels - 1
    )


def full_changes(layout: Layout, snapshot: Snapshot) -> Changes:
    """Every visible file of ``snapshot``, as added."""
    table = layout.table
    files = (_data_file(layout, e) for e in table.live_entries(snapshot) if visible(layout, e))
    return Changes({f.path: f for f in files}, {})


def delta_changes(layout: Layout, snapshot: Snapshot) -> Changes:
    """The visible files ``snapshot``'s commit added and deleted (a file deleted and added again,
    as an index rewrite restates it, counts once, as what happened last)."""
    changes = Changes({}, {})
    table = layout.table
    for entry in table.delta_entries(snapshot):
        if not visible(layout, entry):
            continue
        f = _data_file(layout, entry, stats=entry.kind == FileKind.ADD)
        gained, lost = (
            (changes.added, changes.removed)
            if entry.kind == FileKind.ADD
            else (changes.removed, changes.added)
        )
        lost.pop(f.path, None)
        gained[f.path] = f
        changes.add_only &= entry.kind == FileKind.ADD
    return changes


def describe(
    layout: Layout,
    snapshot: Snapshot,
    parent: dict[str, Any] | None,
    previous: Snapshot | None,
    changes: Changes,
    next_row_id: int,
) -> dict[str, Any]:
    """Write the manifests and manifest list of ``snapshot`` from its ``parent``'s (an Iceberg
    snapshot record, None for none, describing ``previous``); its Iceberg snapshot record. In
    format 3 its rows' ids start at ``next_row_id`` (the table's ``next-row-id``)."""
    table, sid = layout.table, snapshot.id
    parent_list = (
        read_records(table.io.read_bytes(internal(table, parent["manifest-list"]))) if parent else []
    )
    added = dict(changes.added)
    touched = [*changes.removed.values(), *([] if changes.add_only else changes.added.values())]
    partitions = {tuple(f.partition) for f in touched}
    manifests: list[dict[str, Any]] = []
    rewrote = False
    for listed in (m for m in parent_list if m["content"] == DATA):
        summary = listed["partitions"] or []
        if not any(may_contain(summary, list(p), layout.partitioning) for p in partitions):
            manifests.append(listed)
            continue
        entries = read_records(table.io.read_bytes(internal(table, listed["manifest_path"])))
        entries = with_row_ids(entries, listed.get("first_row_id"))
        live = [e for e in entries if e["status"] != DELETED]
        for e in live:
            added.pop(e["data_file"]["file_path"], None)  # listed already (restated, same file)
        if not any(e["data_file"]["file_path"] in changes.removed for e in live):
            manifests.append(listed)
            continue
        rewrote = True
        manifests.append(
            write_manifest(layout, [_restate(e, sid, changes.removed) for e in live], sid, summary)
        )
    files = list(added.values())
    manifests += write_manifests(
        layout,
        [added_entry(f, sid, layout.partitioning) for f in files],
        sid,
        lambda part: partition_summaries(files[part], layout.partitioning),
    )
    manifests = _compact(layout, manifests, sid)
    deletes = delete_manifests(layout, snapshot, parent_list, previous) if layout.deletion_vectors else []
    manifests += deletes
    added_rows = 0
    if layout.version >= 3:
        manifests, added_rows = assign_row_ids(manifests, next_row_id)
    parent_id = parent["snapshot-id"] if parent else (sid - 1 if sid > 1 else None)
    manifest_list = f"{layout.directory}/snap-{sid}-{uuid.uuid4().hex}.avro"
    data = manifest_list_bytes(manifests, sid, parent_id, layout.codec, layout.version)
    table.io.write_bytes(manifest_list, data)
    operation = "append"
    if rewrote:
        operation = "replace" if snapshot.commit_kind == CommitKind.COMPACT else "overwrite"
    record: dict[str, Any] = {
        "sequence-number": sid,
        "snapshot-id": sid,
        "timestamp-ms": snapshot.time_millis,
        "summary": _summary(operation, snapshot, parent, files, list(changes.removed.values()), deletes),
        "manifest-list": external(table, manifest_list),
        "schema-id": snapshot.schema_id,
    }
    if parent_id is not None:
        record["parent-snapshot-id"] = parent_id
    if layout.version >= 3:
        record["first-row-id"], record["added-rows"] = next_row_id, added_rows
    return record


def named_files(table: TableStore, manifest_list: str) -> list[str]:
    """The manifests a manifest list names, and the Puffin files of deletion vectors its delete
    manifests name (the store's paths)."""
    out = []
    for record in read_records(table.io.read_bytes(manifest_list)):
        manifest = internal(table, record["manifest_path"])
        out.append(manifest)
        if record["content"] == DELETES:
            entries = read_records(table.io.read_bytes(manifest))
            out += sorted({internal(table, e["data_file"]["file_path"]) for e in entries})
    return out


def _restate(entry: dict[str, Any], sid: int, removed: dict[str, DataFile]) -> dict[str, Any]:
    """A live entry of a restated manifest: DELETED by ``sid`` if it removed the file, else EXISTING."""
    if entry["data_file"]["file_path"] in removed:
        return {**entry, "status": DELETED, "snapshot_id": sid}
    return {**entry, "status": EXISTING}


def _compact(layout: Layout, manifests: list[dict[str, Any]], sid: int) -> list[dict[str, Any]]:
    """Merge the small manifests once there are ``compact_min`` of them adding up to the target
    size, or ``compact_max`` of any size: older snapshots' additions become EXISTING, their
    deletions go; this snapshot's entries stay as they are."""
    small = [m for m in manifests if m["manifest_length"] < layout.target_size * 2 // 3]
    large = [m for m in manifests if m["manifest_length"] >= layout.target_size * 2 // 3]
    if len(small) < layout.compact_min:
        return manifests
    if len(small) < layout.compact_max and sum(m["manifest_length"] for m in small) < layout.target_size:
        return manifests
    io = layout.table.io
    entries = []
    for m in small:
        path = internal(layout.table, m["manifest_path"])
        for e in with_row_ids(read_records(io.read_bytes(path)), m.get("first_row_id")):
            if e["snapshot_id"] == sid or e["file_sequence_number"] == sid or e["status"] == EXISTING:
                entries.append(e)
            elif e["status"] != DELETED:
                entries.append({**e, "status": EXISTING})
        if m["added_snapshot_id"] == sid:
            io.delete_quietly([path])  # written by this sync: nothing else names it
    summary = merge_summaries([m["partitions"] or [] for m in small], layout.partitioning)
    return large + write_manifests(layout, entries, sid, lambda part: summary)


def _summary(
    operation: str,
    snapshot: Snapshot,
    parent: dict[str, Any] | None,
    added: list[DataFile],
    removed: list[DataFile],
    deletes: list[dict[str, Any]],
) -> dict[str, str]:
    """The Iceberg snapshot summary: what changed, the totals carried from the parent's, and
    those of the delete manifests ``deletes``."""
    before = parent["summary"] if parent else {}

    def total(key: str, change: int) -> str:
        return str(max(0, int(before.get(key, 0)) + change))

    added_rows, removed_rows = sum(f.record_count for f in added), sum(f.record_count for f in removed)
    added_size, removed_size = sum(f.size for f in added), sum(f.size for f in removed)
    changed = {tuple(f.partition) for f in added} | {tuple(f.partition) for f in removed}
    return {
        "operation": operation,
        "added-data-files": str(len(added)),
        "added-records": str(added_rows),
        "added-files-size": str(added_size),
        "deleted-data-files": str(len(removed)),
        "deleted-records": str(removed_rows),
        "removed-files-size": str(removed_size),
        "changed-partition-count": str(len(changed)),
        "total-records": total("total-records", added_rows - removed_rows),
        "total-data-files": total("total-data-files", len(added) - len(removed)),
        "total-files-size": total("total-files-size", added_size - removed_size),
        "total-delete-files": str(sum(m["added_files_count"] + m["existing_files_count"] for m in deletes)),
        "total-position-deletes": str(sum(m["added_rows_count"] + m["existing_rows_count"] for m in deletes)),
        "total-equality-deletes": "0",
        **{k: v for k, v in (snapshot.properties or {}).items() if v is not None},
        "paimon-commit-identity": commit_identity(snapshot),
    }


def commit_identity(snapshot: Snapshot) -> str:
    """What tells this snapshot from another of the same id (after a rollback)."""
    return snapshot.uuid or f"{snapshot.commit_user}:{snapshot.commit_identifier}:{snapshot.time_millis}"


def _data_file(layout: Layout, entry: ManifestEntry, stats: bool = True) -> DataFile:
    """The file of ``entry`` as an Iceberg manifest lists it (with its column statistics)."""
    table, partitioning = layout.table, layout.partitioning
    f = entry.file
    bucket = table.bucket_path(entry.partition, entry.bucket)
    out = DataFile(
        external(table, table.paths.data_file(bucket, f.file_name, f.external_path)),
        partitioning.values(entry.partition),
        f.row_count,
        f.file_size,
    )
    if not stats:
        return out
    schema = table.schema_by_id(f.schema_id)
    columns = f.stats_columns
    fields = [schema.field(c) for c in columns] if columns is not None else list(schema.fields)
    values = decode(f.value_stats, [x.type for x in fields], f.row_count) if fields else []
    for column, s in zip(fields, values, strict=True):
        if s.null_count is not None:
            out.null_counts[column.id] = s.null_count
        if s.min is None or s.max is None:
            continue
        lo, hi = bound_bytes(s.min, column.type), bound_bytes(s.max, column.type)
        if lo is not None and hi is not None:
            out.lower[column.id], out.upper[column.id] = lo, hi
    return out
