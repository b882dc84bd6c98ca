"""Tags: named, long-lived snapshots (``tag/tag-<name>``), as Paimon's ``TagManager`` keeps them.

A tag file is the JSON of the snapshot it pins (a byte copy of ``snapshot-N``), so the tagged
snapshot stays readable after its own snapshot file expired; its data files, manifests and index
files are protected from expiration. Changelog files are not: as in Paimon, a tag is for batch
reads. Deleting the last tag of an expired snapshot removes the files only it still needed.

Invariant, as for expiration: a file is deleted only once nothing still listed names it. The tag
file goes first, then the manifest lists, manifests, index and data files only it kept; a
deletion killed half way leaves the other tags and snapshots whole and the rest to
``remove_orphan_files``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import SnapshotNotFoundError, TagExistsError
from lakehouse.paths import checked_name
from lakehouse.snapshot import Snapshot
from lakehouse.store.references import Deleted, FileRefs, References, delete_files, other_branches_files

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class Tag:
    """A tag and the snapshot it pins."""

    name: str
    snapshot: Snapshot


def tag_path(table: TableStore, name: str) -> str:
    return table.paths.tag(checked_name("tag name", name, table.name))


def list_tags(table: TableStore) -> list[Tag]:
    """Every tag, ordered by snapshot id, then name."""
    return [Tag(name, snap) for name, snap in table.snapshots.tags().items()]


def tagged_snapshots(table: TableStore) -> list[Snapshot]:
    """The distinct snapshots tags pin, ascending."""
    return list({t.snapshot.id: t.snapshot for t in list_tags(table)}.values())


def create_tag(table: TableStore, name: str, snapshot_id: int | None = None) -> Tag:
    """Pin ``snapshot_id`` (default: the latest) under ``name``; a name in use is an error."""
    path = tag_path(table, name)
    if snapshot_id is None:
        snapshot_id = table.latest_snapshot_id()
        if snapshot_id is None:
            raise SnapshotNotFoundError(f"table {table.name} has no snapshot to tag yet; write data first")
    try:
        data = table.io.read_bytes(table.paths.snapshot(snapshot_id))
    except FileNotFoundError:
        table.snapshots.snapshot(snapshot_id)  # raises the descriptive not-found error
        raise
    snapshot = table.snapshots.parse(data, table.paths.snapshot(snapshot_id))  # no tag of a damaged one
    if not table.io.try_create(path, data):
        raise TagExistsError(
            f"table {table.name} already has a tag {name!r}; delete it first or choose another name"
        )
    return Tag(name, snapshot)


def delete_tag(table: TableStore, name: str) -> Deleted:
    """Delete tag ``name``; if its snapshot expired and no other tag pins it, also the files no
    snapshot, other tag or other branch references (``TagManager.deleteTag``)."""
    path = tag_path(table, name)
    tag = table.snapshots.tag(name)
    if table.io.exists(table.paths.snapshot(tag.id)):
        table.io.delete(path)
        return Deleted()
    others = [t for t in list_tags(table) if t.name != name]
    table.io.delete(path)
    if any(t.snapshot.id == tag.id for t in others):
        return Deleted()
    refs = References(table)
    # the neighbours suffice: a file of this tag also in a farther snapshot is in the nearer one
    protected = FileRefs()
    older = [t.snapshot for t in others if t.snapshot.id < tag.id]
    newer = [t.snapshot for t in others if t.snapshot.id > tag.id]
    earliest = table.snapshots.earliest_id()
    if earliest is not None:
        newer.append(table.snapshots.snapshot(earliest))
    neighbours = [max(older, key=_id, default=None), min(newer, key=_id, default=None)]
    for snap in neighbours:
        if snap is not None:
            protected.update(refs.of(snap, changelog=False))
    protected.update(other_branches_files(table))
    return delete_files(table.io, refs.of_removed([tag], changelog=False).minus(protected))


def _id(snapshot: Snapshot) -> int:
    return snapshot.id
