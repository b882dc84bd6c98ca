"""Iceberg-compatible metadata of a table (``metadata.iceberg.storage``), written after each commit
so that Iceberg readers (pyiceberg, DuckDB, Polars, Trino, Snowflake, Spark) read the table's
Parquet files in place (``IcebergCommitCallback``).

Each sync extends the Iceberg history by one snapshot per new Paimon snapshot, of the same id
(:mod:`lakehouse.iceberg.history`), then writes ``v<N>.metadata.json`` and then
``version-hint.text`` naming it: a reader following the hint finds only complete metadata. The
history holds the Paimon snapshots that still exist: time travel reads what Paimon reads, tags are
Iceberg tags, an expiration drops the snapshots it expires (and the manifests only they name)
before their files go, and a rollback rewinds the history to its target. A sync is idempotent: a
crash between a commit and its sync is caught up by the next commit's sync, or by
:func:`sync_iceberg` itself.

The metadata goes to ``<table>/metadata`` (``table-location``) or to a Hadoop catalog under the
warehouse, ``<warehouse>/iceberg/<db>/<table>/metadata`` (``catalog-location``, the default of
``hadoop-catalog``). Older metadata versions are deleted after each sync (but
``metadata.iceberg.previous-versions-max`` of them), and so are versions of snapshots a rollback
removed.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.errors import UnsupportedFeatureError
from lakehouse.format.iceberg_schema import iceberg_schema, last_partition_id, partition_spec
from lakehouse.iceberg.history import commit_identity, delta_changes, describe, full_changes, named_files
from lakehouse.iceberg.layout import Layout, external, internal
from lakehouse.iceberg.manifest import Partitioning
from lakehouse.io.fs import FileStatus
from lakehouse.options import (
    DELETION_VECTORS_ENABLED,
    ICEBERG_CODECS,
    MANIFEST_TARGET_FILE_SIZE,
    IcebergLocation,
    IcebergSettings,
)
from lakehouse.paths import MAIN_BRANCH
from lakehouse.snapshot import Snapshot
from lakehouse.store.tags import list_tags

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

log = logging.getLogger(__name__)

VERSION_HINT = "version-hint.text"
_VERSION = re.compile(r"^v(\d+)\.metadata\.json$")
_AVRO_CODECS = dict(zip(ICEBERG_CODECS, ("null", "deflate", "snappy", "zstandard"), strict=True))


def metadata_dir(table: TableStore, settings: IcebergSettings) -> str:
    """Where the table's Iceberg metadata goes."""
    root = table.paths.root.rstrip("/")
    if settings.location == IcebergLocation.TABLE_LOCATION:
        return f"{root}/metadata"
    database_dir, name = root.rsplit("/", 1)
    warehouse, database = database_dir.rsplit("/", 1)
    if not database.endswith(".db"):
        raise UnsupportedFeatureError(
            f"table {table.name}: Iceberg metadata in the catalog's location needs the table in a "
            f"warehouse database directory (<db>.db), not {database_dir}; set "
            f"'metadata.iceberg.storage-location'='table-location'"
        )
    return f"{warehouse}/iceberg/{database[: -len('.db')]}/{name}/metadata"


def delete_iceberg_metadata(table: TableStore) -> None:
    """Delete the table's Iceberg metadata, before the table is dropped or moves: readers must
    not find metadata naming files that are gone, and the metadata names them by absolute path.
    In a Hadoop catalog the catalog's directory of the table goes too. The next sync writes the
    metadata from scratch."""
    settings = table.schema.core_options.iceberg
    if not settings.enabled:
        return
    directory = metadata_dir(table, settings)
    if settings.location == IcebergLocation.CATALOG_LOCATION:
        directory = directory.rsplit("/", 1)[0]  # <warehouse>/iceberg/<db>/<table>
    table.io.delete_dir(directory)


@dataclass(frozen=True)
class IcebergSync:
    """What a sync wrote: the metadata file of snapshot ``snapshot_id`` (as readers reach it)."""

    snapshot_id: int
    metadata_file: str


