"""Parquet data files as Paimon writes them: field ids, decimals as integers, zstd level 1.

Paimon puts each column's field id in the Parquet schema (``ParquetSchemaConverter``), with
derived ids for list elements and map keys/values (``SpecialFields``) and fixed ids for the
system columns of primary-key files. Readers match columns by name, so these ids are for other
engines' benefit. Timestamps of precision 7-9 are INT64 nanoseconds (as pypaimon writes them;
Java writes INT96 but reads both). The footer holds the Parquet schema alone, as Java's does: no
serialized Arrow schema (``ARROW:schema``), which every reader would decode on every open (80
to 90 us of the 140 us it took to open a small data file with one). Reads cast what Parquet's
types do not tell apart (seconds, stored as milliseconds) to the table's types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.errors import CorruptFileError
from lakehouse.format.dictionaries import decoded
from lakehouse.io.cores import usable_cores
from lakehouse.io.fs import FileIO
from lakehouse.io.pool import cores_stay_busy, in_job, spare_core, submit
from lakehouse.io.read_ahead import map_ahead, reading_ahead
from lakehouse.types import (
    ArrayType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
    to_arrow,
)

FIELD_ID = b"PARQUET:field_id"
STRUCTURED_ID_BASE = 2**31 // 4 - 1  # SpecialFields.STRUCTURED_TYPE_FIELD_ID_BASE
KEY_FIELD_ID_START = 2**31 // 2 - 1  # SpecialFields.KEY_FIELD_ID_START
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
KEY_PREFIX = "_KEY_"
SEQUENCE_NUMBER_ID = 2**31 - 2
VALUE_KIND_ID = 2**31 - 3
MIN_BATCH_ROWS = 1024  # the smallest batch a byte budget makes a read take


def structured_field_id(top_id: int, depth: int, key: bool = False) -> int:
    """The field id of a list element or map value (``key``: map key) ``depth`` levels (from 1)
    under top-level field ``top_id`` (``SpecialFields``): Parquet files and Iceberg schemas
    name nested fields by it."""
    offset = 1024 * top_id + depth
    return STRUCTURED_ID_BASE - offset if key else STRUCTURED_ID_BASE + offset


def _with_id(f: pa.Field, field_id: int) -> pa.Field:
    return f.with_metadata({FIELD_ID: str(field_id).encode()})


def _typed(dtype: DataType, top_id: int, depth: int) -> pa.DataType:
    """Arrow type of ``dtype`` whose nested fields carry Paimon's Parquet field ids."""
    if isinstance(dtype, ArrayType):
        element = pa.field("element", _typed(dtype.element, top_id, depth + 1), dtype.element.nullable)
        return pa.list_(_with_id(element, structured_field_id(top_id, depth + 1)))
    if isinstance(dtype, MapType | MultisetType):
        key_type = dtype.element if isinstance(dtype, MultisetType) else dtype.key
        key = pa.field("key", _typed(key_type, top_id, depth + 1), False)
        if isinstance(dtype, MultisetType):
            value = pa.field("value", pa.int32(), False)
        else:
            value = pa.field("value", _typed(dtype.value, top_id, depth + 1), dtype.value.nullable)
        return pa.map_(
            _with_id(key, structured_field_id(top_id, depth + 1, key=True)),
            _with_id(value, structured_field_id(top_id, depth + 1)),
        )
    if isinstance(dtype, RowType):
        return pa.struct([data_field(f) for f in dtype.fields])
    return to_arrow(dtype)


def data_field(f: DataField, name: str | None = None, field_id: int | None = None) -> pa.Field:
    """The Arrow field a table column is written as, with its Parquet field id."""
    fid = f.id if field_id is None else field_id
    return _with_id(pa.field(name or f.name, _typed(f.type, f.id, 0), f.type.nullable), fid)


def key_field(f: DataField) -> pa.Field:
    """``_KEY_<name>`` column of primary-key files (id shifted by KEY_FIELD_ID_START)."""
    return data_field(f, KEY_PREFIX + f.name, KEY_FIELD_ID_START + f.id)


SYSTEM_FIELDS = (
    _with_id(pa.field(SEQUENCE_NUMBER, pa.int64(), False), SEQUENCE_NUMBER_ID),
    _with_id(pa.field(VALUE_KIND, pa.int8(), False), VALUE_KIND_ID),
)


