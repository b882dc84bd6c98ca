"""Deletion-vector index files: one version byte, then serialized deletion vectors back to back.

The index manifest locates each data file's vector with a :class:`DeletionVectorMeta` range. Java
records ranges differently per width, and readers compare them against the vector's own length
prefix: a 32-bit range's ``length`` is the prefix's value (magic + bitmap, without the 4-byte
prefix and the 4-byte CRC), a 64-bit range's ``length`` counts every byte of the vector.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakehouse.deletionvectors.vector import DeletionVector
from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import FileIO
from lakehouse.manifest.entries import DeletionVectorMeta, IndexFileMeta, IndexManifestEntry
from lakehouse.paths import FileNamer, TablePaths

DELETION_VECTORS = "DELETION_VECTORS"  # IndexFileMeta.index_type
VERSION = 1
_FRAME = 8  # the length prefix and the CRC around a vector's magic + bitmap


def encode(vectors: Mapping[str, DeletionVector]) -> tuple[bytes, tuple[DeletionVectorMeta, ...]]:
    """The bytes of an index file holding ``vectors`` (data file name -> vector) in mapping order,
    and each vector's range in it."""
    parts, ranges, offset = [bytes([VERSION])], [], 1
    for data_file, vector in vectors.items():
        data = vector.serialize()
        length = _range_length(vector, len(data))
        ranges.append(DeletionVectorMeta(data_file, offset, length, vector.cardinality))
        parts.append(data)
        offset += len(data)
    return b"".join(parts), tuple(ranges)


def write_index_file(
    io: FileIO, paths: TablePaths, names: FileNamer, vectors: Mapping[str, DeletionVector]
) -> IndexFileMeta:
    """Write ``vectors`` to a new file ``<table>/index/<names.next()>`` and describe it.

    Like Java's ``writeSingleFile``, an empty mapping still writes a file (just the version byte):
    committing it for a bucket replaces the bucket's previous deletion vectors with none.
    """
    data, ranges = encode(vectors)
    name = names.next()
    io.publish(paths.index_file(name), data)
    return IndexFileMeta(DELETION_VECTORS, name, len(data), len(ranges), dv_ranges=ranges)


def deletion_files(paths: TablePaths, entries: Iterable[IndexManifestEntry]) -> dict[str, DeletionFile]:
    """Data file name -> where its deletion vector is, over the deletion-vectors index files listed."""
    out = {}
    for e in entries:
        meta = e.index_file
        if meta.index_type == DELETION_VECTORS:
            path = paths.index_file(meta.file_name, meta.external_path)
            out.update({r.data_file: DeletionFile(path, r) for r in meta.dv_ranges or ()})
    return out


@dataclass(frozen=True)
class DeletionFile:
    """Where a data file's deletion vector is: an index file and the range in it (Java's ``DeletionFile``)."""

    path: str
    range: DeletionVectorMeta

    def read(self, io: FileIO) -> DeletionVector:
        return read_vector(io, self.path, self.range)


def read_vector(io: FileIO, path: str, meta: DeletionVectorMeta) -> DeletionVector:
    """One data file's vector, fetched with ranged reads of the index file at ``path``."""
    try:
        with io.open_ranges(path) as read:
            _check_version(read(0, 1), path)
            _check_range(meta, path)
            # A 64-bit range covers the whole vector, a 32-bit one all but its 8 frame bytes.
            return _decode(read(meta.offset, meta.length + _FRAME), path, meta)
    except FileNotFoundError:
        raise _missing(path) from None


def read_all_vectors(io: FileIO, path: str, index_file: IndexFileMeta) -> dict[str, DeletionVector]:
    """Every vector of the index file at ``path`` described by ``index_file``, keyed by data file."""
    try:
        data = io.read_bytes(path)
    except FileNotFoundError:
        raise _missing(path) from None
    if len(data) != index_file.file_size:
        raise CorruptFileError(
            f"deletion-vector index file {path} has {len(data)} bytes, the index manifest says "
            f"{index_file.file_size}; restore it from a backup or roll the table back to an earlier snapshot"
        )
    _check_version(data[:1], path)
    ranges = index_file.dv_ranges or ()
    for m in ranges:
        _check_range(m, path)
    return {m.data_file: _decode(data[m.offset : m.offset + m.length + _FRAME], path, m) for m in ranges}


def _range_length(vector: DeletionVector, serialized_size: int) -> int:
    """The ``length`` Java records for a vector of ``serialized_size`` bytes."""
    return serialized_size if vector.bitmap64 else serialized_size - _FRAME


def _decode(data: bytes, path: str, meta: DeletionVectorMeta) -> DeletionVector:
    """The vector at the start of ``data``, checked against its range in the index manifest."""
    size = struct.unpack_from(">I", data)[0] + _FRAME if len(data) >= 4 else len(data)
    vector = DeletionVector.deserialize(data[:size], path, meta.offset)
    if _range_length(vector, size) != meta.length:
        raise CorruptFileError(
            f"deletion vector of {meta.data_file} at offset {meta.offset} of {path} is "
            f"{size} bytes, which does not match the length {meta.length} in the index manifest; "
            f"the index manifest and the index file disagree - roll the table back to an earlier snapshot"
        )
    return vector


def _check_range(meta: DeletionVectorMeta, path: str) -> None:
    """A range must start after the version byte and have a length (the bytes are checked as read)."""
    if meta.offset < 1 or meta.length < 0:
        raise CorruptFileError(
            f"the index manifest places the deletion vector of {meta.data_file} at offset {meta.offset}, "
            f"length {meta.length} of {path}, which is no range of it; the index manifest is damaged - "
            f"roll the table back to an earlier snapshot"
        )


def _check_version(head: bytes, path: str) -> None:
    if head != bytes([VERSION]):
        found = head[0] if head else "nothing"
        raise CorruptFileError(
            f"deletion-vector index file {path} starts with version {found}, expected {VERSION}: it is "
            f"damaged or was written by a newer Paimon; restore it or upgrade this reader"
        )


def _missing(path: str) -> CorruptFileError:
    return CorruptFileError(
        f"deletion-vector index file {path} is missing; the snapshot referencing it cannot be read - "
        f"roll the table back to an earlier snapshot"
    )
