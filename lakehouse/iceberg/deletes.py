"""A table's deletion vectors as Iceberg (format 3) readers apply them.

Each deletion-vectors index file of the table (its 64-bit vectors are Iceberg's own serialization)
is copied once into a Puffin file of ``deletion-vector-v1`` blobs in the metadata directory, named
after it; a snapshot whose index changed lists one delete-manifest entry per vector, one whose
index did not keeps its parent's delete manifests. (Paimon's Java writer points Iceberg at the
index files themselves, which readers that take a Puffin file whole, as pyiceberg does, reject.)
"""

from __future__ import annotations

import struct
from typing import Any

from lakehouse.deletionvectors.index_file import DELETION_VECTORS
from lakehouse.deletionvectors.vector import MAGIC_64
from lakehouse.errors import UnsupportedFeatureError
from lakehouse.iceberg.layout import Layout, external, write_manifests
from lakehouse.iceberg.manifest import DELETES, DataFile, deletion_vector_entry, partition_summaries
from lakehouse.iceberg.puffin import deletion_vectors_layout, puffin_bytes
from lakehouse.manifest.entries import IndexManifestEntry
from lakehouse.snapshot import Snapshot


def delete_manifests(
    layout: Layout, snapshot: Snapshot, parent: list[dict[str, Any]], previous: Snapshot | None
) -> list[dict[str, Any]]:
    """The manifest list records of ``snapshot``'s delete manifests: those of its ``parent``'s
    manifest list when its index is the one of ``previous`` (the Paimon snapshot before it)."""
    if previous is not None and previous.index_manifest == snapshot.index_manifest:
        return [m for m in parent if m["content"] == DELETES]
    entries, files = [], []
    for index in layout.table.index_entries(snapshot):
        if index.index_file.index_type == DELETION_VECTORS and index.index_file.dv_ranges:
            partition = layout.partitioning.values(index.partition)
            vectors = _vectors(layout, index, partition, snapshot.id)
            entries += vectors
            files += [DataFile("", partition, 0, 0)] * len(vectors)  # for the partition summaries
    return write_manifests(
        layout,
        entries,
        snapshot.id,
        lambda part: partition_summaries(files[part], layout.partitioning),
        DELETES,
    )


def _vectors(
    layout: Layout, index: IndexManifestEntry, partition: list[Any], sid: int
) -> list[dict[str, Any]]:
    """The delete-manifest entries of one index file's vectors (its Puffin copy written first,
    unless a sync did already)."""
    table, meta = layout.table, index.index_file
    ranges = meta.dv_ranges or ()
    bucket = table.bucket_path(index.partition, index.bucket)
    data_files = [external(table, table.paths.data_file(bucket, r.data_file)) for r in ranges]
    missing = [r.data_file for r in ranges if r.cardinality is None]
    if missing:
        raise UnsupportedFeatureError(
            f"table {table.name}: the deletion vectors of {missing} in index file {meta.file_name} "
            f"record no row count, which Iceberg readers check; compact those files fully"
        )
    puffin = deletion_vectors_layout(
        data_files, [r.length for r in ranges], [r.cardinality or 0 for r in ranges]
    )
    path = f"{layout.directory}/{meta.file_name}.puffin"
    if not table.io.exists(path):
        data = table.io.read_bytes(table.paths.index_file(meta.file_name, meta.external_path))
        blobs = [data[r.offset : r.offset + r.length] for r in ranges]
        for r, blob in zip(ranges, blobs, strict=True):
            if len(blob) < 8 or struct.unpack_from("<I", blob, 4)[0] != MAGIC_64:
                raise UnsupportedFeatureError(
                    f"table {table.name}: the deletion vector of {r.data_file} is a 32-bit one, which "
                    f"Iceberg readers cannot read ('deletion-vectors.bitmap64' was off when it was "
                    f"written); compact the table fully, then expire the snapshots before that compaction"
                )
        table.io.write_bytes(path, puffin_bytes(puffin, blobs))
    return [
        deletion_vector_entry(
            external(table, path),
            puffin.size,
            data_file,
            partition,
            offset,
            r.length,
            r.cardinality or 0,
            sid,
            layout.partitioning,
        )
        for data_file, offset, r in zip(data_files, puffin.offsets, ranges, strict=True)
    ]