@dataclass(frozen=True)
class ParquetOptions:
    """Writer settings from ``file.compression`` and ``file.compression.zstd-level``."""

    compression: str = "zstd"
    zstd_level: int = 1

    def writer_kwargs(self, schema: pa.Schema) -> dict:
        codec = self.compression.lower()
        codec = "none" if codec in ("none", "uncompressed") else codec
        kwargs = {
            "compression": codec,
            "store_decimal_as_integer": True,
            "use_dictionary": dictionary_columns(schema),
            "store_schema": False,
        }
        if codec == "zstd":
            kwargs["compression_level"] = self.zstd_level
        return kwargs


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """Columns worth dictionary encoding: strings, binaries and the row kind.

    Numeric columns of typical tables are near-unique; trying a dictionary first and falling
    back costs time and, after the fallback, bytes (measured: -20% size and time on orders).
    """
    t = pa.types
    return [
        f.name
        for f in schema
        if t.is_string(f.type) or t.is_large_string(f.type) or t.is_binary(f.type) or f.name == VALUE_KIND
    ]


class ParquetFileWriter:
    """One Parquet file being written; visible under its name only after :meth:`close`.

    Each :meth:`write` encodes in the background (Arrow releases the GIL while encoding) while
    a core is spare (:func:`~lakehouse.io.pool.spare_core`), so the caller can prepare the
    file's stats and indexes meanwhile; at most one write is in flight and anything that needs
    its outcome waits for it.
    """

    def __init__(self, io: FileIO, path: str, schema: pa.Schema, options: ParquetOptions) -> None:
        self.path = path
        self._io = io
        self._ctx = io.open_output(path)
        self._sink = self._ctx.__enter__()
        self._footer: list[pq.FileMetaData] = []
        try:
            self._writer = pq.ParquetWriter(
                self._sink, schema, metadata_collector=self._footer, **options.writer_kwargs(schema)
            )
        except BaseException as e:
            self._ctx.__exit__(type(e), e, e.__traceback__)  # discards the file, publishes nothing
            raise
        self._inflight: Future | None = None
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self._wait()
        if spare_core():
            self._inflight = submit(self._writer.write_table, table)
        else:  # the jobs keep the cores busy: another thread would only take turns with this one
            self._writer.write_table(table)
        self.rows += table.num_rows

    def _wait(self) -> None:
        if self._inflight is not None:
            inflight, self._inflight = self._inflight, None
            inflight.result()

    @property
    def bytes_written(self) -> int:
        self._wait()
        return self._sink.tell()

    @property
    def metadata(self) -> pq.FileMetaData:
        """The footer of the closed file: row groups and the column statistics computed while encoding."""
        return self._footer[0]

    def close(self) -> int:
        """Finish the file and return its size."""
        self._wait()
        self._writer.close()
        size = self._sink.tell()
        self._ctx.__exit__(None, None, None)
        return size

    def abort(self) -> None:
        """Give up the file: nothing is left under its name."""
        with contextlib.suppress(Exception):
            self._wait()
        with contextlib.suppress(Exception):
            self._writer.close()
        self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)
        self._io.delete_quietly([self.path])


