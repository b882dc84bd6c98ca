"""Iceberg-compatible metadata of a table (``metadata.iceberg.storage``), written after each commit
so that Iceberg readers (pyiceberg, DuckDB, Polars, Trino, Snowflake, Spark) read the table's
Parquet files in place (``IcebergCommitCallback``).

Each sync describes the latest snapshot ``N`` as one Iceberg snapshot of the same id: manifests
of the files Iceberg readers may see, a manifest list, ``v<N>.metadata.json`` and then
``version-hint.text`` naming it - a reader following the hint finds only complete metadata.
Every data file of an append table is visible; of a primary-key table only the files of the top
level, the data as of its last full compaction (Paimon's rule: level-0 files are not merged rows).

The metadata goes to ``<table>/metadata`` (``table-location``) or to a Hadoop catalog under the
warehouse, ``<warehouse>/iceberg/<db>/<table>/metadata`` (``catalog-location``, the default of
``hadoop-catalog``). Older metadata versions and their manifests are deleted after each sync (but
``metadata.iceberg.previous-versions-max`` of them), and so are versions of snapshots a rollback
removed. A sync is idempotent: a crash between a commit and its sync is caught up by the next
commit's sync, or by :func:`sync_iceberg` itself.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.errors import UnsupportedFeatureError
from lakehouse.format.iceberg_schema import bound_bytes, iceberg_schema, last_partition_id, partition_spec
from lakehouse.iceberg.manifest import (
    DataFile,
    ManifestInfo,
    Partitioning,
    manifest_bytes,
    manifest_list_bytes,
    manifest_paths,
    partition_summaries,
)
from lakehouse.io.fs import FileStatus
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import ManifestEntry
from lakehouse.manifest.stats import decode
from lakehouse.options import ICEBERG_CODECS, IcebergLocation, IcebergSettings
from lakehouse.paths import MAIN_BRANCH
from lakehouse.snapshot import Snapshot

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

VERSION_HINT = "version-hint.text"
FILES_PER_MANIFEST = 10_000
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


@dataclass(frozen=True)
class IcebergSync:
    """What a sync wrote: the metadata file of snapshot ``snapshot_id`` (as readers reach it)."""

    snapshot_id: int
    metadata_file: str


def sync_iceberg(table: TableStore) -> IcebergSync | None:
    """Write the Iceberg metadata of the latest snapshot unless it is there already; None when
    the table has none to write (disabled, no snapshot, a branch)."""
    settings = table.schema.core_options.iceberg
    if not settings.enabled or table.branch != MAIN_BRANCH:
        return None
    snapshot = table.snapshots.latest()
    if snapshot is None:
        return None
    io = table.io
    directory = metadata_dir(table, settings)
    path = f"{directory}/v{snapshot.id}.metadata.json"
    identity = commit_identity(snapshot)
    if not _describes(table, path, identity):
        metadata = _build(table, snapshot, settings, directory, identity)
        io.write_bytes(path, json.dumps(metadata, indent=2).encode())
    if table.snapshots.latest_id() == snapshot.id:  # a later commit's sync names its own
        io.write_bytes(f"{directory}/{VERSION_HINT}", str(snapshot.id).encode())
        _retire(table, directory, snapshot.id, settings)
    return IcebergSync(snapshot.id, external(table, path))


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


def external(table: TableStore, path: str) -> str:
    """A path as other readers reach it: ``s3://...`` on object stores (the store's own paths
    are bucket-relative), as it is on a local disk."""
    return path if table.io.is_local else table.io.uri(path) or path


def internal(table: TableStore, uri: str) -> str:
    """The store's path of a URI :func:`external` gave."""
    if table.io.is_local:
        return uri
    prefix = table.io.uri("")
    return uri[len(prefix) :] if prefix and uri.startswith(prefix) else uri