def sync_iceberg(table: TableStore) -> IcebergSync | None:
    """Bring the Iceberg metadata up to the latest snapshot, the snapshots that still exist and
    the tags; None when the table has none to write (disabled, no snapshot, a branch)."""
    settings = table.schema.core_options.iceberg
    if not settings.enabled or table.branch != MAIN_BRANCH:
        return None
    snapshot = table.snapshots.latest()
    if snapshot is None:
        return None
    io = table.io
    directory = metadata_dir(table, settings)
    path = f"{directory}/v{snapshot.id}.metadata.json"
    base = _base(table, path, snapshot)
    metadata, dropped, in_use = _advance(table, settings, directory, base, snapshot)
    if base is None or _content(metadata) != _content(base):
        io.write_bytes(path, json.dumps(metadata, separators=(",", ":")).encode())  # C encoder: no indent
    if table.snapshots.latest_id() == snapshot.id:  # a later commit's sync names its own
        io.write_bytes(f"{directory}/{VERSION_HINT}", str(snapshot.id).encode())
        _retire(table, directory, snapshot.id, settings)
        _drop(table, directory, dropped, in_use)
    return IcebergSync(snapshot.id, external(table, path))


def try_sync_iceberg(table: TableStore, after: str) -> None:
    """:func:`sync_iceberg` after ``after`` (a commit, a tag), which stands whatever the sync
    does: a failure is logged, and the next commit's sync (or ``Table.sync_iceberg_metadata``)
    writes the metadata."""
    try:
        sync_iceberg(table)
    except Exception:
        log.warning(
            "table %s: %s is done, writing its Iceberg metadata failed (the next commit, or "
            "Table.sync_iceberg_metadata(), writes it)",
            table.name,
            after,
            exc_info=True,
        )


def current_metadata_file(table: TableStore) -> str | None:
    """The metadata file ``version-hint.text`` names, None when there is none."""
    settings = table.schema.core_options.iceberg
    if not settings.enabled:
        return None
    directory = metadata_dir(table, settings)
    try:
        version = int(table.io.read_bytes(f"{directory}/{VERSION_HINT}").decode().strip())
    except (FileNotFoundError, ValueError):
        return None
    return f"{directory}/v{version}.metadata.json"


def _read(table: TableStore, path: str | None) -> dict[str, Any] | None:
    """A metadata version, None when it is missing, torn or foreign."""
    if path is None:
        return None
    try:
        metadata = json.loads(table.io.read_bytes(path))
    except (FileNotFoundError, ValueError):
        return None
    snapshots = metadata.get("snapshots") if isinstance(metadata, dict) else None
    return metadata if isinstance(snapshots, list) and snapshots else None


def _base(table: TableStore, path: str, snapshot: Snapshot) -> dict[str, Any] | None:
    """The metadata a sync starts from: the latest snapshot's own version if it describes that
    snapshot (a sync that died before its hint), else the version readers see."""
    own = _read(table, path)
    if own is not None and _identity(own["snapshots"][-1]) == commit_identity(snapshot):
        return own
    return _read(table, current_metadata_file(table))


def _identity(record: dict[str, Any]) -> str | None:
    summary = record.get("summary")
    return summary.get("paimon-commit-identity") if isinstance(summary, dict) else None


