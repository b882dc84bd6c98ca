"""Table-level file-index maintenance: rebuilding indexes of existing files, and verifying them.

Indexes cover a file's columns as written (names and types of the file's schema), so a column
whose type was widened since is neither indexed nor probed in older files. ``rewrite_file_index``
reads only the indexed columns, never rewrites data, and commits one COMPACT snapshot replacing
the metadata of files whose indexes changed (``FileIndexProcessor``); snapshots before it still
read their own metadata. ``verify_file_indexes`` re-reads data and reports what disagrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.commit.table_commit import TableCommit
from lakehouse.errors import CorruptFileError, UnsupportedFeatureError
from lakehouse.fileindex import format as container
from lakehouse.fileindex.build import INDEX_SUFFIX, FileIndexBuilder
from lakehouse.fileindex.check import check_index
from lakehouse.fileindex.options import buildable, declared, in_manifest_threshold
from lakehouse.io.pool import map_parallel
from lakehouse.manifest.entries import ManifestEntry
from lakehouse.paths import FileNamer
from lakehouse.store.data_reader import read_data_file
from lakehouse.store.partitions import Partitions, in_partitions
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import WriteScope

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class IndexRewrite:
    """What ``rewrite_file_index`` did."""

    files_checked: int
    files_rewritten: int
    index_bytes_written: int
    snapshot_id: int | None


@dataclass(frozen=True)
class IndexReport:
    """What a verification found; each problem names the file, column and index.

    ``problems`` are wrong: an index that would skip matching rows, is unreadable or does not fit
    its file; ``ok`` is their absence. ``missing`` is stale coverage, not wrong: files written
    before an index was configured lack it (``rewrite_file_index`` builds it) and are read
    unpruned meanwhile. ``coverage``: the share of the configured indexes that files have.
    """

    ok: bool
    files_checked: int
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    indexes_expected: int = 0

    @property
    def coverage(self) -> float:
        expected = self.indexes_expected
        return 1.0 if expected == 0 else (expected - len(self.missing)) / expected


def _file_indexes(table: TableStore, schema_id: int) -> FileIndexBuilder:
    """Declared indexes as they apply to files of ``schema_id``: file column names, same types only."""
    current = {f.name: f for f in table.schema.fields}
    file_schema = table.schema_by_id(schema_id)
    in_file = {f.id: f for f in file_schema.fields}
    out = []
    for index in declared(table.schema.options):
        old = in_file.get(current[index.column].id)
        if old is not None and old.type.copy(True) == current[index.column].type.copy(True):
            out.append(replace(index, column=old.name))
    return FileIndexBuilder(out, {f.name: f.type for f in file_schema.fields})


def _raw_columns(table: TableStore, entry: ManifestEntry, names: list[str]) -> pa.Table:
    """Columns of a data file as written (file schema names and types)."""
    fields = table.schema_by_id(entry.file.schema_id).fields_named(names)
    return read_data_file(table, table.bucket_path(entry.partition, entry.bucket), entry.file, fields)


def _path(table: TableStore, entry: ManifestEntry, name: str) -> str:
    """An index file kept next to an entry's data file."""
    bucket_path = table.bucket_path(entry.partition, entry.bucket)
    return table.paths.extra_file(bucket_path, name, entry.file.external_path)


def _stored_index(table: TableStore, entry: ManifestEntry) -> tuple[bytes | None, str | None]:
    """A file's current index container and, if it lives in its own file, that file's name."""
    name = next((n for n in entry.file.extra_files if n.endswith(INDEX_SUFFIX)), None)
    if name is None:
        return entry.file.embedded_index, None
    try:
        return table.io.read_bytes(_path(table, entry, name)), name
    except FileNotFoundError:
        return None, name


@dataclass(frozen=True)
class IndexChanges:
    """Index files written for some data files, and the messages that commit their new metadata."""

    messages: list[CommitMessage]
    written: list[str]  # index files published (deleted if the commit fails)
    index_bytes: int


def rewrite_file_index(
    table: TableStore,
    partitions: list[Mapping[str, Any]] | Mapping[str, Any] | None = None,
    commit_user: str | None = None,
) -> IndexRewrite:
    """Build missing or outdated indexes of the latest snapshot's files per current options."""
    entries = index_rewrite_entries(table, partitions)
    return commit_index_rewrite(table, [rewrite_indexes(table, entries)], len(entries), commit_user)


def index_rewrite_entries(table: TableStore, partitions: Partitions = None) -> list[ManifestEntry]:
    """The latest snapshot's files in ``partitions`` (None: all), whose indexes a rewrite checks."""
    buildable(table.schema.options, table.name)
    snapshot = table.snapshots.latest()
    if snapshot is None:
        return []
    return in_partitions(
        table.schema, table.name, table.live_entries(snapshot), partitions, "rewrite_file_index partitions"
    )


