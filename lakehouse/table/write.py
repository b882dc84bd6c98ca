"""The first phase of a write: Arrow data in, data files and picklable commit messages out.

A :class:`TableWrite` can run in any process (a Spark task, a thread); it never touches table
metadata. Rows are split by partition and bucket with vectorized group ids. Append tables
stream each (partition, bucket) into rolling Parquet files. Primary-key tables buffer up to
``write-buffer-size``, then flush every bucket as one sorted, key-unique run (duplicate keys of
the buffer folded by the deduplicate engine), numbering rows with sequence numbers that continue
after the bucket's existing files (``MergeTreeWriter``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bucket.fixed import fixed_buckets
from lakehouse.errors import SchemaMismatchError, UnsupportedFeatureError
from lakehouse.format import parquet
from lakehouse.manifest import binary_row, stats
from lakehouse.manifest.entries import EMPTY_ROW, EMPTY_STATS, DataFileMeta, FileSource
from lakehouse.mergetree.merge import RETRACT_KINDS, last_per_key
from lakehouse.options import parse_memory_size
from lakehouse.paths import FileNamer, partition_path
from lakehouse.predicate import ColumnStats
from lakehouse.table.conform import INSERT, conform

if TYPE_CHECKING:
    from lakehouse.table.table import Table

_GROUP = "__group"
_POS = "__pos"
DEFAULT_WRITE_BUFFER = "256 mb"


@dataclass(frozen=True)
class CommitMessage:
    """File changes of one (partition, bucket), handed from a writer to the committer.

    ``deleted_files`` are files the writer decided to remove; the commit fails with a conflict
    if another commit removed them first.
    """

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...]
    deleted_files: tuple[DataFileMeta, ...] = ()


class TableWrite:
    """Writes data files for one table; ``prepare_commit`` returns what the committer needs."""

    def __init__(self, table: Table, *, overwrite: bool = False) -> None:
        self.table = table
        schema = table.schema
        self.schema = schema
        options = schema.core_options
        self.primary_key = list(schema.trimmed_primary_keys) if schema.primary_keys else []
        self.bucket_count = options.bucket
        if schema.primary_keys:
            _check_primary_key_support(table.name, schema)
        self.total_buckets = self.bucket_count
        self.bucket_types = [f.type for f in schema.fields_named(schema.bucket_keys)]
        self.partition_types = schema.partition_types()
        self.default_partition = options.get("partition.default-name")
        self.target_size = options.target_file_size(bool(schema.primary_keys))
        self.buffer_size = parse_memory_size(options.get("write-buffer-size") or DEFAULT_WRITE_BUFFER)
        self.parquet = parquet.ParquetOptions(
            options.get("file.compression"), options.get_int("file.compression.zstd-level")
        )
        self.value_fields = list(schema.fields)
        self.value_modes = stats.value_modes(self.value_fields, options)
        self.key_fields = schema.fields_named(self.primary_key)
        self.key_mode = stats.StatsMode.parse(stats.KEY_STATS_MODE)
        self.thin = options.get_bool("data-file.thin-mode")
        self.file_prefix = options.get("data-file.prefix")
        self.file_schema = self._file_schema()
        self.ignore_previous_files = overwrite
        self._writers: dict[tuple[bytes, int], _BucketWriter] = {}
        self._done: list[_BucketWriter] = []
        self._next_sequence: dict[tuple[bytes, int], int] | None = None
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0

    # ---- public --------------------------------------------------------------------------

    def write(self, data: pa.Table | pa.RecordBatch | pa.RecordBatchReader) -> None:
        """Write rows; for primary-key tables they are upserts (see ``_row_kind``)."""
        for batch in _batches(data):
            if batch.num_rows == 0:
                continue
            self._pending.append(batch)
            self._pending_bytes += batch.nbytes
            if self._pending_bytes >= self.buffer_size:
                self._flush()

    def prepare_commit(self) -> list:
        """Finish every file and return one commit message per (partition, bucket) written."""
        self._flush()
        self._done.extend(self._writers.values())
        self._writers.clear()
        messages: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for w in self._done:
            messages.setdefault((w.partition, w.bucket), []).extend(w.close())
        self._done = []
        return [CommitMessage(p, b, self.total_buckets, tuple(files)) for (p, b), files in messages.items()]

    def abort(self) -> None:
        """Delete every file this writer produced (nothing of it was committed)."""
        for w in [*self._done, *self._writers.values()]:
            w.abort()
        self._done, self._writers, self._pending = [], {}, []

    # ---- buffering -----------------------------------------------------------------------

    def _flush(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_bytes = [], 0
        data, kinds = conform(data, self.schema, self.table.name)
        if self.primary_key:
            self._write_sorted_runs(data, kinds)
        else:
            if kinds is not None and pc.any(pc.not_equal(kinds, INSERT)).as_py():
                raise SchemaMismatchError(
                    f"table {self.table.name} is an append table and accepts only inserts (+I); "
                    f"give it a primary key to apply updates and deletes"
                )
            self._write_appends(data)

    def _group(self, data: pa.Table) -> tuple[np.ndarray, list[bytes]]:
        """A dense (partition, bucket) group id per row, and the partitions' BinaryRows."""
        part_ids, partitions = self._partitions(data)
        if self.bucket_count > 0:
            keys = [data.column(k) for k in self.schema.bucket_keys]
            buckets = fixed_buckets(keys, self.bucket_types, self.bucket_count)
            return part_ids * self.bucket_count + buckets, partitions
        return part_ids, partitions

    def _locate(self, group: int, partitions: list[bytes]) -> tuple[bytes, int]:
        if self.bucket_count > 0:
            return partitions[group // self.bucket_count], group % self.bucket_count
        return partitions[group], 0

    def _partitions(self, data: pa.Table) -> tuple[np.ndarray, list[bytes]]:
        keys = self.schema.partition_keys
        n = data.num_rows
        if not keys:
            return np.zeros(n, dtype=np.int64), [EMPTY_ROW]
        codes = np.zeros(n, dtype=np.int64)
        for k in keys:
            encoded = pc.dictionary_encode(data.column(k).combine_chunks(), null_encoding="encode")
            codes = codes * len(encoded.dictionary) + np.asarray(encoded.indices, dtype=np.int64)
            _, codes = np.unique(codes, return_inverse=True)
        _, first, ids = np.unique(codes, return_index=True, return_inverse=True)
        take = pa.array(first)
        rows = binary_row.encode_rows([data.column(k).take(take) for k in keys], self.partition_types)
        return ids.astype(np.int64), [binary_row.serialize(rows.row(i), len(keys)) for i in range(len(rows))]

    # ---- append tables -------------------------------------------------------------------

    def _write_appends(self, data: pa.Table) -> None:
        groups, partitions = self._group(data)
        order = np.argsort(groups, kind="stable")
        sorted_groups = groups[order]
        starts = np.flatnonzero(np.diff(sorted_groups, prepend=-1))
        ends = np.append(starts[1:], len(order))
        for s, e in zip(starts, ends, strict=True):
            part, bucket = self._locate(int(sorted_groups[s]), partitions)
            rows = data.take(pa.array(order[s:e])) if len(starts) > 1 else data
            base = self._sequence_start(part, bucket)
            self._next_sequence[(part, bucket)] = base + rows.num_rows
            self._writer(part, bucket).write(rows, pa.array(np.arange(base, base + rows.num_rows)), None)

    # ---- primary-key tables --------------------------------------------------------------

    def _write_sorted_runs(self, data: pa.Table, kinds: pa.Array | None) -> None:
        n = data.num_rows
        groups, partitions = self._group(data)
        if kinds is None:
            kinds = pa.array(np.zeros(n, dtype=np.int8))
        work = data.append_column(_GROUP, pa.array(groups)).append_column(_POS, pa.array(np.arange(n)))
        work = work.append_column(parquet.VALUE_KIND, kinds)
        merged = last_per_key(work, [_GROUP, *self.primary_key], [])
        merged_groups = merged.column(_GROUP).to_numpy()
        starts = np.flatnonzero(np.diff(merged_groups, prepend=-1))
        ends = np.append(starts[1:], len(merged_groups))
        for s, e in zip(starts, ends, strict=True):
            part, bucket = self._locate(int(merged_groups[s]), partitions)
            run = merged.slice(s, e - s)
            base = self._sequence_start(part, bucket)
            seq = pc.add(run.column(_POS), base)
            self._next_sequence[(part, bucket)] = base + n
            writer = self._writer(part, bucket)
            writer.write(self._file_rows(run, seq), seq, run.column(parquet.VALUE_KIND))
            # every flush is its own sorted run: finish its files so the next flush starts new ones
            writer.close()
            self._done.append(self._writers.pop((part, bucket)))

    def _sequence_start(self, partition: bytes, bucket: int) -> int:
        """Next sequence number of a bucket: one past the largest in its existing files."""
        if self._next_sequence is None:
            self._next_sequence = {}
            if not self.ignore_previous_files:
                for e in self.table.live_entries():
                    key = (e.partition, e.bucket)
                    self._next_sequence[key] = max(
                        self._next_sequence.get(key, 0), e.file.max_sequence_number + 1
                    )
        return self._next_sequence.get((partition, bucket), 0)

    def _file_rows(self, run: pa.Table, seq: pa.ChunkedArray) -> pa.Table:
        keys = [] if self.thin else [run.column(k) for k in self.primary_key]
        values = [run.column(f.name) for f in self.value_fields]
        return pa.Table.from_arrays(
            [*keys, seq, run.column(parquet.VALUE_KIND), *values], schema=self.file_schema
        )

    def _file_schema(self) -> pa.Schema:
        fields = [parquet.data_field(f) for f in self.value_fields]
        if not self.primary_key:
            return pa.schema(fields)
        keys = [] if self.thin else [parquet.key_field(f) for f in self.key_fields]
        return pa.schema([*keys, *parquet.SYSTEM_FIELDS, *fields])

    # ---- writers -------------------------------------------------------------------------

    def _writer(self, partition: bytes, bucket: int) -> _BucketWriter:
        key = (partition, bucket)
        w = self._writers.get(key)
        if w is None:
            values = binary_row.decode_row(binary_row.deserialize(partition)[1], self.partition_types)
            path = partition_path(
                list(self.schema.partition_keys), self.partition_types, values, self.default_partition
            )
            w = _BucketWriter(self, partition, bucket, self.table.paths.bucket_dir(path, bucket))
            self._writers[key] = w
        return w


def _check_primary_key_support(table: str, schema) -> None:
    options = schema.core_options
    if options.bucket == -1:
        raise UnsupportedFeatureError(
            f"table {table} uses dynamic buckets (bucket=-1), which this engine cannot write yet; "
            f"recreate it with a fixed bucket count, e.g. options={{'bucket': '4'}}"
        )
    missing = [p for p in schema.partition_keys if p not in schema.primary_keys]
    if missing:
        raise SchemaMismatchError(
            f"table {table}: with fixed buckets the primary key must contain the partition keys {missing}"
        )
    engine = (options.get("merge-engine") or "deduplicate").lower()
    if engine != "deduplicate":
        raise UnsupportedFeatureError(f"table {table}: merge-engine {engine!r} cannot be written yet")
    if options.get("sequence.field"):
        raise UnsupportedFeatureError(f"table {table}: sequence.field cannot be written yet")


def _batches(data) -> Iterator[pa.Table]:
    if isinstance(data, pa.Table):
        yield data
    elif isinstance(data, pa.RecordBatch):
        yield pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        for batch in data:
            yield pa.Table.from_batches([batch])
    else:
        raise TypeError(
            f"write() takes a pyarrow Table, RecordBatch or RecordBatchReader, not {type(data).__name__}"
        )


def creation_time_millis() -> int:
    """Now as local wall-clock millis, the way Paimon stores ``_CREATION_TIME``."""
    return (datetime.now() - datetime(1970, 1, 1)) // timedelta(milliseconds=1)


class _BucketWriter:
    """Rolling Parquet files of one (partition, bucket), with the stats their manifests need."""

    def __init__(self, owner: TableWrite, partition: bytes, bucket: int, directory: str) -> None:
        self.owner = owner
        self.partition = partition
        self.bucket = bucket
        self.directory = directory
        self.names = FileNamer(owner.file_prefix, ".parquet")
        self.files: list[DataFileMeta] = []
        self._file: parquet.ParquetFileWriter | None = None
        self._acc: _FileAccumulator | None = None

    def write(self, rows: pa.Table, sequence: pa.Array, kinds: pa.Array | None) -> None:
        """Append rows (in file layout for primary-key tables), rolling at the target size."""
        if rows.num_rows == 0:
            return
        per_row = max(1, rows.nbytes // rows.num_rows)
        step = max(1024, self.owner.target_size // per_row)
        for start in range(0, rows.num_rows, step):
            piece = rows.slice(start, step)
            if self._file is None:
                self._open(piece)
            self._file.write(piece)
            self._acc.add(
                piece, sequence.slice(start, step), None if kinds is None else kinds.slice(start, step)
            )
            if self._file.bytes_written >= self.owner.target_size:
                self._roll()

    def _open(self, piece: pa.Table) -> None:
        path = f"{self.directory}/{self.names.next()}"
        self._file = parquet.ParquetFileWriter(self.owner.table.io, path, piece.schema, self.owner.parquet)
        self._acc = _FileAccumulator(self.owner)

    def _roll(self) -> None:
        size = self._file.close()
        name = self._file.path.rsplit("/", 1)[-1]
        self.files.append(self._acc.meta(name, size))
        self._file = self._acc = None

    def close(self) -> list[DataFileMeta]:
        """Finish the open file (if any) and return every file written; safe to call again."""
        if self._file is not None:
            self._roll()
        return self.files

    def abort(self) -> None:
        if self._file is not None:
            self._file.abort()
            self._file = None
        io = self.owner.table.io
        io.delete_quietly([f"{self.directory}/{f.file_name}" for f in self.files])
        self.files = []


class _FileAccumulator:
    """Stats, key range and sequence range of one data file, merged over its pieces."""

    def __init__(self, owner: TableWrite) -> None:
        self.owner = owner
        self.rows = 0
        self.values: list[ColumnStats | None] = [None] * len(owner.value_fields)
        self.keys: list[ColumnStats | None] = [None] * len(owner.key_fields)
        self.first_key: bytes | None = None
        self.last_key: bytes | None = None
        self.min_seq = self.max_seq = 0
        self.deletes = 0

    def add(self, piece: pa.Table, seq: pa.Array, kinds: pa.Array | None) -> None:
        o = self.owner
        lo, hi = pc.min_max(seq).values()
        self.min_seq = lo.as_py() if self.rows == 0 else min(self.min_seq, lo.as_py())
        self.max_seq = hi.as_py() if self.rows == 0 else max(self.max_seq, hi.as_py())
        self.rows += piece.num_rows
        new = stats.collect(piece, o.value_fields, o.value_modes)
        self.values = [stats.merge(a, b) for a, b in zip(self.values, new, strict=True)]
        if kinds is None:
            return
        key_cols = [piece.column(f.name) for f in o.key_fields]
        key_stats = stats.collect(piece, o.key_fields, [o.key_mode] * len(o.key_fields))
        self.keys = [stats.merge(a, b) for a, b in zip(self.keys, key_stats, strict=True)]
        types = [f.type for f in o.key_fields]
        ends = binary_row.encode_rows([c.take(pa.array([0, piece.num_rows - 1])) for c in key_cols], types)
        if self.first_key is None:
            self.first_key = binary_row.serialize(ends.row(0), len(types))
        self.last_key = binary_row.serialize(ends.row(1), len(types))
        self.deletes += pc.sum(pc.is_in(kinds, value_set=pa.array(RETRACT_KINDS, pa.int8()))).as_py() or 0

    def meta(self, name: str, size: int) -> DataFileMeta:
        o = self.owner
        value_stats, stats_cols = stats.to_dense_stats(o.value_fields, self.values)
        if o.key_fields:
            key_stats = stats.to_simple_stats([f.type for f in o.key_fields], self.keys)
            min_key, max_key = self.first_key, self.last_key
        else:
            key_stats, min_key, max_key = EMPTY_STATS, EMPTY_ROW, EMPTY_ROW
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=self.rows,
            min_key=min_key,
            max_key=max_key,
            key_stats=key_stats,
            value_stats=value_stats,
            min_sequence_number=self.min_seq,
            max_sequence_number=self.max_seq,
            schema_id=o.schema.id,
            level=0,
            creation_time=creation_time_millis(),
            delete_row_count=self.deletes,
            file_source=FileSource.APPEND,
            value_stats_cols=stats_cols,
        )
