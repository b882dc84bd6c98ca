"""The second phase of a write: commit messages from any number of writers become one snapshot.

Optimistic concurrency, as ``FileStoreCommitImpl``: each attempt reads the latest snapshot,
derives its changes from it (an overwrite deletes the files live *then*), writes manifests and
manifest lists, and tries to create ``snapshot-N``. Losing that race removes the attempt's
metadata files and retries on the new latest snapshot with exponential backoff. A commit that
deletes a file another commit already removed cannot be rebased and fails with
``CommitConflictError``. Nothing is visible until the snapshot file exists. Changelog files
(changelog producers) go into the snapshot's changelog manifest list: those written with the
data into the APPEND snapshot, those of compactions into the COMPACT one; an overwrite commits
none (as Paimon) and deletes them. After a commit, automatic tags are created
(:mod:`lakehouse.commit.auto_tags`).

Once the data snapshot exists the commit has happened: a compaction snapshot or an automatic tag
that fails after it is logged, never raised, so that no caller retries (duplicating the rows) or
aborts (deleting committed files); the next write compacts, the next commit tags.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakehouse.commit.auto_tags import create_auto_tags
from lakehouse.errors import (
    ArgumentTypeError,
    CommitConflictError,
    InvalidArgumentError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lakehouse.iceberg.metadata import try_sync_iceberg
from lakehouse.manifest.entries import (
    DataFileMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
)
from lakehouse.manifest.index_manifest import combine
from lakehouse.manifest.merge import full_compaction_options, merge_manifests
from lakehouse.options import (
    COMMIT_MAX_RETRIES,
    COMMIT_MAX_RETRY_WAIT,
    COMMIT_MIN_RETRY_WAIT,
    COMMIT_TIMEOUT,
    COMMIT_USER_PREFIX,
    CoreOptions,
)
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from lakehouse.store.partitions import PartitionFilter, partition_filter, partition_spec, partition_values
from lakehouse.write.message import CommitMessage
from lakehouse.write.scope import WriteScope, abort_write, data_dirs

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

# None/False, True, "dynamic", one partition spec or a list of them (see TableCommit.commit)
Overwrite = bool | str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
Changes = tuple[list[ManifestEntry], list[IndexManifestEntry]]  # data files, index files
log = logging.getLogger(__name__)


@dataclass
class CommitPlan:
    """The manifest entries the messages of one commit ask for, by what they do."""

    messages: list[CommitMessage]
    adds: list[ManifestEntry]
    deletes: list[ManifestEntry]
    compacted: list[ManifestEntry]  # DELETE of compaction inputs, ADD of its outputs
    new_indexes: list[IndexManifestEntry]  # with the data (hash index)
    compact_indexes: list[IndexManifestEntry]  # with the compaction (deletion vectors)
    changelog: list[ManifestEntry]
    compact_changelog: list[ManifestEntry]

    @classmethod
    def of(cls, messages: list[CommitMessage]) -> CommitPlan:
        def entries(kind: FileKind, attr: str) -> list[ManifestEntry]:
            return [
                ManifestEntry(kind, m.partition, m.bucket, m.total_buckets, f)
                for m in messages
                for f in getattr(m, attr)
            ]

        def indexes(attr: str) -> list[IndexManifestEntry]:
            """New index files (ADD) and the files they replace (DELETE, checked to be live)."""
            out = []
            for m in messages:
                new = getattr(m, attr)
                types = {f.index_type for f in new}
                out += [IndexManifestEntry(FileKind.ADD, m.partition, m.bucket, f) for f in new]
                out += [
                    IndexManifestEntry(FileKind.DELETE, m.partition, m.bucket, f)
                    for f in m.replaced_index_files
                    if f.index_type in types
                ]
            return out

        return cls(
            messages,
            adds=entries(FileKind.ADD, "new_files"),
            deletes=entries(FileKind.DELETE, "deleted_files"),
            compacted=entries(FileKind.DELETE, "compact_before") + entries(FileKind.ADD, "compact_after"),
            new_indexes=indexes("new_index_files"),
            compact_indexes=indexes("compact_index_files"),
            changelog=entries(FileKind.ADD, "changelog_files"),
            compact_changelog=entries(FileKind.ADD, "compact_changelog_files"),
        )

    def changes_data(self, overwrite: Overwrite, scope: PartitionFilter | None) -> bool:
        """Whether a data snapshot is due: files added or removed, changelog, or an overwrite
        (a dynamic overwrite without new files replaces nothing)."""
        if overwrite == "dynamic" and not self.adds:
            return False
        return scope is not None or bool(self.adds or self.deletes or self.changelog)


class TableCommit:
    """Commits messages of one table, at most one snapshot per :meth:`commit` call."""

    def __init__(
        self, table: TableStore, commit_user: str | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        self.table = table
        self.clock = clock or _now_millis  # the snapshots' commit time, epoch millis
        options = table.schema.core_options
        self.commit_user = commit_user or prefixed_user(options, str(uuid.uuid4()))
        self.max_retries = options.get_int(COMMIT_MAX_RETRIES)
        self.timeout_ms = options.duration_ms(COMMIT_TIMEOUT)
        self.min_wait_ms = options.required_duration_ms(COMMIT_MIN_RETRY_WAIT)
        self.max_wait_ms = options.required_duration_ms(COMMIT_MAX_RETRY_WAIT)
        self.landed: list[int] = []  # snapshots this committer created

    def commit(
        self,
        messages: list[CommitMessage],
        overwrite: Overwrite = None,
        watermark: int | None = None,
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: Mapping[str, str] | None = None,
    ) -> int | None:
        """Commit ``messages``; returns the last new snapshot id, or None when there was nothing to do.

        ``overwrite``: None/False appends; True replaces the whole table; a dict such as
        ``{"dt": "2024-01-01"}`` replaces that partition (all new rows must belong to it), a list
        of them those partitions (also the ones no new row belongs to: they end up empty);
        ``"dynamic"`` replaces exactly the partitions the messages write to. Data changes make
        one APPEND (or OVERWRITE) snapshot, compaction changes a COMPACT snapshot after it.
        ``watermark`` (epoch millis) becomes the snapshots' watermark unless an earlier snapshot's
        is later. ``identifier``: the snapshots' ``commitIdentifier``; a streaming writer passes its
        checkpoint or micro-batch id, and a commit that :meth:`committed` already covers is skipped.
        ``properties``: the ``properties`` of its snapshots (what a consumer that commits here read
        up to, say); with properties a data snapshot is committed even when no file changes, so
        they are recorded.
        """
        self._check_messages(messages)
        if self.committed(identifier):
            log.info(
                "table %s: commit user %s committed identifier %d already; nothing to do",
                self.table.name,
                self.commit_user,
                identifier,
            )
            return None
        if self._committed_before(messages):
            log.info("table %s: these commit messages were committed already; nothing to do", self.table.name)
            return None
        plan = CommitPlan.of(messages)
        scope = self._overwrite_scope(overwrite, plan.adds)
        if scope is not None:
            self._drop_changelog(plan)
        snapshot_id = None
        if plan.changes_data(overwrite, scope) or properties:
            snapshot_id = self._commit_data(plan, scope, watermark, identifier, properties)
        if plan.compacted or plan.compact_changelog:
            snapshot_id = self._commit_compaction(plan, watermark, identifier, snapshot_id, properties)
        if snapshot_id is not None:
            self._create_auto_tags(snapshot_id)
            self._sync_iceberg(snapshot_id)
        return snapshot_id

    def drop_partitions(
        self, partitions: Collection[bytes], identifier: int = BATCH_COMMIT_IDENTIFIER
    ) -> int:
        """Delete every file of ``partitions`` (serialized partition rows) as one OVERWRITE
        snapshot with no new file (``FileStoreCommitImpl.dropPartitions``); returns its id.
        ``identifier``: its ``commitIdentifier`` (that of the commit it follows, if any)."""
        if not partitions:
            raise InvalidArgumentError(f"drop_partitions of table {self.table.name} needs partitions")
        dropped = frozenset(partitions).__contains__
        snapshot_id = self._commit_data(CommitPlan.of([]), dropped, None, identifier)
        self._sync_iceberg(snapshot_id)
        return snapshot_id

    def committed(self, identifier: int) -> bool:
        """Whether the newest snapshot of this commit user already covers ``identifier``
        (``FileStoreCommitImpl.filterCommitted``). A streaming writer commits with a stable commit
        user and increasing identifiers (checkpoint or micro-batch ids); after a restart it
        commits the last ones again, and those it finds covered here must not land twice. Batch
        commits (``BATCH_COMMIT_IDENTIFIER``) are never covered."""
        if identifier == BATCH_COMMIT_IDENTIFIER:
            return False
        latest = self.table.snapshots.latest_of_user(self.commit_user)
        return latest is not None and identifier <= latest.commit_identifier

    def compact_manifests(self) -> int | None:
        """Rewrite the latest snapshot's data manifests fully merged (every ADD a DELETE cancels
        dropped, small manifests merged) as a COMPACT snapshot with no data change
        (``FileStoreCommitImpl.compactManifest``); None when that would change nothing."""
        if self.table.snapshots.latest_id() is None:
            return None
        try:
            return self._commit_with_retries(
                lambda latest: ([], []),
                CommitKind.COMPACT,
                [],
                None,
                BATCH_COMMIT_IDENTIFIER,
                compact_manifests=True,
            )
        except _ManifestsUnchanged:
            return None

    def _drop_changelog(self, plan: CommitPlan) -> None:
        """An overwrite commits no changelog (as Paimon): its changelog files are deleted."""
        if plan.changelog or plan.compact_changelog:
            files = [(m, m.changelog_files + m.compact_changelog_files) for m in plan.messages]
            self.table.io.delete_quietly(self._data_paths(files))
            plan.changelog, plan.compact_changelog = [], []

    def _commit_data(
        self,
        plan: CommitPlan,
        scope: PartitionFilter | None,
        watermark: int | None,
        identifier: int,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        """The APPEND snapshot of new files, or the OVERWRITE snapshot that also removes files."""
        kind = CommitKind.APPEND if scope is None and not plan.deletes else CommitKind.OVERWRITE
        return self._commit_with_retries(
            lambda latest: self._data_changes(plan, scope, latest),
            kind,
            plan.changelog,
            watermark,
            identifier,
            properties=properties,
        )

    def _data_changes(
        self, plan: CommitPlan, scope: PartitionFilter | None, latest: Snapshot | None
    ) -> Changes:
        """The entries of a data commit on top of ``latest``, after checking it may still land."""
        self._check_replaced(plan.new_indexes, latest)
        self._check_key_index(plan.messages, latest)
        if scope is None and not plan.deletes:
            return plan.adds, plan.new_indexes
        live = self.table.live_entries(latest) if latest is not None else []
        self._check_deletes(plan.deletes, live)
        removed = [e.with_kind(FileKind.DELETE) for e in live if scope is not None and scope(e.partition)]
        dropped = {e.identifier for e in removed}
        kept = [e for e in plan.deletes if e.identifier not in dropped]
        # an overwritten partition loses its index files too
        stale = [
            replace(e, kind=FileKind.DELETE)
            for e in (self.table.index_entries(latest) if latest is not None else [])
            if scope is not None and scope(e.partition)
        ]
        return removed + kept + plan.adds, stale + plan.new_indexes

    def _commit_compaction(
        self,
        plan: CommitPlan,
        watermark: int | None,
        identifier: int,
        data_snapshot: int | None,
        properties: Mapping[str, str] | None = None,
    ) -> int | None:
        """The COMPACT snapshot after the data snapshot (if any). Once the data snapshot landed a
        failed compaction is only logged (its files deleted): the commit did happen."""

        def changes(latest: Snapshot | None) -> Changes:
            live = self.table.live_entries(latest) if latest is not None else []
            self._check_deletes([e for e in plan.compacted if e.kind == FileKind.DELETE], live)
            self._check_replaced(plan.compact_indexes, latest)
            return plan.compacted, plan.compact_indexes

        try:
            return self._commit_with_retries(
                changes,
                CommitKind.COMPACT,
                plan.compact_changelog,
                watermark,
                identifier,
                properties=properties,
            )
        except Exception as e:
            self.table.io.delete_quietly(self._compaction_output(plan.messages))
            if data_snapshot is None:
                raise
            if not isinstance(e, CommitConflictError):  # a conflict: another compaction won
                log.warning(
                    "table %s: snapshot %d is committed, its compaction failed (the next write or "
                    "compaction compacts again)",
                    self.table.name,
                    data_snapshot,
                    exc_info=True,
                )
            return data_snapshot

    def _sync_iceberg(self, snapshot_id: int) -> None:
        """Iceberg-compatible metadata of the new snapshot (``metadata.iceberg.storage``)."""
        try_sync_iceberg(self.table, f"the commit of snapshot {snapshot_id}")

    def _create_auto_tags(self, snapshot_id: int) -> None:
        """Automatic tags after a commit; a failure is logged (the next commit creates them)."""
        try:
            create_auto_tags(self.table)
        except Exception:
            log.warning(
                "table %s: snapshot %d is committed, creating its automatic tags failed (the next "
                "commit creates them)",
                self.table.name,
                snapshot_id,
                exc_info=True,
            )

    def _check_messages(self, messages: list[CommitMessage]) -> None:
        """Refuse what is not a commit message of this table."""
        strays = [m for m in messages if not isinstance(m, CommitMessage)]
        if strays:
            raise ArgumentTypeError(
                f"commit to table {self.table.name} takes the commit messages a writer's prepare_commit() "
                f"returned, not {type(strays[0]).__name__} {strays[0]!r}; nothing was committed"
            )
        identity = self.table.identity
        foreign = sorted({m.table_id for m in messages if m.table_id and m.table_id != identity})
        if foreign:
            raise InvalidArgumentError(
                f"commit to table {self.table.name} ({identity}) got commit messages written for another "
                f"table ({', '.join(foreign)}); commit them with that table's committer - nothing was "
                f"committed"
            )

    def _committed_before(self, messages: list[CommitMessage]) -> bool:
        """Whether a snapshot since the messages' writers started already added their new files
        (the same messages committed twice): all of them - a no-op - or some - a conflict."""
        new = {f.file_name for m in messages for f in m.new_files}
        bases = [m.base_snapshot for m in messages if m.table_id]
        if not new or len(bases) < len(messages):
            return False
        snapshots = self.table.snapshots
        latest = snapshots.latest_id()
        start = min((b for b in bases if b is not None), default=0) + 1
        added = {
            e.file.file_name
            for sid in range(start, (latest or 0) + 1)
            if snapshots.exists(sid)
            for e in self.table.added_entries(snapshots.snapshot(sid))
        }
        found = new & added
        if found and found != new:
            raise CommitConflictError(
                f"commit to table {self.table.name}: {len(found)} of the {len(new)} new files of these "
                f"messages were committed already, the others not; nothing was committed - write the "
                f"data again"
            )
        return bool(found)

    def _check_deletes(self, deletes: list[ManifestEntry], live: list[ManifestEntry]) -> None:
        """Files a writer chose to delete must still be live; otherwise another commit won."""
        if not deletes:
            return
        present = {e.identifier for e in live}
        gone = [e.file.file_name for e in deletes if e.identifier not in present]
        if gone:
            raise CommitConflictError(
                f"commit to table {self.table.name} deletes files {gone} that are no longer in the table "
                f"(a concurrent commit removed them); nothing was committed - redo the operation"
            )

    def _check_replaced(self, changes: list[IndexManifestEntry], latest: Snapshot | None) -> None:
        """Index files a writer replaces must still be live; otherwise another commit changed the
        bucket's index (its keys or deletion vectors would be lost)."""
        replaced = [e.index_file.file_name for e in changes if e.kind == FileKind.DELETE]
        if not replaced:
            return
        live = {e.index_file.file_name for e in self.table.index_entries(latest)} if latest else set()
        gone = [name for name in replaced if name not in live]
        if gone:
            raise CommitConflictError(
                f"commit to table {self.table.name} replaces index files {gone} that a concurrent commit "
                f"already replaced (two writers changed the same bucket's index); nothing was committed - "
                f"redo the write"
            )

    def _check_key_index(self, messages: list[CommitMessage], latest: Snapshot | None) -> None:
        """A cross-partition writer knew where each key lived as of its snapshot; data committed
        since could hold keys it placed again elsewhere (a key in two partitions)."""
        bases = [m.key_index_snapshot for m in messages if m.key_index_snapshot is not None]
        if not bases or latest is None or latest.id <= min(bases):
            return
        since = range(min(bases) + 1, latest.id + 1)
        changed = [i for i in since if self.table.snapshots.snapshot(i).commit_kind != CommitKind.COMPACT]
        if changed:
            raise CommitConflictError(
                f"commit to table {self.table.name}: snapshots {changed} changed its data after this writer "
                f"read where each primary key lives (a cross-partition upsert table takes one writer at a "
                f"time); nothing was committed - redo the write"
            )

    def abort(
        self, messages: list[CommitMessage], scope: WriteScope | None = None, keep: Collection[str] = ()
    ) -> None:
        """Delete the files written for ``messages``, which will not be committed; with their write's
        ``scope``, also every other file of that write. Paths in ``keep`` stay (see
        :func:`~lakehouse.write.scope.committed_since`). Nothing, once this committer committed."""
        if self.landed:
            return
        kept = set(keep)
        written = [
            *self._data_paths([(m, m.new_files + m.changelog_files) for m in messages]),
            *self._index_paths([f for m in messages for f in m.new_index_files]),
            *self._compaction_output(messages),
        ]
        doomed = [p for p in written if p not in kept]
        self.table.io.delete_quietly(doomed)
        self.table.io.remove_empty_dirs(data_dirs(self.table, doomed), self.table.paths.root)
        if scope is not None:
            abort_write(self.table, scope, kept)

    def _compaction_output(self, messages: list[CommitMessage]) -> list[str]:
        """Files a compaction wrote (not those it only moved to another level)."""
        rewritten = [
            (m, [f for f in m.compact_after if f.file_name not in {b.file_name for b in m.compact_before}])
            for m in messages
        ]
        return [
            *self._index_paths([f for m in messages for f in m.compact_index_files]),
            *self._data_paths(rewritten + [(m, m.compact_changelog_files) for m in messages]),
        ]

    def _index_paths(self, files: list[IndexFileMeta]) -> list[str]:
        return [self.table.paths.index_file(f.file_name, f.external_path) for f in files]

    def _data_paths(self, files: Iterable[tuple[CommitMessage, Iterable[DataFileMeta]]]) -> list[str]:
        """Paths of (message, data file metas) pairs, with the files kept next to them."""
        table = self.table
        paths = []
        for m, metas in files:
            bucket_path = table.bucket_path(m.partition, m.bucket)
            for f in metas:
                paths += table.paths.data_files(bucket_path, f)
        return paths

    def check_overwrite(self, overwrite: Overwrite) -> None:
        """Validate an overwrite argument before any data is written."""
        if overwrite not in (None, False, True) and self.table.schema.cross_partition_update:
            raise UnsupportedFeatureError(
                f"table {self.table.name} moves primary keys between partitions (its key lacks partition "
                f"keys), so a partition overwrite cannot tell which keys it replaces; overwrite the whole "
                f"table with overwrite=True, or write the rows as upserts"
            )
        specs = _partition_specs(overwrite)
        if specs is None and overwrite not in (None, False, True, "dynamic"):
            raise ArgumentTypeError(
                f"overwrite of table {self.table.name} must be None, True, 'dynamic', a partition dict "
                f"such as {{'dt': '2024-01-01'}} or a list of them, not {overwrite!r}"
            )
        if specs == []:
            raise InvalidArgumentError(
                f"overwrite of table {self.table.name} lists no partitions; pass None to append, or the "
                f"partitions to replace"
            )
        for spec in specs or ():
            partition_spec(self.table.schema, self.table.name, spec, "overwrite")

    # ---- overwrite scope -----------------------------------------------------------------

    def _overwrite_scope(self, overwrite: Overwrite, adds: list[ManifestEntry]) -> PartitionFilter | None:
        schema = self.table.schema
        if overwrite is None or overwrite is False:
            return None
        if overwrite is True or not schema.partition_keys:
            return lambda partition: True
        if overwrite == "dynamic":
            written = {e.partition for e in adds}
            return written.__contains__
        self.check_overwrite(overwrite)
        specs = _partition_specs(overwrite)
        assert specs is not None  # check_overwrite refused every other overwrite
        matches = partition_filter(schema, self.table.name, specs, "overwrite")
        outside = [e for e in adds if not matches(e.partition)]
        if outside:
            named = [dict(s) for s in specs]
            raise SchemaMismatchError(
                f"overwrite of partitions {named} of table {self.table.name} got rows of partition "
                f"{partition_values(schema, outside[0].partition)}; write only those partitions' rows"
            )
        return matches

    # ---- the commit loop -----------------------------------------------------------------

    def _commit_with_retries(
        self,
        changes: Callable[[Snapshot | None], Changes],
        kind: CommitKind,
        changelog: list[ManifestEntry],
        watermark: int | None,
        identifier: int,
        compact_manifests: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        snapshots = self.table.snapshots
        start = time.monotonic()
        for attempt in range(self.max_retries + 1):
            latest = snapshots.latest()
            snapshot_id = self._try_commit_once(
                latest, *changes(latest), kind, changelog, watermark, identifier, compact_manifests,
                properties,
            )  # fmt: skip
            if snapshot_id is not None:
                return snapshot_id
            elapsed_ms = (time.monotonic() - start) * 1000
            if self.timeout_ms is not None and elapsed_ms > self.timeout_ms:
                break
            wait = min(self.min_wait_ms * 2**attempt, self.max_wait_ms)
            time.sleep((wait + random.randint(0, max(1, int(wait * 0.2)))) / 1000)
        raise CommitConflictError(
            f"commit to table {self.table.name} lost the race for a new snapshot {self.max_retries + 1} "
            f"times; other writers are committing heavily - retry later or raise commit.max-retries"
        )

    def _try_commit_once(
        self,
        latest: Snapshot | None,
        entries: list[ManifestEntry],
        index_changes: list[IndexManifestEntry],
        kind: CommitKind,
        changelog: list[ManifestEntry],
        watermark: int | None,
        identifier: int,
        compact_manifests: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> int | None:
        """Write this attempt's metadata and try to take the next snapshot id; None if taken.
        ``compact_manifests``: merge the base fully, and raise ``_ManifestsUnchanged`` when that
        leaves the manifests as they are."""
        table = self.table
        store = table.manifests()
        schema_id = table.schema_manager.current().id
        options = table.schema.core_options
        written: list[str] = []
        try:
            previous = []
            if latest is not None:
                previous = store.read_list(latest.base_manifest_list) + store.read_list(
                    latest.delta_manifest_list
                )
            merge_options = full_compaction_options(options) if compact_manifests else options
            merged = merge_manifests(store, previous, merge_options, schema_id, entries)
            before = {m.file_name for m in previous}
            written += [m.file_name for m in merged if m.file_name not in before]
            if compact_manifests and {m.file_name for m in merged} == before:
                raise _ManifestsUnchanged
            base_list, base_size = store.write_list(merged)
            written.append(base_list)
            delta = store.write_manifests(entries, schema_id)
            written += [m.file_name for m in delta]
            delta_list, delta_size = store.write_list(delta)
            written.append(delta_list)
            changelog_list = changelog_size = None
            if changelog:
                changelog_manifests = store.write_manifests(changelog, schema_id)
                written += [m.file_name for m in changelog_manifests]
                changelog_list, changelog_size = store.write_list(changelog_manifests)
                written.append(changelog_list)
            index_manifest = None if latest is None else latest.index_manifest
            if index_changes:
                live = combine(table.index_entries(latest) if latest is not None else [], index_changes)
                index_manifest = store.write_index_manifest(live) if live else None
                if index_manifest is not None:
                    written.append(index_manifest)
            delta_rows = sum(
                e.file.row_count if e.kind == FileKind.ADD else -e.file.row_count for e in entries
            )
            snapshot = Snapshot(
                id=1 if latest is None else latest.id + 1,
                schema_id=schema_id,
                base_manifest_list=base_list,
                base_manifest_list_size=base_size,
                delta_manifest_list=delta_list,
                delta_manifest_list_size=delta_size,
                changelog_manifest_list=changelog_list,
                changelog_manifest_list_size=changelog_size,
                index_manifest=index_manifest,
                commit_user=self.commit_user,
                commit_identifier=identifier,
                commit_kind=kind,
                time_millis=self.clock(),
                total_record_count=(0 if latest is None else latest.total_record_count) + delta_rows,
                delta_record_count=delta_rows,
                changelog_record_count=sum(e.file.row_count for e in changelog) if changelog else None,
                watermark=_later(watermark, None if latest is None else latest.watermark),
                next_row_id=0 if latest is None or latest.next_row_id is None else latest.next_row_id,
                properties=dict(properties) if properties else None,
            )
            if table.snapshots.try_commit(snapshot):
                self.landed.append(snapshot.id)
                return snapshot.id
        except BaseException:
            store.delete(written)
            raise
        store.delete(written)
        return None


class _ManifestsUnchanged(Exception):
    """A manifest compaction that would list the manifests the latest snapshot lists."""


def _partition_specs(overwrite: Overwrite) -> list[Mapping[str, Any]] | None:
    """The partition specs an overwrite names (one dict, or a list or tuple of dicts), else None."""
    if isinstance(overwrite, Mapping):
        return [overwrite]
    if isinstance(overwrite, list | tuple) and all(isinstance(s, Mapping) for s in overwrite):
        return list(overwrite)
    return None


def prefixed_user(options: CoreOptions, base: str) -> str:
    """The commit user ``base`` names, behind the table's ``commit.user-prefix`` if it has one."""
    prefix = options.get(COMMIT_USER_PREFIX)
    return f"{prefix}_{base}" if prefix else base


def _now_millis() -> int:
    return int(time.time() * 1000)


def _later(a: int | None, b: int | None) -> int | None:
    """The later of two optional watermarks."""
    return b if a is None else a if b is None else max(a, b)
