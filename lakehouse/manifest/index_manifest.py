"""The live index files of a snapshot and how a commit changes them.

A snapshot's index manifest lists, as ADD entries only, every index file in use: a HASH file per
dynamic bucket and a deletion-vectors file per bucket. Index files are never edited: a writer
that changes a bucket's index writes a new file, and committing it *replaces* the bucket's
previous file of that type (Java's ``BucketedCombiner``: entries keyed by partition, bucket and
index type; DELETEs first, then ADDs).
"""

from __future__ import annotations

from collections.abc import Iterable

from lakehouse.manifest.entries import FileKind, IndexManifestEntry

IndexKey = tuple[bytes, int, str]


def key_of(entry: IndexManifestEntry) -> IndexKey:
    return entry.partition, entry.bucket, entry.index_file.index_type


def combine(
    previous: list[IndexManifestEntry], changes: Iterable[IndexManifestEntry]
) -> list[IndexManifestEntry]:
    """The index files live after applying ``changes`` (ADD/DELETE entries) to ``previous``."""
    changes = list(changes)
    live = {key_of(e): e for e in previous}
    for e in changes:
        current = live.get(key_of(e))
        if e.kind == FileKind.DELETE and current is not None and current.index_file == e.index_file:
            del live[key_of(e)]
    for e in changes:
        if e.kind == FileKind.ADD:
            live[key_of(e)] = e
    return list(live.values())


def by_bucket(
    entries: list[IndexManifestEntry], index_type: str
) -> dict[tuple[bytes, int], IndexManifestEntry]:
    """(partition, bucket) -> that bucket's live index file of ``index_type``."""
    return {(e.partition, e.bucket): e for e in entries if e.index_file.index_type == index_type}