def commit_identity(snapshot: Snapshot) -> str:
    """What tells this snapshot from another of the same id (after a rollback)."""
    return snapshot.uuid or f"{snapshot.commit_user}:{snapshot.commit_identifier}:{snapshot.time_millis}"


def _describes(table: TableStore, path: str, identity: str) -> bool:
    """Whether ``path`` exists and describes the snapshot of ``identity``."""
    try:
        metadata = json.loads(table.io.read_bytes(path))
    except FileNotFoundError:
        return False
    except ValueError:
        return False  # torn or foreign: written again
    snapshots = metadata.get("snapshots") or [{}]
    return snapshots[-1].get("summary", {}).get("paimon-commit-identity") == identity


def _build(
    table: TableStore, snapshot: Snapshot, settings: IcebergSettings, directory: str, identity: str
) -> dict[str, Any]:
    """Write the manifests and manifest list of ``snapshot``; its table metadata."""
    manager = table.schema_manager
    schemas = [manager.schema(i) for i in manager.schema_ids()]
    current = schemas[-1]
    partition_fields = [current.field(k) for k in current.partition_keys]
    spec = partition_spec(partition_fields)
    partitioning = Partitioning(
        tuple(current.partition_keys),
        tuple(current.field(k).type for k in current.partition_keys),
        tuple(current.field(k).id for k in current.partition_keys),
    )
    files = [_data_file(table, e, partitioning) for e in visible_entries(table, snapshot)]
    codec = _AVRO_CODECS[settings.codec]
    current_json = iceberg_schema(current.id, current.fields)
    tag = uuid.uuid4().hex
    manifests = []
    for k, start in enumerate(range(0, len(files), FILES_PER_MANIFEST), 1):
        chunk = files[start : start + FILES_PER_MANIFEST]
        data = manifest_bytes(chunk, snapshot.id, partitioning, current_json, spec, codec)
        path = f"{directory}/{tag}-m{k}.avro"
        table.io.write_bytes(path, data)
        rows = sum(f.record_count for f in chunk)
        summaries = partition_summaries(chunk, partitioning)
        manifests.append(ManifestInfo(external(table, path), len(data), len(chunk), rows, summaries))
    parent = snapshot.id - 1 if snapshot.id > 1 else None
    manifest_list = f"{directory}/snap-{snapshot.id}-{tag}.avro"
    table.io.write_bytes(manifest_list, manifest_list_bytes(manifests, snapshot.id, parent, codec))
    total_rows = sum(f.record_count for f in files)
    total_bytes = sum(f.size for f in files)
    summary = {
        "operation": "append",
        "added-data-files": str(len(files)),
        "added-records": str(total_rows),
        "added-files-size": str(total_bytes),
        "total-records": str(total_rows),
        "total-data-files": str(len(files)),
        "total-files-size": str(total_bytes),
        "total-delete-files": "0",
        "total-position-deletes": "0",
        "total-equality-deletes": "0",
        **{k: v for k, v in (snapshot.properties or {}).items() if v is not None},
        "paimon-commit-identity": identity,
    }
    iceberg_snapshot: dict[str, Any] = {
        "sequence-number": snapshot.id,
        "snapshot-id": snapshot.id,
        "timestamp-ms": snapshot.time_millis,
        "summary": summary,
        "manifest-list": external(table, manifest_list),
        "schema-id": snapshot.schema_id,
    }
    if parent is not None:
        iceberg_snapshot["parent-snapshot-id"] = parent
    return {
        "format-version": settings.format_version,
        "table-uuid": _table_uuid(table),
        "location": external(table, table.paths.root.rstrip("/")),
        "last-sequence-number": snapshot.id,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": max((f.id for s in schemas for f in s.fields), default=0),
        "schemas": [iceberg_schema(s.id, s.fields) for s in schemas],
        "current-schema-id": current.id,
        "partition-specs": [spec],
        "default-spec-id": 0,
        "last-partition-id": last_partition_id(partition_fields),
        "properties": {},
        "current-snapshot-id": snapshot.id,
        "snapshots": [iceberg_snapshot],
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
        "refs": {},
    }


