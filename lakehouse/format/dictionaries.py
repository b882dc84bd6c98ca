"""String columns carried as dictionary arrays between a read and a take of its rows.

A Parquet column of repeating strings (a status, a region, a comment of a few words) is stored
as a dictionary of its distinct values and small indexes into it. Read as Arrow dictionary
arrays, its pages decode to those indexes only, and taking rows from it (a merge's winning
versions, the rows a deletion vector leaves) moves 4-byte indexes instead of strings. Readers
that take rows read such columns so (``read_dictionary``; which columns:
:func:`lakehouse.format.parquet.repeating`) and decode them once, after the take, into the
plain type of the table's schema: one copy of each string kept instead of a copy of each string
read and a second of each kept. A read of whole files, which takes no rows, reads only the
columns of one value so (:func:`lakehouse.format.parquet.one_valued`, a partition's), which
decode by repeating the value (2.5M rows: 32 against 82 ms); Parquet decodes the others into
plain strings on Arrow's threads, column beside column. Decoding their dictionaries after the
read is faster on one core (74 against 93 ms for a column of 8 words), but runs on the caller's
thread alone: a 10M-row append table read on 2 cores in 0.33-0.36 s so, 0.31-0.33 s plain.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pyarrow as pa

# the offsets' type of each binary-like type a dictionary may hold
_OFFSETS: dict[pa.DataType, type[np.int32] | type[np.int64]] = {
    pa.string(): np.int32,
    pa.binary(): np.int32,
    pa.large_string(): np.int64,
    pa.large_binary(): np.int64,
}


def decoded(table: pa.Table, keep: Collection[str] = ()) -> pa.Table:
    """``table`` with its dictionary columns (but those named in ``keep``) decoded into their
    values' type."""
    schema = table.schema
    plain = [
        f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) and f.name not in keep else f
        for f in schema
    ]
    if plain == list(schema):
        return table
    columns = [
        _decoded(column, field.type) if field.type != old.type else column
        for column, field, old in zip(table.columns, plain, schema, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=pa.schema(plain, schema.metadata))


def _decoded(column: pa.ChunkedArray, values: pa.DataType) -> pa.ChunkedArray:
    return pa.chunked_array([_repeated(chunk) or chunk.cast(values) for chunk in column.chunks], values)


def _repeated(chunk: pa.DictionaryArray) -> pa.Array | None:
    """A chunk of one string or binary value, e.g. a partition column's in a file, decoded by
    repeating the value (Arrow's, which releases the GIL): seven times faster than a take of its
    rows (None: not such a chunk)."""
    dictionary = chunk.dictionary
    offsets = _OFFSETS.get(dictionary.type)
    if offsets is None or len(dictionary) != 1 or dictionary.null_count or chunk.null_count:
        return None
    value = dictionary[0]
    if len(chunk) * len(value.as_buffer()) > np.iinfo(offsets).max:
        return None
    return pa.repeat(value, len(chunk))


def concat(tables: list[pa.Table]) -> pa.Table:
    """``tables`` in one table. A column some of them hold as a dictionary and others plain (files
    differ in which columns repeat) is decoded in all of them."""
    if len(tables) == 1:
        return tables[0]
    first = tables[0].schema
    if all(t.schema == first for t in tables):
        return pa.concat_tables(tables)
    mixed = {f.name for t in tables for f in t.schema if f.type != first.field(f.name).type}
    keep = [name for name in first.names if name not in mixed]
    return pa.concat_tables([decoded(t, keep) for t in tables])
