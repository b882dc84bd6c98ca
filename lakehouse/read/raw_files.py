"""The data files of a split that needs no key merge, described for readers of other engines.

Paimon's ``DataSplit.convertToRawFiles``: a split whose rows are its files' rows (append tables,
deletion-vector and first-row tables, buckets of one file above level 0) can be read by any Parquet
reader, file by file, given where each file is, the schema version it was written with (its columns
by field id), the rows its deletion vector deletes and the retractions a primary-key file holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lakehouse.deletionvectors.index_file import DeletionFile
from lakehouse.format.parquet import VALUE_KIND
from lakehouse.read.scan import Split
from lakehouse.rowkind import RETRACT_KINDS
from lakehouse.store.data_reader import file_format

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class RawFile:
    """One data file read as it is (Paimon's ``RawFile``).

    ``uri``: where other readers find it (``file://``, ``s3://``; None for files at external
    paths or on stores without such URIs); ``format``: ``parquet`` or what a newer Paimon wrote;
    ``schema_id``: the schema version whose field names and ids its columns carry;
    ``retracted_kinds``: the values of its ``_VALUE_KIND`` column whose rows a read drops
    (``-U``, ``-D`` of a primary-key file that holds some; empty when it holds none);
    ``deletion``: its deletion vector, whose rows a read drops too
    (:meth:`~lakehouse.read.table_read.TableRead.deleted_rows`)."""

    KIND_COLUMN: ClassVar[str] = VALUE_KIND  # the system column holding each row's kind

    name: str
    uri: str | None
    format: str
    schema_id: int
    row_count: int
    size: int
    retracted_kinds: tuple[int, ...]
    deletion: DeletionFile | None


def raw_files(table: TableStore, split: Split) -> list[RawFile] | None:
    """The files of ``split`` as :class:`RawFile`s, None when its files must be merged by key."""
    if not split.raw_convertible:
        return None
    keyed = bool(table.schema.primary_keys)
    out = []
    for i, meta in enumerate(split.files):
        path = table.paths.data_file(split.bucket_path, meta.file_name, meta.external_path)
        retracts = keyed and meta.delete_row_count != 0
        out.append(
            RawFile(
                meta.file_name,
                table.io.uri(path) if meta.external_path is None else None,
                file_format(path),
                meta.schema_id,
                meta.row_count,
                meta.file_size,
                RETRACT_KINDS if retracts else (),
                split.deletions[i] if split.deletions else None,
            )
        )
    return out


def deleted_rows(table: TableStore, file: RawFile) -> np.ndarray:
    """The positions (int64, ascending) of the rows ``file``'s deletion vector deletes."""
    if file.deletion is None:
        return np.empty(0, np.int64)
    return np.asarray(file.deletion.read(table.io).positions(), np.int64)
