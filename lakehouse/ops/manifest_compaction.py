"""Manifest compaction: ``table.compact_manifest()``, Paimon's ``compact_manifest`` procedure.

The latest snapshot's base and delta manifests are merged into a new base the way a commit
merges them (:mod:`lakehouse.manifest.merge`), but fully: every small manifest is rewritten and
every ADD that a DELETE cancels is dropped with it. The result is a COMPACT snapshot with an empty
delta and no data change (``FileStoreCommitImpl.compactManifest``); when the merge would list the
same manifests, nothing is committed. The old manifests go when their snapshots expire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.commit.table_commit import TableCommit

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class ManifestCompaction:
    """What a manifest compaction did."""

    snapshot_id: int | None  # the COMPACT snapshot; None when there was nothing to merge
    manifests_before: int  # data manifests of the snapshot it started from
    manifests_after: int  # data manifests of the snapshot it left as the latest


def compact_manifest(table: TableStore, commit_user: str | None = None) -> ManifestCompaction:
    """Merge the latest snapshot's data manifests fully as one COMPACT snapshot."""
    manifests = table.manifests()
    latest = table.snapshots.latest()
    if latest is None:
        return ManifestCompaction(None, 0, 0)
    before = len(manifests.data_manifests(latest))
    snapshot_id = TableCommit(table, commit_user).compact_manifests()
    if snapshot_id is None:
        return ManifestCompaction(None, before, before)
    after = len(manifests.data_manifests(table.snapshots.snapshot(snapshot_id)))
    return ManifestCompaction(snapshot_id, before, after)