def even_step(rows: int, most: int) -> int:
    """Rows per piece that split ``rows`` into pieces of at most ``most`` rows, all of one size:
    each piece a writer writes becomes a row group, and none is to be a few rows left over
    (they read slower, and their dictionaries outweigh them)."""
    pieces = max(1, -(-rows // max(1, most)))
    return max(1, -(-rows // pieces))


def open_file(io: FileIO, path: str) -> pq.ParquetFile:
    return pq.ParquetFile(io.open_input(path))


def read_columns(io: FileIO, path: str, columns: list[str]) -> pa.Table:
    """Read the named columns (those present in the file) of a data file."""
    pf, names = _open_for(io, path, columns, takes=False)
    return decoded(pf.read(columns=names, use_threads=_arrow_threads()))


def _arrow_threads() -> bool:
    """Whether a read decodes a file's columns side by side on Arrow's threads: not while jobs
    keep every core busy for a while yet, nor on a read-ahead thread, which already works beside
    the rest of its read (both: :mod:`lakehouse.io.pool`, :mod:`lakehouse.io.read_ahead`)."""
    return not cores_stay_busy() and not reading_ahead()


def _open_for(io: FileIO, path: str, columns: list[str], takes: bool) -> tuple[pq.ParquetFile, list[str]]:
    """A data file opened to read those of ``columns`` it holds (returned too), some of them as
    dictionary arrays (:mod:`lakehouse.format.dictionaries`). A caller that ``takes`` rows before
    it decodes them gets every column that :func:`repeating` so; other callers only those of one
    value (:func:`one_valued`): Parquet decodes the rest into plain values on Arrow's threads,
    column beside column, where decoding a dictionary would come after, on the caller's thread
    (a 10M-row append table on 2 threads: 0.33-0.36 s read with dictionaries, 0.31-0.33 s so)."""
    source = io.open_input(path)
    pf = pq.ParquetFile(source)
    types = pf.schema_arrow
    names = [c for c in columns if c in set(types.names)]
    found = repeating(pf.metadata, types, names)
    if not takes:
        found = one_valued(pf.metadata, types, found)
    return (pq.ParquetFile(source, metadata=pf.metadata, read_dictionary=found) if found else pf), names


_STRINGS = (pa.string(), pa.binary())  # the plain types of columns read as dictionaries
_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
_OFFSET = 4  # bytes of a string's or binary's offset in an Arrow array
_DECIMAL_WIDTH = 16  # decimal128, Paimon's decimals (precision <= 38)


def decoded_bytes(meta: pq.FileMetaData, columns: Collection[str] | None = None) -> int:
    """What a file's rows take decoded into Arrow arrays (of its top-level ``columns``, all when
    None), estimated from its footer: memory budgets size batches and jobs by it. Fixed-width
    values take their width; a string or binary its offset and its average length (of its
    chunk's min and max), never less than its uncompressed pages. The pages alone undercount:
    a dictionary-encoded page holds each distinct value once, where the decoded array holds one
    per row (ten times the pages' size and more for a status column)."""
    return sum(group_bytes(meta, columns))


def group_bytes(meta: pq.FileMetaData, columns: Collection[str] | None = None) -> list[int]:
    """:func:`decoded_bytes` of each row group."""
    sizes = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        total = 0
        for c in range(group.num_columns):
            chunk = group.column(c)
            if columns is not None and not _of_columns(chunk.path_in_schema, columns):
                continue
            values = chunk.num_values
            kind = chunk.physical_type
            if kind == "FIXED_LEN_BYTE_ARRAY":  # Arrow holds a decimal in 16 bytes, whatever its precision
                column = meta.schema.column(c)
                width = _DECIMAL_WIDTH if column.logical_type.type == "DECIMAL" else column.length
            elif kind == "BYTE_ARRAY":
                width = _OFFSET + _average_length(chunk)
            else:
                width = _WIDTHS.get(kind, 8)
            total += max(chunk.total_uncompressed_size, values * width)
        sizes.append(total)
    return sizes


def _of_columns(path: str, columns: Collection[str]) -> bool:
    """Whether a column chunk (its dotted path) holds values of one of the top-level ``columns``:
    the path is one of them or starts with one and a dot (a name with dots may match more than
    its own: an estimate then counts a column more)."""
    if path in columns:
        return True
    dot = path.find(".")
    while dot >= 0:
        if path[:dot] in columns:
            return True
        dot = path.find(".", dot + 1)
    return False


def _average_length(chunk: pq.ColumnChunkMetaData) -> int:
    """The average length of a string or binary chunk's values: of its min and max, else of its
    uncompressed pages per value."""
    stats = chunk.statistics if chunk.is_stats_set else None
    if stats is not None and stats.has_min_max:
        return (len(stats.min) + len(stats.max) + 1) // 2
    return chunk.total_uncompressed_size // max(1, chunk.num_values)


def iter_batches(
    io: FileIO,
    path: str,
    columns: list[str],
    batch_rows: int,
    batch_bytes: int | None = None,
    rows: np.ndarray | None = None,
    dictionaries: Collection[str] = (),
) -> Iterator[pa.Table]:
    """The named columns (those present) of a data file, ``batch_rows`` rows at a time, fewer if
    ``batch_bytes`` (decoded, as :func:`decoded_bytes` estimates) holds fewer (at least
    ``MIN_BATCH_ROWS``). ``rows``: sorted row positions to keep (indexes, deletion vectors):
    only the row groups holding them are decoded, and each batch keeps only them.
    ``dictionaries``: columns the caller takes rows from before it decodes them
    (:mod:`lakehouse.format.dictionaries`): those that :func:`repeating` in this file come as
    dictionary arrays; every other column comes plain (read as a dictionary where ``rows`` are
    taken here or the caller takes rows, and decoded here: see :func:`_open_for`).
    Row groups are decoded side by side where :func:`_groups_at_once` affords it."""
    pf, names = _open_for(io, path, columns, takes=rows is not None or bool(dictionaries))
    meta = pf.metadata
    sizes = group_bytes(meta, set(names))
    if batch_bytes is not None and meta.num_rows:
        fit = batch_bytes * meta.num_rows // max(1, sum(sizes))
        batch_rows = min(batch_rows, max(MIN_BATCH_ROWS, fit))
    starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    if rows is None:
        groups = list(range(meta.num_row_groups))
    else:
        if len(rows) and rows[-1] >= meta.num_rows:
            raise CorruptFileError(
                f"data file {path} has {meta.num_rows} rows, but row {rows[-1]} of it is to be read: its "
                f"manifest entry (row count), file index or deletion vector is damaged - roll the table "
                f"back to an earlier snapshot"
            )
        groups = np.flatnonzero(np.diff(np.searchsorted(rows, starts))).tolist()  # groups holding rows
    width = _groups_at_once([sizes[g] for g in groups], batch_bytes)
    if width > 1:

        def group(g: int) -> pa.Table:
            data = pf.read_row_group(g, columns=names, use_threads=False)
            if rows is not None:
                data = data.take(_local(rows, int(starts[g]), int(starts[g + 1])))
            return decoded(data, dictionaries)

        for data in map_ahead(group, groups, width=width):
            for offset in range(0, data.num_rows, batch_rows):
                yield data.slice(offset, batch_rows)
        return
    threads = _arrow_threads()
    if rows is None:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=names, use_threads=threads):
            yield decoded(pa.Table.from_batches([batch]), dictionaries)
        return
    for g in groups:
        position = int(starts[g])
        for batch in pf.iter_batches(batch_rows, row_groups=[g], columns=names, use_threads=threads):
            end = position + batch.num_rows
            local = _local(rows, position, end)
            if len(local):
                yield decoded(pa.Table.from_batches([batch]).take(local), dictionaries)
            position = end


def _local(rows: np.ndarray, start: int, end: int) -> pa.Array:
    """Those of sorted file positions ``rows`` in ``[start, end)``, counted from ``start``."""
    return pa.array(rows[np.searchsorted(rows, start) : np.searchsorted(rows, end)] - start)


def _groups_at_once(sizes: list[int], batch_bytes: int | None) -> int:
    """How many row groups (of decoded ``sizes``) a read decodes side by side, each on a thread
    of its own: one per usable core, and one less than fit in ``batch_bytes`` (the caller holds
    one more). Parquet's own threads decode a group's columns side by side, whose work differs
    column to column: 10M rows in files of 2.5M read 1.5-1.7x faster on 2 cores so, 1.8x a group
    per core. One at a time on a thread that is one of several doing such work (a bulk job, whose
    memory was reserved for batches: :func:`~lakehouse.io.pool.in_job`; a read-ahead thread;
    jobs keeping every core busy), or without a byte budget."""
    if batch_bytes is None or len(sizes) < 2 or in_job() or not _arrow_threads():
        return 1
    return min(len(sizes), usable_cores(), batch_bytes // max(1, max(sizes)) - 1)


def one_valued(meta: pq.FileMetaData, types: pa.Schema, names: Collection[str]) -> list[str]:
    """Those of top-level columns ``names`` (of a file with footer ``meta`` and Arrow schema
    ``types``) whose statistics say every row group holds one value and no null (a partition's
    column): read as a dictionary, such a column decodes by repeating its value
    (:mod:`lakehouse.format.dictionaries`)."""
    found = []
    for name, c in _top_level_columns(meta, types, names):
        stats = [meta.row_group(g).column(c).statistics for g in range(meta.num_row_groups)]
        if all(
            s is not None and s.has_min_max and s.has_null_count and not s.null_count and s.min == s.max
            for s in stats
        ):
            found.append(name)
    return found


def repeating(meta: pq.FileMetaData, types: pa.Schema, names: Collection[str]) -> list[str]:
    """Those of columns ``names`` (of a file with footer ``meta`` and Arrow schema ``types``)
    that are top-level strings or binaries stored dictionary-encoded in every row group, in
    under half their plain size in all (a row group of a few rows, whose dictionary outweighs
    them, does not count against the file): values repeat (a dictionary holds at most about a
    third of them), so reading them as Arrow dictionaries pays. Where values are mostly
    distinct the writer fell back to plain pages (a dictionary read would hash every value to
    build one), or the dictionary is about as large as the values."""
    wanted = {f.name for f in types if f.name in names and f.type in _STRINGS}
    found = []
    for name, c in _top_level_columns(meta, types, wanted):
        chunks = [meta.row_group(g).column(c) for g in range(meta.num_row_groups)]
        if (
            chunks
            and all(chunk.has_dictionary_page for chunk in chunks)
            and sum(chunk.total_uncompressed_size for chunk in chunks) * 2
            <= sum(chunk.num_values * (_OFFSET + _average_length(chunk)) for chunk in chunks)
        ):
            found.append(name)
    return found


def _top_level_columns(
    meta: pq.FileMetaData, types: pa.Schema, names: Collection[str]
) -> list[tuple[str, int]]:
    """Each of ``names`` that is a top-level column of one Parquet column (not nested), with that
    column's index: its field's position where each field is one column, else found by path (a
    footer's column descriptions cost 2-3 us each to look up, for every file a read opens)."""
    if meta.num_columns == len(types):  # every field one column (a list of one too), in order
        return [
            (name, i)
            for i, name in enumerate(types.names)
            if name in names and not pa.types.is_nested(types.field(i).type)
        ]
    found = []
    for c in range(meta.num_columns):
        column = meta.schema.column(c)
        if column.name == column.path and column.name in names:
            found.append((column.name, c))
    return found