def _advance(
    table: TableStore,
    settings: IcebergSettings,
    directory: str,
    base: dict[str, Any] | None,
    snapshot: Snapshot,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The metadata of ``snapshot`` from ``base``; the snapshots of ``base`` it no longer holds,
    and those of its snapshots that may share manifests with them.

    ``base``'s history is cut back to its newest snapshot still on the table's timeline (a
    rollback, or a commit after one, replaced the later ones) and extended by one Iceberg
    snapshot per Paimon snapshot since; with none left, it restarts from the table's earliest
    snapshot. Snapshots older than that are dropped: their files may be expired."""
    layout = _layout(table, settings, directory)
    old = base["snapshots"] if base is not None and _compatible(table, settings, base) else []
    earliest = table.snapshots.earliest_id() or snapshot.id
    history = list(old)
    previous = None
    while history and (previous := _described(table, history[-1], snapshot, earliest)) is None:
        history.pop()
    ancestor = history[-1:]
    # row ids once handed out are never handed out again, not even after a rollback
    next_row_id = _int(base.get("next-row-id") if base is not None else None)
    if previous is None:  # from the table's earliest snapshot on
        previous = snapshot if earliest == snapshot.id else table.snapshots.snapshot(earliest)
        first = describe(layout, previous, None, None, full_changes(layout, previous), next_row_id)
        history = [first]
        next_row_id += first.get("added-rows", 0)
    for sid in range(previous.id + 1, snapshot.id + 1):
        paimon = snapshot if sid == snapshot.id else table.snapshots.snapshot(sid)
        record = describe(layout, paimon, history[-1], previous, delta_changes(layout, paimon), next_row_id)
        history.append(record)
        next_row_id += record.get("added-rows", 0)
        previous = paimon
    kept = [s for s in history if s["snapshot-id"] >= earliest]
    lists = {s["manifest-list"] for s in kept}
    dropped = [s for s in old if s["manifest-list"] not in lists]
    uuid_ = base.get("table-uuid") if base is not None else None
    metadata = _metadata(table, settings, layout, kept, uuid_)
    if settings.format_version >= 3:
        metadata["next-row-id"] = next_row_id
    return metadata, dropped, kept[:1] + ancestor


def _int(value: Any) -> int:
    """A non-negative count of a metadata field, 0 for none."""
    return value if isinstance(value, int) and value >= 0 else 0


def _layout(table: TableStore, settings: IcebergSettings, directory: str) -> Layout:
    current = table.schema
    partition_fields = [current.field(k) for k in current.partition_keys]
    options = current.core_options
    return Layout(
        table,
        directory,
        _AVRO_CODECS[settings.codec],
        Partitioning(
            tuple(current.partition_keys),
            tuple(f.type for f in partition_fields),
            tuple(f.id for f in partition_fields),
        ),
        settings.format_version,
        options.get_bool(DELETION_VECTORS_ENABLED),  # the schema's check: only in format 3
        iceberg_schema(current.id, current.fields, settings.format_version),
        partition_spec(partition_fields),
        options.memory(MANIFEST_TARGET_FILE_SIZE),
        settings.compaction_min_files,
        settings.compaction_max_files,
    )


def _compatible(table: TableStore, settings: IcebergSettings, base: dict[str, Any]) -> bool:
    """Whether ``base`` can be extended: this table's (not a copy's), of the same format version."""
    location = external(table, table.paths.root.rstrip("/"))
    return base.get("format-version") == settings.format_version and base.get("location") == location


def _described(table: TableStore, record: dict[str, Any], latest: Snapshot, earliest: int) -> Snapshot | None:
    """The snapshot the table still has that the Iceberg snapshot ``record`` describes, if any."""
    sid = record.get("snapshot-id")
    if not isinstance(sid, int) or not earliest <= sid <= latest.id:
        return None
    paimon = (
        latest if sid == latest.id else table.snapshots.snapshot(sid) if table.snapshots.exists(sid) else None
    )
    return paimon if paimon is not None and _identity(record) == commit_identity(paimon) else None


def _metadata(
    table: TableStore,
    settings: IcebergSettings,
    layout: Layout,
    history: list[dict[str, Any]],
    table_uuid: Any,
) -> dict[str, Any]:
    """The table metadata of ``history`` (oldest first; the last is current) and the tags of its
    snapshots."""
    manager = table.schema_manager
    schemas = [manager.schema(i) for i in manager.schema_ids()]
    current = history[-1]
    ids = {s["snapshot-id"] for s in history}
    refs = {
        t.name: {"snapshot-id": t.snapshot.id, "type": "tag"}
        for t in list_tags(table)
        if t.snapshot.id in ids
    }
    try:
        table_uuid = str(uuid.UUID(str(table_uuid)))
    except ValueError:
        table_uuid = str(uuid.uuid4())
    return {
        "format-version": settings.format_version,
        "table-uuid": table_uuid,
        "location": external(table, table.paths.root.rstrip("/")),
        "last-sequence-number": current["sequence-number"],
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": max((f.id for s in schemas for f in s.fields), default=0),
        "schemas": [iceberg_schema(s.id, s.fields, settings.format_version) for s in schemas],
        "current-schema-id": table.schema.id,
        "partition-specs": [layout.spec],
        "default-spec-id": 0,
        "last-partition-id": last_partition_id([table.schema.field(k) for k in table.schema.partition_keys]),
        "properties": {},
        "current-snapshot-id": current["snapshot-id"],
        "snapshots": history,
        "snapshot-log": [
            {"timestamp-ms": s["timestamp-ms"], "snapshot-id": s["snapshot-id"]} for s in history
        ],
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
        "refs": {
            **dict(sorted(refs.items())),
            "main": {"snapshot-id": current["snapshot-id"], "type": "branch"},
        },
    }


def _content(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a metadata version says, but when it was written."""
    return {k: v for k, v in metadata.items() if k != "last-updated-ms"}


