"""Orphan files: files under a table that no snapshot or tag of any branch references
(``OrphanFilesClean``, which also walks every branch).

Crashed writers and killed commits leave data files, manifests and index files nothing points
to. A file is an orphan when it sits where the engine writes files (``manifest/``, ``index/``,
``statistics/``, bucket directories, stray files in ``snapshot/``), no snapshot or tag references
it, and it was last modified before ``older_than_ms`` (default: one day ago); so are Iceberg
manifests no Iceberg metadata version names (a sync that died). The threshold is
what keeps the files of a writer that has not committed yet; it must lie in the past. Files of
an aborted write (:mod:`lakehouse.write.scope`) are orphans whatever their age: nothing
will ever commit them. The leases and markers of writes in ``_writes/`` go once older than the
threshold. Files under external data paths are left alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidArgumentError
from lakehouse.iceberg.metadata import orphan_metadata_files, sync_iceberg
from lakehouse.io.fs import FileStatus, is_temporary, join
from lakehouse.paths import MAIN_BRANCH, bucket_dirs
from lakehouse.store.consumers import consumer_dir
from lakehouse.store.references import STATISTICS_DIR, FileRefs, delete_paths, referenced_files
from lakehouse.write.scope import SCOPES_DIR, aborted_writes

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

DEFAULT_AGE_MS = 86_400_000
_HINTS = {"EARLIEST", "LATEST"}


@dataclass(frozen=True)
class OrphanFiles:
    """The orphans found (and deleted unless ``dry_run``)."""

    paths: tuple[str, ...]
    bytes: int
    dry_run: bool

    @property
    def files(self) -> int:
        return len(self.paths)


def remove_orphan_files(
    table: TableStore, older_than_ms: int | None = None, dry_run: bool = False
) -> OrphanFiles:
    """Delete (or with ``dry_run`` only list) the table's orphan files older than ``older_than_ms``."""
    found = find_orphan_files(table, older_than_ms, deleting=not dry_run)
    if dry_run:
        return found
    delete_paths(table.io, found.paths)
    return replace(found, dry_run=False)


def find_orphan_files(
    table: TableStore, older_than_ms: int | None = None, *, deleting: bool = False
) -> OrphanFiles:
    """The orphan files :func:`remove_orphan_files` deletes, only listed (a dry run).

    ``deleting``: they are found to be deleted, so Iceberg's history first drops the snapshots
    the table no longer has (those of an expiration that died before its Iceberg sync): it must
    name none of the files found."""
    if deleting:
        sync_iceberg(table)
    now_ms = int(time.time() * 1000)
    if older_than_ms is None:
        older_than_ms = now_ms - DEFAULT_AGE_MS
    elif older_than_ms >= now_ms:
        raise InvalidArgumentError(
            f"table {table.name}: older_than_ms ({older_than_ms}) must lie in the past, or files "
            f"being written right now and not committed yet would be deleted"
        )
    aborted = aborted_writes(table.io, table.paths)  # read first: an aborted write never commits later
    branches = [table, *table.other_branches()]
    refs = FileRefs()
    for branch in branches:
        refs.update(referenced_files(branch))
    used = refs.all()
    found = [
        st
        for branch in branches
        for st in candidate_files(branch)
        if st.path not in used and (st.mtime_ms < older_than_ms or any(w in st.name for w in aborted))
    ]
    found += [st for st in orphan_metadata_files(table) if st.mtime_ms < older_than_ms]
    return OrphanFiles(tuple(sorted(st.path for st in found)), sum(st.size for st in found), dry_run=True)


def candidate_files(table: TableStore) -> list[FileStatus]:
    """The files in the directories the engine writes data and metadata files to (of the
    table's metadata, only ``table``'s branch's)."""
    io, paths = table.io, table.paths
    out = [
        st
        for st in io.list_recursive(paths.snapshot_dir)
        if not st.name.startswith("snapshot-") and st.name not in _HINTS
    ]
    for directory in (paths.schema_dir, paths.tag_dir, consumer_dir(table)):
        out += [st for st in io.list_recursive(directory) if is_temporary(st.name)]
    if table.branch != MAIN_BRANCH:
        return out  # the shared files are main's candidates
    directories = [paths.manifest_dir, paths.index_dir, join(paths.root, STATISTICS_DIR)]
    directories += [join(paths.root, SCOPES_DIR)]
    directories += bucket_dirs(io, paths.root, len(table.schema.partition_keys))
    for directory in directories:
        out += io.list_recursive(directory)
    return out
