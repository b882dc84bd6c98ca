"""Incremental reads: the rows snapshots ``start+1 .. end`` changed, with their row kinds.

As Paimon's ``incremental-between`` batch read in its default ``auto`` mode: a table with a
``changelog-producer`` is read from its snapshots' changelog files (``changelogManifestList``;
snapshots without one, such as the APPEND snapshots of ``full-compaction`` and ``lookup``
tables, contribute nothing); a table without one from the delta files of its APPEND snapshots,
each row with the kind it was committed with. OVERWRITE snapshots are skipped in both modes
unless ``streaming-read-overwrite`` is set: then the files they add are read as their changes
(the rows they replace are not retracted, as in Paimon). COMPACT snapshots change no rows but may
carry changelog. :func:`replaced_partitions` names the partitions whose changes a range does not
express. A ``consumer_id`` records ``end + 1`` as the consumer's next snapshot, which protects
it from expiration.

The changes of one snapshot are :func:`changed_splits`, one file each, read by
:func:`read_changed`: the batch read here and streaming reads (:mod:`lakehouse.read.stream`)
share both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.errors import InvalidArgumentError, SnapshotNotFoundError
from lakehouse.format import parquet
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import FileKind, ManifestEntry
from lakehouse.mergetree.changelog import ChangelogProducer
from lakehouse.options import ChangelogProducerKind
from lakehouse.read.scan import Split
from lakehouse.rowkind import ROW_KIND_FIELD, inserts, short_strings
from lakehouse.snapshot import CommitKind, Snapshot
from lakehouse.store import consumers
from lakehouse.store.data_reader import read_data_file

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore
    from lakehouse.types import DataField


def read_changes(
    table: TableStore,
    start_snapshot_id: int,
    end_snapshot_id: int | None = None,
    consumer_id: str | None = None,
    overwrites: bool = False,
) -> pa.Table:
    """Rows changed after ``start_snapshot_id`` up to ``end_snapshot_id`` (default latest), with a
    ``_row_kind`` column (``+I``, ``-U``, ``+U``, ``-D``), in commit order."""
    end, splits = splits_between(table, start_snapshot_id, end_snapshot_id, overwrites)
    parts = map_parallel(lambda split: read_changed(table, split), splits)
    if parts:
        out = pa.concat_tables(parts)
    else:
        out = _with_kinds(table.schema.arrow_schema.empty_table(), pa.array([], pa.string()))
    if consumer_id is not None:
        consumers.record(table, consumer_id, end + 1)
    return out


def splits_between(
    table: TableStore, start_snapshot_id: int, end_snapshot_id: int | None, overwrites: bool = False
) -> tuple[int, list[Split]]:
    """The end snapshot (``end_snapshot_id``, default the latest) and the :func:`changed_splits`
    of snapshots ``start+1 .. end``, in commit order; a range outside the table's snapshots is
    refused."""
    snapshots = table.snapshots
    latest = snapshots.latest_id()
    end = latest if end_snapshot_id is None else end_snapshot_id
    if latest is None or end is None or end > latest:
        raise SnapshotNotFoundError(
            f"table {table.name}: end snapshot {end} is beyond the latest snapshot {latest}"
        )
    if start_snapshot_id > end:
        raise InvalidArgumentError(
            f"table {table.name}: start snapshot {start_snapshot_id} is after end snapshot {end}"
        )
    snaps = (snapshots.snapshot(sid) for sid in range(start_snapshot_id + 1, end + 1))
    return end, [split for snap in snaps for split in changed_splits(table, snap, overwrites)]


def changed_splits(table: TableStore, snap: Snapshot, overwrites: bool = False) -> list[Split]:
    """The files holding ``snap``'s changes, one split each: its changelog files when the table
    has a changelog producer, else the new files of an APPEND snapshot; ``overwrites``: the new
    files of an OVERWRITE snapshot too (``streaming-read-overwrite``)."""
    return [
        Split(snap.id, e.partition, e.bucket, table.bucket_path(e.partition, e.bucket), (e.file,), True)
        for e in _changed(table, snap, overwrites)
    ]


def replaced_partitions(table: TableStore, start_snapshot_id: int, end_snapshot_id: int) -> set[bytes] | None:
    """The partitions (serialized) whose rows snapshots ``start+1 .. end`` replaced rather than
    changed - a changelog does not express them, so a consumer recomputes them from the full
    table - or None when the range is gone (a snapshot of it expired). Those are the partitions
    of every OVERWRITE snapshot that removed files, and of every OVERWRITE of a primary-key table
    (whose added files are no changelog); a dynamic overwrite of partitions that held nothing
    only added rows, which ``changed_splits`` with ``overwrites`` reads as changes."""
    if start_snapshot_id >= end_snapshot_id:
        return set()
    snapshots = table.snapshots
    earliest = snapshots.earliest_id()
    if earliest is None or earliest > start_snapshot_id + 1:
        return None
    store = table.manifests()
    replaced: set[bytes] = set()
    for sid in range(start_snapshot_id + 1, end_snapshot_id + 1):
        snap = snapshots.snapshot(sid)
        if snap.commit_kind != CommitKind.OVERWRITE:
            continue
        delta = [
            e for m in store.read_list(snap.delta_manifest_list) for e in store.read_manifest(m.file_name)
        ]
        if table.schema.primary_keys or any(e.kind == FileKind.DELETE for e in delta):
            replaced |= {e.partition for e in delta}
    return replaced


def read_changed(table: TableStore, split: Split, fields: list[DataField] | None = None) -> pa.Table:
    """The rows of a split of :func:`changed_splits` as they were written, each with its kind:
    columns ``fields`` (of the current schema; default all)."""
    schema = table.schema
    fields = list(schema.fields) if fields is None else fields
    system = [parquet.VALUE_KIND] if schema.primary_keys else []
    parts = [read_data_file(table, split.bucket_path, f, fields, system) for f in split.files]
    out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if not system:
        return _with_kinds(out, inserts(out.num_rows))
    return _with_kinds(out.drop_columns(system), short_strings(out.column(parquet.VALUE_KIND)))


def _with_kinds(data: pa.Table, kinds: pa.Array | pa.ChunkedArray) -> pa.Table:
    return data.append_column(ROW_KIND_FIELD, kinds)


def _changed(table: TableStore, snap: Snapshot, overwrites: bool) -> list[ManifestEntry]:
    if snap.commit_kind == CommitKind.OVERWRITE:
        return table.added_entries(snap) if overwrites else []
    if ChangelogProducer.of(table.schema, table.name).kind == ChangelogProducerKind.NONE:
        return table.added_entries(snap) if snap.commit_kind == CommitKind.APPEND else []
    if not snap.changelog_manifest_list:
        return []
    store = table.manifests()
    manifests = store.read_list(snap.changelog_manifest_list)
    return [e for m in manifests for e in store.read_manifest(m.file_name) if e.kind == FileKind.ADD]
