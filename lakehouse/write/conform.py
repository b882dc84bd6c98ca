"""Make incoming Arrow data fit a table's schema, or say precisely why it does not.

Columns are matched by name and reordered; a column is cast only when no value can change
meaning (integer widening or range-checked narrowing, integer to float/decimal, string and binary
layouts, timestamp units without truncation). Everything else - strings to numbers, floats to
integers, a NOT NULL column holding nulls, missing or unknown columns - is a
``SchemaMismatchError`` naming the table and column.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import SchemaMismatchError
from lakehouse.rowkind import ROW_KIND, SHORT_STRINGS
from lakehouse.schema import TableSchema

_t = pa.types


def _category(t: pa.DataType) -> str:
    if _t.is_integer(t):
        return "integer"
    if _t.is_floating(t):
        return "floating"
    if _t.is_decimal(t):
        return "decimal"
    if _t.is_string(t) or _t.is_large_string(t) or _t.is_string_view(t):
        return "string"
    if _t.is_binary(t) or _t.is_large_binary(t) or _t.is_binary_view(t) or _t.is_fixed_size_binary(t):
        return "binary"
    if _t.is_timestamp(t):
        return "timestamp-tz" if t.tz is not None else "timestamp"
    if _t.is_date(t):
        return "date"
    if _t.is_time(t):
        return "time"
    if _t.is_list(t) or _t.is_large_list(t) or _t.is_fixed_size_list(t):
        return "list"
    if _t.is_map(t):
        return "map"
    if _t.is_struct(t):
        return "struct"
    if _t.is_boolean(t):
        return "boolean"
    if _t.is_null(t):
        return "null"
    return str(t)


_WIDENING = {("integer", "floating"), ("integer", "decimal")}


def conform(data: pa.Table, schema: TableSchema, table: str) -> tuple[pa.Table, pa.Array | None]:
    """Return ``data`` with the table's columns, order and types, and its row kinds (int8) if given."""
    target = schema.arrow_schema
    names = data.column_names
    kinds = None
    if ROW_KIND in names:
        kinds = row_kinds(data.column(ROW_KIND), table)
        names = [n for n in names if n != ROW_KIND]
    missing = [n for n in target.names if n not in names]
    extra = [n for n in names if n not in target.names]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"unknown columns {extra}")
        raise SchemaMismatchError(
            f"data written to table {table} has {' and '.join(parts)}; the table's columns are "
            f"{target.names} (add new columns with add_column first)"
        )
    columns = []
    for f in target:
        columns.append(_in_range(_cast_column(data.column(f.name), f, table), f, table))
    for f, col in zip(target, columns, strict=True):
        if not f.nullable and col.null_count:
            kind = "primary key" if f.name in schema.primary_keys else "NOT NULL"
            raise SchemaMismatchError(
                f"{kind} column {f.name!r} of table {table} received {col.null_count} null values; "
                f"fill or drop those rows"
            )
    return pa.Table.from_arrays(columns, schema=target), kinds


def conform_pieces(
    pieces: list[pa.Table], schema: TableSchema, table: str
) -> tuple[pa.Table, pa.Array | None]:
    """:func:`conform` over a writer's buffered pieces as one table. Consecutive pieces of one
    schema are conformed together; pieces whose schemas differ (a stream whose batches change
    types mid-way, separate writes of differently typed data) each fit the table or raise."""
    runs = [list(run) for _, run in itertools.groupby(pieces, key=lambda p: p.schema)]
    conformed = [conform(pa.concat_tables(run) if len(run) > 1 else run[0], schema, table) for run in runs]
    if len(conformed) == 1:
        return conformed[0]
    kinds = None
    if any(k is not None for _, k in conformed):  # pieces without row kinds are inserts
        inserts = [pa.array(np.zeros(d.num_rows, np.int8)) if k is None else k for d, k in conformed]
        kinds = pa.concat_arrays(inserts)
    return pa.concat_tables([d for d, _ in conformed]), kinds


# Paimon's DATE and TIMESTAMP range: 0000-01-01 to 9999-12-31 (in days, and in seconds)
_FIRST_DAY, _LAST_DAY = -719_528, 2_932_896
_FIRST_SECOND, _END_SECOND = -62_167_219_200, 253_402_300_800
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _in_range(col: pa.ChunkedArray, f: pa.Field, table: str) -> pa.ChunkedArray:
    """``col`` if its dates and timestamps lie in Paimon's range (years 0000 to 9999)."""
    if _t.is_date32(f.type):
        low, high, ints = _FIRST_DAY, _LAST_DAY, pa.int32()
    elif _t.is_timestamp(f.type):
        per = _PER_SECOND[f.type.unit]
        low, high, ints = _FIRST_SECOND * per, _END_SECOND * per - 1, pa.int64()
    else:
        return col
    bounds = pc.min_max(col.cast(ints))
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if lo is not None and (lo < low or hi > high):
        raise SchemaMismatchError(
            f"column {f.name!r} of table {table} received values outside Paimon's range, years 0000 to "
            f"9999; fix or drop those rows"
        )
    return col


def _cast_column(col: pa.ChunkedArray, f: pa.Field, table: str) -> pa.ChunkedArray:
    source = col.type
    if _t.is_dictionary(source):
        col = col.cast(source.value_type)
        source = source.value_type
    if source == f.type:
        return col
    src, dst = _category(source), _category(f.type)
    if not (src == dst or src == "null" or (src, dst) in _WIDENING):
        raise SchemaMismatchError(
            f"column {f.name!r} of table {table} is {f.type}; data of type {source} cannot be cast "
            f"to it without changing values - convert it explicitly first"
        )
    try:
        return col.cast(f.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(
            f"column {f.name!r} of table {table} is {f.type}; casting the data ({source}) fails: {e}"
        ) from None


def row_kinds(col: pa.ChunkedArray, table: str) -> pa.Array:
    """Row kinds as int8 0..3 from int codes or the strings +I -U +U -D."""
    arr = col.combine_chunks()
    if _t.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if _t.is_string(arr.type) or _t.is_large_string(arr.type):
        codes = pc.index_in(arr, value_set=pa.array(SHORT_STRINGS))
    elif _t.is_integer(arr.type):
        codes = arr
    else:
        raise SchemaMismatchError(
            f"{ROW_KIND} of data for table {table} has type {arr.type}; use int8 0..3 or '+I','-U','+U','-D'"
        )
    values = np.asarray(codes.fill_null(-1), dtype=np.int64)
    bad = (values < 0) | (values > 3)
    if bad.any():
        first = arr[int(np.flatnonzero(bad)[0])].as_py()
        raise SchemaMismatchError(
            f"{ROW_KIND} of data for table {table} holds {first!r} ({int(bad.sum())} bad rows); "
            f"use 0..3 or '+I','-U','+U','-D'"
        )
    return pa.array(values.astype(np.int8))
