"""Data files of one bucket: rolling Parquet writers and the manifest metadata of what they wrote.

A :class:`BucketWriter` appends Arrow rows to ``data-<write id>-<writer>-<n>.parquet`` files (see
:mod:`lakehouse.write.scope`), rolling at ``target-file-size``, and keeps per file the column
stats (from its Parquet footer), key range, sequence range and retract count its ``DataFileMeta``
needs. Stats stay as Python values until
:func:`file_metas` encodes every file's BinaryRows in one vectorized pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.fileindex.build import INDEX_SUFFIX, FileIndexBuilder
from lakehouse.format import parquet
from lakehouse.io.fs import FileIO
from lakehouse.manifest import binary_row, stats
from lakehouse.manifest.entries import EMPTY_ROW, EMPTY_STATS, DataFileMeta, FileSource
from lakehouse.paths import FileNamer
from lakehouse.predicate import ColumnStats
from lakehouse.rowkind import is_retract
from lakehouse.types import DataField


@dataclass(frozen=True)
class FileLayout:
    """What every data file of a table shares: columns, stats modes, rolling size, codec."""

    io: FileIO
    schema_id: int
    file_schema: pa.Schema
    value_fields: list[DataField]
    value_modes: list[stats.StatsMode]
    key_fields: list[DataField]
    target_size: int
    parquet: parquet.ParquetOptions
    prefix: str
    indexes: FileIndexBuilder | None = None
    index_threshold: int = 500  # file-index.in-manifest-threshold
    key_mode: stats.StatsMode = field(default_factory=lambda: stats.StatsMode.parse(stats.KEY_STATS_MODE))
    names: FileNamer = field(default_factory=lambda: FileNamer(""))  # the writer's, in its write scope

    def file_rows(self, run: pa.Table) -> pa.Table:
        """A merged run (key and value columns, sequence number, kind) in this file layout:
        ``_KEY_`` copies of the key (unless thin mode), system columns, then the values."""
        arrays = []
        for f in self.file_schema:
            name = f.name[len(parquet.KEY_PREFIX) :] if f.name.startswith(parquet.KEY_PREFIX) else f.name
            arrays.append(run.column(name))
        return pa.Table.from_arrays(arrays, schema=self.file_schema)


@dataclass
class WrittenFile:
    """A finished data file with its metadata still as Python values."""

    name: str
    size: int
    rows: int
    values: list[ColumnStats]
    keys: list[ColumnStats]
    first_key: list | None
    last_key: list | None
    min_seq: int
    max_seq: int
    deletes: int
    creation_time: int
    embedded_index: bytes | None = None
    extra_files: tuple[str, ...] = ()
    level: int = 0
    source: FileSource = FileSource.APPEND


def creation_time_millis() -> int:
    """Now as local wall-clock millis, the way Paimon stores ``_CREATION_TIME``."""
    return (datetime.now() - datetime(1970, 1, 1)) // timedelta(milliseconds=1)


class BucketWriter:
    """Rolling Parquet files of one (partition, bucket).

    A file rolls once it has reached the target size, checked before more rows go into it.
    """

    def __init__(
        self,
        layout: FileLayout,
        partition: bytes,
        bucket: int,
        directory: str,
        level: int = 0,
        source: FileSource = FileSource.APPEND,
    ) -> None:
        self.layout = layout
        self.level = level
        self.source = source
        self.partition = partition
        self.bucket = bucket
        self.directory = directory
        self.names = layout.names.with_prefix(layout.prefix, ".parquet")
        self.files: list[WrittenFile] = []
        self._open: tuple[parquet.ParquetFileWriter, _Accumulator] | None = None  # the file being written

    def write(self, rows: pa.Table, sequence: pa.Array, kinds: pa.Array | None) -> None:
        """Append rows (in file layout), rolling at the target size; ``kinds`` for primary keys.
        Rows of an append table's columns get the layout's fields (their Parquet field ids)."""
        if rows.num_rows == 0:
            return
        if not rows.schema.equals(self.layout.file_schema, check_metadata=True):
            rows = self.layout.file_rows(rows)
        target = self.layout.target_size
        step = max(1024, target // max(1, rows.nbytes // rows.num_rows))
        for start in range(0, rows.num_rows, step):
            piece = rows.slice(start, step)
            if self._open is not None and self._open[0].bytes_written >= target:
                self._roll(*self._open)
            if self._open is None:
                path = f"{self.directory}/{self.names.next()}"
                file = parquet.ParquetFileWriter(self.layout.io, path, piece.schema, self.layout.parquet)
                self._open = file, _Accumulator(self.layout)
            file, acc = self._open
            file.write(piece)  # encodes in the background while we accumulate
            acc.add(piece, sequence.slice(start, step), None if kinds is None else kinds.slice(start, step))

    def _roll(self, file: parquet.ParquetFileWriter, acc: _Accumulator) -> None:
        index = acc.file_index()  # built while the last piece may still be encoding
        size = file.close()
        written = acc.finish(file.path.rsplit("/", 1)[-1], size, file.metadata)
        written.level, written.source = self.level, self.source
        if index is not None and len(index) > self.layout.index_threshold:
            name = written.name + INDEX_SUFFIX  # too big for the manifest: a file next to the data
            self.layout.io.publish(f"{self.directory}/{name}", index)
            written.extra_files = (name,)
        else:
            written.embedded_index = index
        self.files.append(written)
        self._open = None

    def close(self) -> list[WrittenFile]:
        """Finish the open file (if any) and return every file written; safe to call again."""
        if self._open is not None:
            self._roll(*self._open)
        return self.files

    def abort(self) -> None:
        """Remove every file this writer produced."""
        if self._open is not None:
            self._open[0].abort()
            self._open = None
        self.layout.io.delete_quietly(
            [f"{self.directory}/{name}" for f in self.files for name in (f.name, *f.extra_files)]
        )
        self.files = []


class _Accumulator:
    """Row count, key range, sequence range and retracts of one file, a piece at a time; its
    column stats come from the Parquet footer once the file is closed."""

    def __init__(self, layout: FileLayout) -> None:
        self.layout = layout
        self.rows = 0
        self.first_key: list | None = None
        self.last_key: list | None = None
        self.min_seq = self.max_seq = 0
        self.deletes = 0
        self._index = layout.indexes.writer() if layout.indexes else None

    def add(self, piece: pa.Table, seq: pa.Array | pa.ChunkedArray, kinds: pa.Array | None) -> None:
        layout = self.layout
        if self._index is not None:
            self._index.add(piece)
        lo, hi = (v.as_py() for v in pc.min_max(seq).values())
        self.min_seq = lo if self.rows == 0 else min(self.min_seq, lo)
        self.max_seq = hi if self.rows == 0 else max(self.max_seq, hi)
        self.rows += piece.num_rows
        if kinds is None:
            return
        # rows arrive sorted by key: the file's key range is its first and last row
        if self.first_key is None:
            self.first_key = _key_at(piece, layout.key_fields, 0)
        self.last_key = _key_at(piece, layout.key_fields, piece.num_rows - 1)
        self.deletes += int(is_retract(np.asarray(kinds)).sum())

    def file_index(self) -> bytes | None:
        """The file-index container over every row of the file (None: no index configured)."""
        if self._index is None or self.rows == 0:
            return None
        index, self._index = self._index, None
        return index.finish()

    def finish(self, name: str, size: int, footer: pq.FileMetaData) -> WrittenFile:
        """The metadata of the closed file, its column stats read from its ``footer``."""
        layout = self.layout
        keys = layout.key_fields
        return WrittenFile(
            name,
            size,
            self.rows,
            stats.from_parquet(footer, layout.value_fields, layout.value_modes),
            stats.from_parquet(footer, keys, [layout.key_mode] * len(keys)),
            self.first_key,
            self.last_key,
            self.min_seq,
            self.max_seq,
            self.deletes,
            creation_time_millis(),
        )


def _key_at(rows: pa.Table, fields: list[DataField], i: int) -> list:
    """The physical key values of row ``i``."""
    return [binary_row.physical_array(rows.column(f.name).slice(i, 1), f.type)[0].as_py() for f in fields]


def file_metas(layout: FileLayout, files: list[WrittenFile]) -> list[DataFileMeta]:
    """``DataFileMeta`` of written files; every BinaryRow of every file encoded in one pass per kind."""
    if not files:
        return []
    value_stats, stats_cols = stats.to_dense_stats(
        layout.value_fields, layout.value_modes, [f.values for f in files]
    )
    n = len(files)
    if layout.key_fields:
        types = [f.type for f in layout.key_fields]
        key_stats = stats.to_simple_stats(types, [f.keys for f in files])
        ends = [row for f in files for row in (f.first_key, f.last_key) if row is not None]
        assert len(ends) == 2 * n  # keyed rows always come with their kinds (_Accumulator.add)
        encoded = binary_row.encode_values(ends, types)
        keys = [binary_row.serialize(encoded.row(i), len(types)) for i in range(2 * n)]
    else:
        key_stats, keys = [EMPTY_STATS] * n, [EMPTY_ROW] * (2 * n)
    return [
        DataFileMeta(
            file_name=f.name,
            file_size=f.size,
            row_count=f.rows,
            min_key=keys[2 * i],
            max_key=keys[2 * i + 1],
            key_stats=key_stats[i],
            value_stats=value_stats[i],
            min_sequence_number=f.min_seq,
            max_sequence_number=f.max_seq,
            schema_id=layout.schema_id,
            level=f.level,
            creation_time=f.creation_time,
            delete_row_count=f.deletes,
            file_source=f.source,
            value_stats_cols=stats_cols,
            extra_files=f.extra_files,
            embedded_index=f.embedded_index,
        )
        for i, f in enumerate(files)
    ]
