"""Schema evolution on write (``merge`` schema mode): data may bring columns the table lacks, which
the table gets as nullable columns before the write, and may lack columns the table has, which are
written as nulls. Everything is checked before anything changes: a type the write cannot cast
(the rules of :func:`~lakehouse.write.conform.conform`), a missing NOT NULL column or a new column
of a type Paimon lacks is a ``SchemaMismatchError`` naming the column, and the table is untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakehouse import schema as schemas
from lakehouse.errors import SchemaMismatchError
from lakehouse.rowkind import ROW_KIND
from lakehouse.schema import TableSchema
from lakehouse.write.conform import conform


@dataclass(frozen=True)
class SchemaMerge:
    """What writing data of some Arrow schema into a table takes: the columns the table gains
    (``Table.add_column`` each), and its (nullable) columns the data lacks."""

    added: tuple[pa.Field, ...]
    missing: tuple[str, ...]


def plan_merge(schema: TableSchema, incoming: pa.Schema, table: str) -> SchemaMerge:
    """Check that data of ``incoming`` fits ``schema`` once its new columns are added and the
    columns it lacks are filled with nulls; changes nothing."""
    names = [n for n in incoming.names if n != ROW_KIND]
    added = tuple(incoming.field(n) for n in names if n not in schema.field_names)
    merged = schema
    for f in added:  # the same checks as Table.add_column (name, a type Paimon has)
        merged = schemas.add_column(
            merged, table, f.name, schemas.column_type(table, f.name, f.type, new=True)
        )
    missing = tuple(f.name for f in merged.fields if f.name not in names)
    required = [n for n in missing if not merged.field(n).type.nullable]
    if required:
        raise SchemaMismatchError(
            f"data written to table {table} lacks the NOT NULL columns {required}; add them to the data"
        )
    # an empty batch conformed with the write's own rules: every type the write would refuse
    conform(fill_missing(incoming.empty_table(), merged), merged, table)
    return SchemaMerge(added, missing)


def fill_missing(
    data: pa.Table | pa.RecordBatchReader, schema: TableSchema
) -> pa.Table | pa.RecordBatchReader:
    """``data`` with the columns of ``schema`` it lacks appended as nulls."""
    target = schema.arrow_schema
    lacking = [target.field(n) for n in target.names if n not in data.schema.names]
    return with_columns(data, [(f, pa.scalar(None, f.type)) for f in lacking])


def with_columns(
    data: pa.Table | pa.RecordBatchReader, columns: Sequence[tuple[pa.Field, pa.Scalar]]
) -> pa.Table | pa.RecordBatchReader:
    """``data`` with ``columns`` appended, each holding one value in every row; a reader stays a
    reader (batch by batch)."""
    if not columns:
        return data
    if isinstance(data, pa.Table):
        for f, value in columns:
            data = data.append_column(f, pa.repeat(value, data.num_rows))
        return data
    schema = pa.schema([*data.schema, *(f for f, _ in columns)])

    def batches() -> Iterator[pa.RecordBatch]:
        for b in data:
            added = [pa.repeat(value, b.num_rows) for _, value in columns]
            yield pa.RecordBatch.from_arrays([*b.columns, *added], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())
