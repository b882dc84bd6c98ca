"""Incremental reads: the rows snapshots ``start+1 .. end`` changed, with their row kinds.

As Paimon's ``incremental-between`` batch read in its default ``auto`` mode: a table with a
``changelog-producer`` is read from its snapshots' changelog files (``changelogManifestList``;
snapshots without one, such as the APPEND snapshots of ``full-compaction`` and ``lookup``
tables, contribute nothing); a table without one from the delta files of its APPEND snapshots,
each row with the kind it was committed with. OVERWRITE snapshots are skipped in both modes,
COMPACT snapshots change no rows but may carry changelog. A ``consumer_id`` records ``end + 1``
as the consumer's next snapshot, which protects it from expiration.
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
from lakehouse.rowkind import ROW_KIND, short_strings
from lakehouse.snapshot import CommitKind, Snapshot
from lakehouse.store import consumers
from lakehouse.store.data_reader import read_data_file

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


def read_changes(
    table: TableStore,
    start_snapshot_id: int,
    end_snapshot_id: int | None = None,
    consumer_id: str | None = None,
) -> pa.Table:
    """Rows changed after ``start_snapshot_id`` up to ``end_snapshot_id`` (default latest), with a
    ``_row_kind`` column (``+I``, ``-U``, ``+U``, ``-D``), in commit order."""
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
    picked = [snapshots.snapshot(sid) for sid in range(start_snapshot_id + 1, end + 1)]
    schema = table.schema
    fields = list(schema.fields)
    system = [parquet.VALUE_KIND] if schema.primary_keys else []
    changelog = ChangelogProducer.of(schema, table.name).kind != ChangelogProducerKind.NONE
    work = [
        (table.bucket_path(e.partition, e.bucket), e.file)
        for snap in picked
        for e in _changed(table, snap, changelog)
    ]

    def read(item) -> pa.Table:
        bucket_path, meta = item
        return read_data_file(table, bucket_path, meta, fields, system)

    parts = map_parallel(read, work)
    if not parts:
        out, kinds = schema.arrow_schema.empty_table(), pa.array([], pa.string())
    elif system:
        out = pa.concat_tables(parts)
        kinds = short_strings(out.column(parquet.VALUE_KIND))
        out = out.drop_columns(system)
    else:
        out = pa.concat_tables(parts)
        kinds = pa.array(["+I"] * out.num_rows, pa.string())
    out = out.append_column(pa.field(ROW_KIND, pa.string(), nullable=False), [kinds])
    if consumer_id is not None:
        consumers.record(table, consumer_id, end + 1)
    return out


def _changed(table: TableStore, snap: Snapshot, changelog: bool) -> list[ManifestEntry]:
    """The files holding ``snap``'s changes: its changelog files, or its delta's new files."""
    if snap.commit_kind == CommitKind.OVERWRITE:
        return []
    if not changelog:
        return table.added_entries(snap) if snap.commit_kind == CommitKind.APPEND else []
    if not snap.changelog_manifest_list:
        return []
    store = table.manifests()
    manifests = store.read_list(snap.changelog_manifest_list)
    return [e for m in manifests for e in store.read_manifest(m.file_name) if e.kind == FileKind.ADD]
