"""Keeping the base manifest list short: merging small manifests at commit time.

Mirrors ``ManifestFileMerger``: when small manifests (or manifests with DELETE entries) add up
to ``manifest.full-compaction-threshold-size``, rewrite them with every cancelled ADD/DELETE
pair dropped (full compaction); otherwise merge consecutive manifests in batches reaching
``manifest.target-file-size``, and a trailing batch once it has ``manifest.merge-min-count``
files. Planning then reads a handful of manifests however many commits a table has seen.
"""

from __future__ import annotations

from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import FileKind, ManifestFileMeta, merge_entries
from lakehouse.manifest.files import ManifestStore
from lakehouse.options import CoreOptions


def merge_manifests(
    store: ManifestStore, manifests: list[ManifestFileMeta], options: CoreOptions, schema_id: int
) -> list[ManifestFileMeta]:
    """The manifests to list as the next base: ``manifests`` merged where worthwhile."""
    target = options.memory("manifest.target-file-size")
    full = _try_full_compaction(
        store, manifests, target, options.memory("manifest.full-compaction-threshold-size"), schema_id
    )
    if full is not None:
        return full
    return _minor(store, manifests, target, options.get_int("manifest.merge-min-count"), schema_id)


def _try_full_compaction(
    store: ManifestStore, manifests: list[ManifestFileMeta], target: int, threshold: int, schema_id: int
) -> list[ManifestFileMeta] | None:
    def must_change(m: ManifestFileMeta) -> bool:
        return m.num_deleted_files > 0 or m.file_size < target

    if sum(m.file_size for m in manifests if must_change(m)) < threshold:
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
    if len(to_merge) <= 1:
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
