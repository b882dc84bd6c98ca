"""Keeping the base manifest list short: merging small manifests at commit time.

Mirrors ``ManifestFileMerger``: when small manifests (or manifests with DELETE entries) add up
to ``manifest.full-compaction-threshold-size``, rewrite them with every cancelled ADD/DELETE
pair dropped (full compaction); otherwise merge consecutive manifests in batches reaching
``manifest.target-file-size``, and a trailing batch once it has ``manifest.merge-min-count``
files (a batch that only adds files by copying its manifests' encoded blocks, so a merge costs
bytes, not entries). Planning then reads a handful of manifests however many commits a table
has seen.

Readers cancel every ADD whose identifier a DELETE names (as Paimon's and pypaimon's do), so the
manifests of a snapshot may hold at most one ADD per identifier. A metadata-only change can
bring back an identifier that was added and deleted before (an index rewrite back to earlier
index bytes, or to none): then the base is fully compacted, which drops that old pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import FileKind, ManifestEntry, ManifestFileMeta, merge_entries
from lakehouse.manifest.files import ManifestStore
from lakehouse.options import (
    MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
    CoreOptions,
)


def merge_manifests(
    store: ManifestStore,
    manifests: list[ManifestFileMeta],
    options: CoreOptions,
    schema_id: int,
    committing: Sequence[ManifestEntry] = (),
) -> list[ManifestFileMeta]:
    """The manifests to list as the next base: ``manifests`` merged where worthwhile, and with no
    pair that added and deleted an identifier ``committing`` adds again."""
    target = options.memory(MANIFEST_TARGET_FILE_SIZE)
    threshold = options.memory(MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE)
    force = _readds(store, manifests, committing)
    full = _try_full_compaction(store, manifests, target, threshold, schema_id, force)
    if full is not None:
        return full
    return _minor(store, manifests, target, options.get_int(MANIFEST_MERGE_MIN_COUNT), schema_id)


def full_compaction_options(options: CoreOptions) -> CoreOptions:
    """``options`` with every small manifest merged and every cancelled pair dropped: the merge of
    a dedicated manifest compaction (``FileStoreCommitImpl.manifestCompactionOptions``)."""
    return CoreOptions(
        {**options.raw, MANIFEST_MERGE_MIN_COUNT: "1", MANIFEST_FULL_COMPACTION_THRESHOLD_SIZE: "1 b"}
    )


def _readds(
    store: ManifestStore, manifests: list[ManifestFileMeta], committing: Sequence[ManifestEntry]
) -> bool:
    """Whether ``committing`` adds an identifier that a DELETE in ``manifests`` names. Only a file
    whose metadata changes (deleted and added in one commit) can come back."""
    changed = {e.file.file_name for e in committing if e.kind == FileKind.DELETE}
    again = {e.identifier for e in committing if e.kind == FileKind.ADD and e.file.file_name in changed}
    return bool(again) and any(
        e.kind == FileKind.DELETE and e.identifier in again
        for m in manifests
        if m.num_deleted_files > 0
        for e in store.read_manifest(m.file_name)
    )


def _try_full_compaction(
    store: ManifestStore,
    manifests: list[ManifestFileMeta],
    target: int,
    threshold: int,
    schema_id: int,
    force: bool = False,
) -> list[ManifestFileMeta] | None:
    """Rewrite the small manifests and those with deletes once they add up to ``threshold`` (or
    when ``force``), dropping every cancelled ADD/DELETE pair."""

    def must_change(m: ManifestFileMeta) -> bool:
        return m.num_deleted_files > 0 or m.file_size < target

    if not force and sum(m.file_size for m in manifests if must_change(m)) < threshold:
        return None
    deleted = {
        e.identifier
        for m in manifests
        if m.num_deleted_files > 0
        for e in store.read_manifest(m.file_name)
        if e.kind == FileKind.DELETE
    }
    deleted_partitions = {ident[0] for ident in deleted}

    def touches_deletes(m: ManifestFileMeta) -> bool:
        return bool(deleted) and _may_contain(store, m, deleted_partitions)

    kept = [m for m in manifests if not must_change(m) and not touches_deletes(m)]
    to_merge = [m for m in manifests if must_change(m) or touches_deletes(m)]
    if len(to_merge) <= 1 and not force:
        return None
    result = list(kept)
    rewrite = []
    for m in to_merge:
        entries = store.read_manifest(m.file_name)
        adds = [e for e in entries if e.kind == FileKind.ADD and e.identifier not in deleted]
        if not must_change(m) and len(adds) == len(entries):
            result.append(m)
        else:
            rewrite.extend(adds)
    return result + (store.write_manifests(rewrite, schema_id) if rewrite else [])


def _may_contain(store: ManifestStore, m: ManifestFileMeta, partitions: set[bytes]) -> bool:
    """Whether a manifest's partition range can hold any of ``partitions``."""
    types = store.partition_types
    if not types:
        return True
    lo = binary_row.decode_row(binary_row.deserialize(m.partition_stats.min_values)[1], types)
    hi = binary_row.decode_row(binary_row.deserialize(m.partition_stats.max_values)[1], types)
    for p in partitions:
        values = binary_row.decode_row(binary_row.deserialize(p)[1], types)
        if all(
            v is None or a is None or b is None or a <= v <= b for v, a, b in zip(values, lo, hi, strict=True)
        ):
            return True
    return False


def _minor(
    store: ManifestStore, manifests: list[ManifestFileMeta], target: int, min_count: int, schema_id: int
) -> list[ManifestFileMeta]:
    result: list[ManifestFileMeta] = []
    batch: list[ManifestFileMeta] = []
    size = 0

    def merge_batch() -> None:
        if len(batch) == 1:
            result.append(batch[0])
            return
        if not any(m.num_deleted_files for m in batch):  # nothing cancels: the entries as they are
            merged = store.concat_manifests(batch)
            if merged is not None:
                result.append(merged)
                return
        entries = merge_entries([e for m in batch for e in store.read_manifest(m.file_name)])
        if entries:
            result.extend(store.write_manifests(entries, schema_id))

    for m in manifests:
        batch.append(m)
        size += m.file_size
        if size >= target:
            merge_batch()
            batch, size = [], 0
    if len(batch) >= min_count:
        merge_batch()
    else:
        result.extend(batch)
    return result