def _drop(
    table: TableStore, directory: str, dropped: list[dict[str, Any]], in_use: list[dict[str, Any]]
) -> None:
    """Delete the manifest lists of the ``dropped`` snapshots and the manifests only they name -
    in this metadata directory only (a copy of the table names the original's files).

    A manifest stays in the snapshots of one timeline from the one that wrote it until one that
    restated or merged it, so a dropped snapshot shares manifests with the kept ones only through
    ``in_use``: the oldest kept snapshot (of an expired prefix) and the newest kept one before a
    rollback's cut."""
    if not dropped:
        return
    keep: set[str] = set()
    for record in in_use:
        keep.update(named_files(table, internal(table, record["manifest-list"])))
    doomed: set[str] = set()
    for record in dropped:
        listed = internal(table, record["manifest-list"])
        if listed.rsplit("/", 1)[0] != directory:
            continue
        try:
            doomed.update(m for m in named_files(table, listed) if m.rsplit("/", 1)[0] == directory)
        except FileNotFoundError:
            continue  # dropped before
        doomed.add(listed)
    table.io.delete_quietly(sorted(doomed - keep))


def _retire(table: TableStore, directory: str, current: int, settings: IcebergSettings) -> None:
    """Delete the metadata versions older than the ones kept, and those of snapshots after
    ``current`` (the latest snapshot: they were rolled back). Their manifests are the snapshots':
    they go when the snapshots do."""
    oldest_kept = current - settings.previous_versions_max
    doomed = []
    for status in table.io.list_dir(directory):
        match = _VERSION.match(status.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version > current or (settings.delete_after_commit and version < oldest_kept):
            doomed.append(status.path)
    table.io.delete_quietly(doomed)


def orphan_metadata_files(table: TableStore) -> list[FileStatus]:
    """Files in the Iceberg metadata directory that no metadata version names: the manifests of a
    sync that died before writing its version (for orphan cleanup, which keeps everything else:
    the versions, the hint and what they name). Nothing when a version is unreadable."""
    settings = table.schema.core_options.iceberg
    if not settings.enabled or table.branch != MAIN_BRANCH:
        return []
    io = table.io
    directory = metadata_dir(table, settings)
    statuses = io.list_dir(directory)
    named = {VERSION_HINT}
    lists: set[str] = set()
    for status in statuses:
        if _VERSION.match(status.name) is None:
            continue
        named.add(status.name)
        try:
            metadata = json.loads(io.read_bytes(status.path))
            lists.update(internal(table, s["manifest-list"]) for s in metadata.get("snapshots", []))
        except FileNotFoundError:
            continue  # retired meanwhile: what it named goes with it
        except (ValueError, KeyError, TypeError, AttributeError):
            return []  # cannot tell what a damaged version names: delete nothing
    for listed in lists:
        if listed.rsplit("/", 1)[0] != directory:
            continue
        named.add(listed.rsplit("/", 1)[-1])
        try:
            named.update(p.rsplit("/", 1)[-1] for p in named_files(table, listed))
        except FileNotFoundError:
            continue  # its snapshot was dropped meanwhile
        except (ValueError, KeyError, TypeError):
            return []
    return [st for st in statuses if st.name not in named]
