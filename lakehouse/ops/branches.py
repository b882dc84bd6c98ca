"""Branches: other lines of a table's history (``FileSystemBranchManager``).

Branch ``b`` keeps its own schemas, snapshots, tags and consumers under
``<table>/branch/branch-b/``; manifests, index and data files stay in the table's directories,
shared by every branch (``TablePaths.branch_root``). A table on a branch (``db.t$branch_b``)
reads, writes, compacts, travels in time and tags through the same code as ``main``.

- :func:`create_branch` copies what the branch starts from: the tag file, the tagged snapshot
  and the schemas up to its schema (from a tag, as Paimon does); the snapshot and its schemas
  (from a snapshot id, as Paimon did before 0.9, whose own expiration does not protect such a
  branch: this engine's cleanups keep every branch's files, see ``store/references.py``); or the
  schemas up to the latest one (an empty branch, whose first commit is snapshot 1).
- :func:`delete_branch` removes the branch's directory; the files only it referenced become
  orphans for ``remove_orphan_files``, as in Paimon.
- :func:`fast_forward` makes the current branch (usually ``main``) the branch: its snapshots,
  tags and schemas from the branch's earliest snapshot on go, the branch's are copied over
  (``FileSystemBranchManager.fastForward``).

Like Paimon's, these must not race writers of the branches they change, nor a concurrent
create or delete of the same branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import (
    BranchExistsError,
    BranchNotFoundError,
    InvalidArgumentError,
    SnapshotNotFoundError,
)
from lakehouse.paths import MAIN_BRANCH, checked_name
from lakehouse.snapshot import Snapshot

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class Branch:
    """A branch and when it was created (its directory's modification time, as Paimon's
    ``$branches`` shows it; 0 on object stores, which keep no directory times)."""

    name: str
    create_time_ms: int


@dataclass(frozen=True)
class FastForward:
    """What a fast-forward did to the current branch."""

    branch: str
    snapshot_id: int  # the latest snapshot now
    snapshots_removed: int
    snapshots_copied: int
    tags_removed: tuple[str, ...]
    tags_copied: tuple[str, ...]


def check_branch_name(table: TableStore, name: object) -> str:
    """``name`` if a new branch may take it (``BranchManager.validateBranch``): not ``main``, not
    blank, not only digits, without ``$`` (it separates ``db.t$branch_<name>``), usable in a file
    name, and not taken; otherwise ``InvalidArgumentError`` or ``BranchExistsError``."""
    base = table.table_name
    if isinstance(name, str) and name == MAIN_BRANCH:
        raise InvalidArgumentError(
            f"table {base}: branch name {MAIN_BRANCH!r} is the default branch and cannot be created; "
            f"choose another name"
        )
    name = checked_name("branch name", name, base)
    if name.isdigit() or "$" in name:
        raise InvalidArgumentError(
            f"table {base}: branch name {name!r} must not be only digits (they name snapshots) nor "
            f"hold '$' (it separates {base}$branch_<name>); choose another name"
        )
    if table.io.dir_exists(table.paths.on_branch(name).branch_root):
        raise BranchExistsError(
            f"table {base} already has a branch {name!r}; delete it first or choose another name"
        )
    return name


def list_branches(table: TableStore) -> list[Branch]:
    """The table's branches other than ``main``, by name."""
    return [_branch(table, name) for name in table.branches()]


def create_branch(
    table: TableStore, name: str, snapshot_id: int | None = None, tag: str | None = None
) -> Branch:
    """Create branch ``name`` of ``table``'s branch from a snapshot, a tag, or empty (neither)
    with the current schema. Nothing is written when the name or the source is refused.

    The schemas are copied first, so a create killed half way leaves a readable branch."""
    name = check_branch_name(table, name)
    if snapshot_id is not None and tag is not None:
        raise InvalidArgumentError(
            f"table {table.name}: create a branch from a snapshot_id or a tag, not both"
        )
    io, target = table.io, table.paths.on_branch(name)
    snapshot: Snapshot | None = None
    if tag is not None:
        snapshot = table.snapshots.tag(tag)
    elif snapshot_id is not None:
        snapshot = table.snapshots.snapshot(snapshot_id)
    last_schema = snapshot.schema_id if snapshot is not None else table.refresh().schema.id
    for sid in table.schema_manager.schema_ids():
        if sid <= last_schema:
            _copy(table, table.paths.schema(sid), target.schema(sid))
    if snapshot is not None:
        if table.snapshots.exists(snapshot.id):
            _copy(table, table.paths.snapshot(snapshot.id), target.snapshot(snapshot.id))
        else:  # expired while its tag kept its content
            io.write_bytes(target.snapshot(snapshot.id), snapshot.to_json().encode())
    if tag is not None:
        _copy(table, table.paths.tag(tag), target.tag(tag))
    return _branch(table, name)


