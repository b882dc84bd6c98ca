"""Where and how one sync writes a table's Iceberg metadata files: the settings every Iceberg
snapshot it describes shares, the paths other readers see, and the writing of one manifest."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.iceberg.manifest import DATA, Partitioning, list_record, manifest_bytes

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

FILES_PER_MANIFEST = 10_000


@dataclass(frozen=True)
class Layout:
    """What every Iceberg snapshot of one sync is written with."""

    table: TableStore
    directory: str
    codec: str
    partitioning: Partitioning
    version: int  # the Iceberg format version
    deletion_vectors: bool  # the table's deletion vectors go to Iceberg (format 3)
    schema_json: dict[str, Any]
    spec: dict[str, Any]
    target_size: int  # manifests under 2/3 of it are small
    compact_min: int  # small manifests that may be merged
    compact_max: int  # small manifests that are merged whatever their size


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


def write_manifest(
    layout: Layout,
    entries: list[dict[str, Any]],
    sid: int,
    summary: list[dict[str, Any]],
    content: int = DATA,
) -> dict[str, Any]:
    """Write a manifest of ``entries`` (of data files, or of deletes); its manifest list record."""
    data = manifest_bytes(
        entries, layout.partitioning, layout.schema_json, layout.spec, layout.codec, layout.version, content
    )
    path = f"{layout.directory}/{uuid.uuid4().hex}-m0.avro"
    layout.table.io.write_bytes(path, data)
    return list_record(external(layout.table, path), len(data), entries, sid, summary, content)


def write_manifests(
    layout: Layout,
    entries: list[dict[str, Any]],
    sid: int,
    summary: Callable[[slice], list[dict[str, Any]]],
    content: int = DATA,
) -> list[dict[str, Any]]:
    """Write ``entries`` as manifests of up to ``FILES_PER_MANIFEST`` each; their manifest list
    records. ``summary``: the partition summaries of the entries of a slice."""
    parts = (slice(start, start + FILES_PER_MANIFEST) for start in range(0, len(entries), FILES_PER_MANIFEST))
    return [write_manifest(layout, entries[part], sid, summary(part), content) for part in parts]
