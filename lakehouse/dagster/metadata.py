"""What a materialization or maintenance run records about a table: the snapshot it made and
the table's shape after it, as Dagster metadata (numbers, so the UI plots them over time)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dagster import MetadataValue

from lakehouse import Table
from lakehouse.manifest.entries import FileKind, ManifestEntry
from lakehouse.snapshot import CommitKind, Snapshot
from lakehouse.store.partitions import partition_values


def delta_entries(table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
    """The files a snapshot added (ADD) or removed (DELETE)."""
    store = table.manifests()
    return [
        e for m in store.read_list(snapshot.delta_manifest_list) for e in store.read_manifest(m.file_name)
    ]


def partitions_touched(table: Table, snapshot: Snapshot) -> list[dict[str, Any]]:
    """The partitions whose files a snapshot added or removed."""
    seen = {e.partition for e in delta_entries(table, snapshot)}
    return [partition_values(table.schema, p) for p in sorted(seen)]


def write_metadata(table: Table, first: int, last: int) -> dict[str, Any]:
    """What the snapshots ``first..last`` of one write did, then the table as of ``last``: the data
    snapshot's kind, the rows it added, whether a compaction followed, the partitions touched."""
    snapshots = [table.snapshot(i) for i in range(first, last + 1)]
    data = [s for s in snapshots if s.commit_kind != CommitKind.COMPACT]
    added = [e for s in data for e in delta_entries(table, s) if e.kind == FileKind.ADD]
    touched = {str(p): p for s in snapshots for p in partitions_touched(table, s)}
    return {
        **table_metadata(table, last),
        "commit_kind": MetadataValue.text(data[0].commit_kind.value if data else CommitKind.COMPACT.value),
        "rows_written": MetadataValue.int(sum(e.file.row_count for e in added)),
        "compacted": MetadataValue.bool(len(data) < len(snapshots)),
        "partitions_touched": MetadataValue.json(list(touched.values())),
    }


def table_metadata(table: Table, snapshot_id: int | None = None) -> dict[str, Any]:
    """The table as of a snapshot (default latest): rows, files, bytes, LSM shape."""
    snapshot = table.snapshot(snapshot_id)
    if snapshot is None:
        return {"snapshot_id": MetadataValue.int(0), "total_rows": MetadataValue.int(0)}
    entries = table.live_entries(snapshot)
    shapes = table.lsm_shape(snapshot.id)
    levels = Counter()
    for shape in shapes:
        levels.update(shape.files_per_level)
    return {
        "snapshot_id": MetadataValue.int(snapshot.id),
        "commit_kind": MetadataValue.text(snapshot.commit_kind.value),
        "rows_written": MetadataValue.int(snapshot.delta_record_count),
        "total_rows": MetadataValue.int(snapshot.total_record_count),
        "data_files": MetadataValue.int(len(entries)),
        "bytes": MetadataValue.int(sum(e.file.file_size for e in entries)),
        "max_sorted_runs": MetadataValue.int(max((s.sorted_runs for s in shapes), default=0)),
        "level0_files": MetadataValue.int(levels.get(0, 0)),
        "files_per_level": MetadataValue.json({str(k): v for k, v in sorted(levels.items())}),
        "partitions_touched": MetadataValue.json(partitions_touched(table, snapshot)),
    }