def delete_branch(table: TableStore, name: str) -> Branch:
    """Delete branch ``name`` (its directory); its own data files are orphans from then on."""
    found = {b.name: b for b in list_branches(table)}.get(name) if isinstance(name, str) else None
    if found is None:
        raise BranchNotFoundError(
            f"table {table.table_name} has no branch {name!r}; its branches are {table.branches()}"
        )
    table.io.delete_dir(table.paths.on_branch(name).branch_root)
    return found


def fast_forward(table: TableStore, name: str) -> FastForward:
    """Make ``table``'s branch (usually ``main``) branch ``name``: from the branch's earliest
    snapshot on, the current snapshots, tags and schemas go and the branch's are copied over.

    Paimon's order, made safe to kill: the ``LATEST`` hint goes, then the later snapshots
    newest first (what is left is a shorter but whole history), their tags, the schemas the
    branch does not replace; then the branch's schemas, tags and snapshots (oldest first) are
    copied, and the hints written. A killed fast-forward leaves a consistent table, and running
    it again finishes it. Files only the removed snapshots referenced become orphans, as in Paimon."""
    if not isinstance(name, str) or not name.strip() or name == MAIN_BRANCH:
        raise InvalidArgumentError(
            f"table {table.name}: fast_forward needs the name of a branch other than {MAIN_BRANCH!r}, "
            f"not {name!r}"
        )
    if name == table.branch:
        raise InvalidArgumentError(
            f"table {table.name}: cannot fast-forward branch {name!r} to itself; call fast_forward on "
            f"the branch it should replace (main)"
        )
    source = table.on_branch(name)
    earliest = source.snapshots.earliest_id()
    if earliest is None:
        raise SnapshotNotFoundError(
            f"branch {name!r} of table {table.table_name} has no snapshot to fast-forward to; write to it "
            f"first"
        )
    earliest_schema = source.snapshots.snapshot(earliest).schema_id
    io, paths, snapshots = table.io, table.paths, table.snapshots
    source_schemas = source.schema_manager.schema_ids()

    io.delete(f"{paths.snapshot_dir}/LATEST")
    removed = [sid for sid in snapshots.snapshot_ids() if sid >= earliest]
    for sid in reversed(removed):
        snapshots.delete(sid)
    dropped = [t for t, snap in snapshots.tags().items() if snap.id >= earliest]
    for t in reversed(dropped):
        io.delete(paths.tag(t))
    for sid in reversed(table.schema_manager.schema_ids()):
        if sid >= earliest_schema and sid not in source_schemas:
            io.delete(paths.schema(sid))

    for sid in source_schemas:
        _copy(table, source.paths.schema(sid), paths.schema(sid))
    copied_tags = source.snapshots.tag_names()
    for t in copied_tags:
        _copy(table, source.paths.tag(t), paths.tag(t))
    copied = source.snapshots.snapshot_ids()
    for sid in copied:
        _copy(table, source.paths.snapshot(sid), paths.snapshot(sid))
    snapshots.write_hint("EARLIEST", snapshots.snapshot_ids()[0])
    snapshots.write_hint("LATEST", copied[-1])
    table.reload()
    return FastForward(name, copied[-1], len(removed), len(copied), tuple(dropped), tuple(copied_tags))


def _branch(table: TableStore, name: str) -> Branch:
    status = table.io.status(table.paths.on_branch(name).branch_root)
    return Branch(name, status.mtime_ms if status is not None else 0)


def _copy(table: TableStore, source: str, target: str) -> None:
    """Copy one metadata file, replacing ``target`` (``FileIO.copyFile`` with overwrite)."""
    table.io.write_bytes(target, table.io.read_bytes(source))
