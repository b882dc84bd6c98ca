"""HASH index files: the key hashes of one dynamic bucket, as Paimon's ``HashIndexFile`` stores them.

A file is the plain concatenation of big-endian int32 ``BinaryRow.hashCode`` values of the trimmed
primary keys in a (partition, bucket), in no particular order, under ``<table>/index/index-<uuid>-<n>``
(or the file's external path). Its ``IndexFileMeta`` has type ``HASH`` and ``row_count`` = number of
ints. Writers of ``bucket = -1`` tables rebuild a bucket's key-to-bucket index from these files.
"""

from __future__ import annotations

import numpy as np

from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import FileIO
from lakehouse.manifest.entries import IndexFileMeta
from lakehouse.paths import FileNamer, TablePaths

HASH_INDEX = "HASH"
_INT = np.dtype(">i4")


def encode(hashes: np.ndarray) -> bytes:
    """The file bytes of ``hashes`` (int32, written in the given order)."""
    return np.asarray(hashes, dtype=np.int32).astype(_INT, copy=False).tobytes()


def decode(data: bytes, path: str) -> np.ndarray:
    """The int32 hashes in a file's bytes; ``path`` names the file in errors."""
    if len(data) % 4:
        raise CorruptFileError(
            f"HASH index file {path} has {len(data)} bytes, not a whole number of 4-byte key hashes "
            f"(truncated?); restore the file or roll the table back to an earlier snapshot"
        )
    return np.frombuffer(data, dtype=_INT).astype(np.int32)


def write(io: FileIO, paths: TablePaths, names: FileNamer, hashes: np.ndarray) -> IndexFileMeta:
    """Write one HASH file into the table's index directory and describe it for the index manifest."""
    data = encode(hashes)
    name = names.next()
    io.publish(paths.index_file(name), data)
    return IndexFileMeta(HASH_INDEX, name, len(data), len(data) // 4)


def read(io: FileIO, paths: TablePaths, meta: IndexFileMeta) -> np.ndarray:
    """The hashes of a HASH file listed in the index manifest (int32, in file order)."""
    if meta.index_type != HASH_INDEX:
        raise ValueError(f"index file {meta.file_name} is a {meta.index_type} index, not {HASH_INDEX}")
    path = paths.index_file(meta.file_name, meta.external_path)
    try:
        data = io.read_bytes(path)
    except FileNotFoundError:
        raise CorruptFileError(
            f"HASH index file {path} is missing; the snapshot referencing it cannot assign dynamic "
            f"buckets - restore the file or roll the table back to an earlier snapshot"
        ) from None
    hashes = decode(data, path)
    if len(hashes) != meta.row_count:
        raise CorruptFileError(
            f"HASH index file {path} holds {len(hashes)} key hashes but the index manifest records "
            f"{meta.row_count}; restore the file or roll the table back to an earlier snapshot"
        )
    return hashes
