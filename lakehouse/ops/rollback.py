"""Rollback: make an earlier snapshot (or a tag) the latest again.

Invariant, as for expiration: a file is deleted only once nothing still listed names it.
Snapshots after the target go newest first, so a rollback killed half way leaves a shorter but
consistent history; then the tags on them, then the ``LATEST`` hint moves, then the manifest
lists, manifests, changelog, index and data files only they referenced (no other branch either)
are deleted (what a kill
leaves of them is ``remove_orphan_files``'). Rolling back to a tag whose snapshot already
expired restores that snapshot file from the tag first and moves ``EARLIEST`` to it, as Paimon's
``RollbackHelper`` does. Like Paimon's, a rollback must not race writers of the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import ArgumentTypeError, InvalidArgumentError, SnapshotNotFoundError
from lakehouse.iceberg.metadata import sync_iceberg
from lakehouse.store import tags
from lakehouse.store.references import Deleted, References, delete_files, other_branches_files

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class Rollback:
    """What a rollback did."""

    snapshot_id: int
    snapshots_removed: int
    tags_removed: tuple[str, ...]
    deleted: Deleted = Deleted()

    @property
    def files_deleted(self) -> int:
        return self.deleted.total


def rollback_to(table: TableStore, snapshot_id: int | None = None, tag: str | None = None) -> Rollback:
    """Roll ``table`` back to ``snapshot_id`` or to the snapshot of ``tag`` (exactly one)."""
    snapshots = table.snapshots
    if tag is not None and snapshot_id is None:
        target = snapshots.tag(tag)
    elif snapshot_id is not None and tag is None:
        target = snapshots.snapshot(snapshot_id)
    else:
        raise InvalidArgumentError(
            f"table {table.name}: rollback_to needs exactly one of snapshot_id and tag"
        )
    latest = snapshots.latest_id()
    if latest is None or target.id > latest:
        raise SnapshotNotFoundError(
            f"table {table.name}: cannot roll back to snapshot {target.id}, which is newer than the "
            f"latest snapshot {latest}"
        )
    earliest = snapshots.earliest_id()
    if earliest is None or not snapshots.exists(target.id):
        # a tag older than every snapshot: its snapshot becomes the earliest (and latest) again
        table.io.try_create(table.paths.snapshot(target.id), target.to_json().encode())
        snapshots.write_hint("EARLIEST", target.id)
        earliest = target.id
    after = range(max(earliest, target.id + 1), latest + 1)
    removed = [snapshots.snapshot(sid) for sid in after if snapshots.exists(sid)]
    for snap in reversed(removed):
        snapshots.delete(snap.id)
    dropped = [t for t in tags.list_tags(table) if t.snapshot.id > target.id]
    for t in reversed(dropped):
        table.io.delete(tags.tag_path(table, t.name))
    snapshots.write_hint("LATEST", target.id)

    refs = References(table)
    doomed = refs.of_removed(removed)
    for t in dropped:
        doomed.update(refs.of_removed([t.snapshot], changelog=False))
    # anything a removed snapshot shares with an older snapshot or tag, the target has too
    protected = refs.of(target, changelog=False).update(other_branches_files(table))
    sync_iceberg(table)  # Iceberg's history rewound to the target before the removed files go
    deleted = delete_files(table.io, doomed.minus(protected))
    return Rollback(target.id, len(removed), tuple(t.name for t in dropped), deleted)


def rollback_to_timestamp(table: TableStore, timestamp_ms: int) -> Rollback:
    """Roll ``table`` back to the newest snapshot committed at or before ``timestamp_ms`` (epoch
    millis), as Paimon's ``rollback_to_timestamp`` procedure (``earlierOrEqualTimeMills``)."""
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
        raise ArgumentTypeError(
            f"table {table.name}: rollback_to_timestamp takes epoch milliseconds as an integer, not "
            f"{type(timestamp_ms).__name__} {timestamp_ms!r}"
        )
    return rollback_to(table, snapshot_id=table.snapshots.earlier_or_equal_time(timestamp_ms).id)
