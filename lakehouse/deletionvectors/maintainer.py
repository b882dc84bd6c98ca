"""The deletion vectors of one bucket while a writer or a compaction changes them.

Like Java's ``BucketedDvMaintainer``: a bucket starts from the vectors its live index file holds
in the snapshot the writer restored; compaction marks superseded rows of older files, and drops
the vectors of the files it rewrote. When anything changed, the whole map is written as one new
index file, which replaces the bucket's previous one on commit.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from lakehouse.deletionvectors.index_file import DELETION_VECTORS, read_all_vectors, write_index_file
from lakehouse.deletionvectors.vector import DeletionVector
from lakehouse.io.fs import FileIO
from lakehouse.manifest.entries import IndexFileMeta
from lakehouse.paths import FileNamer, TablePaths


class BucketDeletionVectors:
    """Data file name -> deletion vector for one (partition, bucket)."""

    def __init__(self, vectors: dict[str, DeletionVector], bitmap64: bool) -> None:
        self.vectors = vectors
        self.bitmap64 = bitmap64
        self.changed = False

    @classmethod
    def load(
        cls, io: FileIO, paths: TablePaths, index_file: IndexFileMeta | None, bitmap64: bool
    ) -> BucketDeletionVectors:
        """The vectors of a bucket's live index file (none if the bucket has no file)."""
        if index_file is None:
            return cls({}, bitmap64)
        if index_file.index_type != DELETION_VECTORS:
            raise ValueError(
                f"index file {index_file.file_name} holds {index_file.index_type}, not deletion vectors"
            )
        path = paths.index_file(index_file.file_name, index_file.external_path)
        return cls(read_all_vectors(io, path, index_file), bitmap64)

    def get(self, data_file: str) -> DeletionVector | None:
        return self.vectors.get(data_file)

    def delete_rows(self, data_file: str, positions: np.ndarray) -> None:
        """Mark rows of ``data_file`` deleted (a newer version of their key was written)."""
        if not len(positions):
            return
        old = self.vectors.get(data_file)
        new = DeletionVector.from_positions(positions, self.bitmap64 if old is None else old.bitmap64)
        self.vectors[data_file] = new if old is None else old.merge(new)
        self.changed = True

    def forget(self, data_files: Iterable[str]) -> None:
        """Drop the vectors of files that no longer exist (rewritten by compaction)."""
        for name in data_files:
            if self.vectors.pop(name, None) is not None:
                self.changed = True

    def write(self, io: FileIO, paths: TablePaths, names: FileNamer) -> IndexFileMeta:
        """A new index file holding every vector of the bucket (a 1-byte file when none is left)."""
        return write_index_file(io, paths, names, self.vectors)