def rewrite_indexes(
    table: TableStore, entries: list[ManifestEntry], names: FileNamer | None = None
) -> IndexChanges:
    """Build the indexes of ``entries`` whose stored ones differ from what the options ask for and
    publish those too large for the manifest; any process can run this for its share of files.

    A new index file is named ``<data file>-<uid>-<n>.index`` from ``names`` (the writer's, in its
    write scope): unlike Paimon's ``<data file>-<k>.index`` it cannot be the name a concurrent
    rewrite of the same file chose, which that rewrite's abort would delete.
    """
    threshold = in_manifest_threshold(table.schema.options)
    names = names or WriteScope().namer()

    def rebuild(entry: ManifestEntry) -> tuple[ManifestEntry, bytes | None, str | None] | None:
        """The entry's new index and the name of the file that will hold it (None: embedded)."""
        builder = _file_indexes(table, entry.file.schema_id)
        old, old_name = _stored_index(table, entry)
        new = builder.build(_raw_columns(table, entry, builder.columns)) if builder else None
        if new == old and (old is None or (len(old) > threshold) == (old_name is not None)):
            return None  # already what the options ask for
        big = new is not None and len(new) > threshold
        return entry, new, names.with_prefix(f"{entry.file.file_name}-", INDEX_SUFFIX).next() if big else None

    changes = [c for c in map_parallel(rebuild, entries) if c is not None]
    written: list[str] = []
    messages = []
    try:
        for entry, index, name in changes:
            extras = tuple(n for n in entry.file.extra_files if not n.endswith(INDEX_SUFFIX))
            if name is not None:
                assert index is not None  # only an index too big to embed gets a file
                written.append(_path(table, entry, name))
                table.io.publish(written[-1], index)
                meta = replace(entry.file, extra_files=(*extras, name), embedded_index=None)
            else:
                meta = replace(entry.file, extra_files=extras, embedded_index=index)
            messages.append(
                CommitMessage(
                    entry.partition,
                    entry.bucket,
                    entry.total_buckets,
                    compact_before=(entry.file,),
                    compact_after=(meta,),
                    table_id=table.identity,
                )
            )
    except BaseException:
        table.io.delete_quietly(written)
        raise
    size = sum(len(index) for _, index, _ in changes if index is not None)
    return IndexChanges(messages, written, size)


def commit_index_rewrite(
    table: TableStore, changes: list[IndexChanges], files_checked: int, commit_user: str | None = None
) -> IndexRewrite:
    """Commit the changes of :func:`rewrite_indexes` calls as one COMPACT snapshot (if any)."""
    messages = [m for c in changes for m in c.messages]
    try:
        snapshot_id = TableCommit(table, commit_user).commit(messages) if messages else None
    except BaseException:
        table.io.delete_quietly([path for c in changes for path in c.written])
        raise
    return IndexRewrite(files_checked, len(messages), sum(c.index_bytes for c in changes), snapshot_id)


def verify_file_indexes(
    table: TableStore,
    snapshot_id: int | None = None,
    commit_user: str | None = None,
    partitions: Partitions = None,
) -> IndexReport:
    """Check every index of every file of a snapshot (default: latest; of ``partitions``, default
    all) against the data; ``commit_user``: only the files its snapshots added (what one writer
    wrote)."""
    snapshot = table.snapshot(snapshot_id)
    entries = table.live_entries(snapshot) if snapshot is not None else []
    entries = in_partitions(table.schema, table.name, entries, partitions, "verify partitions")
    if commit_user is not None and snapshot is not None:
        snapshots = table.snapshots
        mine = {
            e.file.file_name
            for sid in snapshots.snapshot_ids()
            if sid <= snapshot.id and (snap := snapshots.snapshot(sid)).commit_user == commit_user
            for e in table.added_entries(snap)
        }
        entries = [e for e in entries if e.file.file_name in mine]
    threshold = in_manifest_threshold(table.schema.options)

    def check(entry: ManifestEntry) -> tuple[list[str], list[str], int]:
        """(problems, missing indexes, indexes expected) of one file."""
        label = f"{table.bucket_path(entry.partition, entry.bucket)}/{entry.file.file_name}"
        stored, name = _stored_index(table, entry)
        expected = {(i.column, i.index_type) for i in _file_indexes(table, entry.file.schema_id).indexes}
        if name is not None and stored is None:
            return [f"{label}: index file {name} is missing"], [], len(expected)
        problems = []
        if stored is not None and (len(stored) > threshold) != (name is not None):
            where = "in its own file" if name else "embedded in the manifest"
            problems.append(f"{label}: a {len(stored)}-byte index is {where}; the threshold is {threshold}")
        try:
            indexes = container.read(stored) if stored is not None else {}
        except (CorruptFileError, UnsupportedFeatureError) as e:
            return [*problems, f"{label}: index container is unreadable ({e})"], [], len(expected)
        present = {(c, t) for c, types in indexes.items() for t in types}
        missing = [f"{label}: column {c!r} has no {t} index" for c, t in sorted(expected - present)]
        file_schema = table.schema_by_id(entry.file.schema_id)
        columns = [c for c in indexes if c in file_schema.field_names]
        problems += [f"{label}: index on unknown column {c!r}" for c in indexes if c not in columns]
        if columns:
            data = _raw_columns(table, entry, columns)
            for column in columns:
                for index_type, payload in indexes[column].items():
                    dtype = file_schema.field(column).type
                    for problem in check_index(index_type, payload, data.column(column), dtype):
                        problems.append(f"{label}: {index_type} index of column {column!r}: {problem}")
        return problems, missing, len(expected)

    found = map_parallel(check, entries)
    problems = [p for file_problems, _, _ in found for p in file_problems]
    missing = [m for _, file_missing, _ in found for m in file_missing]
    return IndexReport(not problems, len(entries), problems, missing, sum(n for *_, n in found))