def visible_entries(table: TableStore, snapshot: Snapshot) -> list[ManifestEntry]:
    """The files Iceberg readers see: all of an append table's, a primary-key table's top level."""
    entries = table.live_entries(snapshot)
    if not table.schema.primary_keys:
        return entries
    top = table.schema.core_options.num_levels - 1
    return [e for e in entries if e.file.level == top]


def _data_file(table: TableStore, entry: ManifestEntry, partitioning: Partitioning) -> DataFile:
    f = entry.file
    schema = table.schema_by_id(f.schema_id)
    columns = f.stats_columns
    fields = [schema.field(c) for c in columns] if columns is not None else list(schema.fields)
    bucket = table.bucket_path(entry.partition, entry.bucket)
    path = table.paths.data_file(bucket, f.file_name, f.external_path)
    out = DataFile(
        external(table, path),
        binary_row.decode_row(binary_row.deserialize(entry.partition)[1], list(partitioning.types)),
        f.row_count,
        f.file_size,
    )
    stats = decode(f.value_stats, [x.type for x in fields], f.row_count) if fields else []
    for column, s in zip(fields, stats, strict=True):
        if s.null_count is not None:
            out.null_counts[column.id] = s.null_count
        if s.min is None or s.max is None:
            continue
        lo, hi = bound_bytes(s.min, column.type), bound_bytes(s.max, column.type)
        if lo is not None and hi is not None:
            out.lower[column.id], out.upper[column.id] = lo, hi
    return out


def _table_uuid(table: TableStore) -> str:
    """The Iceberg table's uuid: the current metadata's, a new one for the first."""
    current = current_metadata_file(table)
    if current is None:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(str(json.loads(table.io.read_bytes(current))["table-uuid"])))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return str(uuid.uuid4())


def _retire(table: TableStore, directory: str, current: int, settings: IcebergSettings) -> None:
    """Delete the metadata versions (and their manifests) older than the ones kept, and those of
    snapshots after ``current`` (the latest snapshot: they were rolled back)."""
    io = table.io
    oldest_kept = current - settings.previous_versions_max
    for status in io.list_dir(directory):
        match = _VERSION.match(status.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version > current or (settings.delete_after_commit and version < oldest_kept):
            _delete_version(table, f"{directory}/{status.name}")


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
    for status in statuses:
        if _VERSION.match(status.name) is None:
            continue
        named.add(status.name)
        try:
            named.update(p.rsplit("/", 1)[-1] for p in _named_files(table, status.path))
        except FileNotFoundError:
            continue  # retired meanwhile: what it named goes with it
        except (ValueError, KeyError, TypeError):
            return []  # cannot tell what a damaged version names: delete nothing
    return [st for st in statuses if st.name not in named]


def _delete_version(table: TableStore, path: str) -> None:
    """Delete a metadata version and the manifests it names - only those in its own directory:
    the paths are absolute, and a copy of the table (a backup) names the original's files."""
    directory = path.rsplit("/", 1)[0]
    try:
        files = [p for p in _named_files(table, path) if p.rsplit("/", 1)[0] == directory]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        files = []  # what it named stays for orphan cleanup
    table.io.delete_quietly(files)
    table.io.delete_quietly([path])


def _named_files(table: TableStore, path: str) -> list[str]:
    """The manifest lists of the metadata version ``path`` and the manifests they name (the
    store's paths, in any directory; those of a list outside the version's are not read)."""
    io = table.io
    directory = path.rsplit("/", 1)[0]
    metadata = json.loads(io.read_bytes(path))
    lists = [internal(table, s["manifest-list"]) for s in metadata.get("snapshots", [])]
    own = [p for p in lists if p.rsplit("/", 1)[0] == directory]
    return lists + [internal(table, m) for listed in own for m in manifest_paths(io.read_bytes(listed))]
