"""Reading one data file: its columns under the current schema, whatever schema wrote it.

Every file is read under the schema it was written with and matched to the current columns by
field id: renamed columns keep their data, dropped ones disappear, added ones read as nulls,
widened ones are cast (``SchemaEvolutionUtil``). Missing or unreadable files are
``CorruptFileError``; files in a format this engine does not read are ``UnsupportedFeatureError``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse.deletionvectors.vector import DeletionVector
from lakehouse.errors import CorruptFileError, UnsupportedFeatureError
from lakehouse.format import parquet
from lakehouse.manifest.entries import DataFileMeta
from lakehouse.types import DataField, NewerType, arrow_field

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


def read_data_file(
    table: TableStore,
    bucket_path: str,
    meta: DataFileMeta,
    fields: list[DataField],
    system: Sequence[str] = (),
) -> pa.Table:
    """Columns ``fields`` (current schema) of one data file, evolved from the schema it was written
    with, plus the named system columns (whole: :func:`iter_data_file` reads it in batches)."""
    path, old_by_id, wanted = _locate(table, bucket_path, meta, fields, system)
    with _reading(table, path):
        raw = parquet.read_columns(table.io, path, wanted)
    return _Evolution(raw.schema, fields, old_by_id, system, f"table {table.name}: data file {path}").apply(
        raw
    )


def iter_data_file(
    table: TableStore,
    bucket_path: str,
    meta: DataFileMeta,
    fields: list[DataField],
    system: list[str],
    rows: int,
    deletion: DeletionVector | None = None,
    position: str | None = None,
    batch_bytes: int | None = None,
    kept: np.ndarray | None = None,
    dictionaries: Collection[str] = (),
) -> Iterator[pa.Table]:
    """:func:`read_data_file` in batches of ``rows`` rows, fewer if ``batch_bytes`` holds fewer
    (bounded memory for reads and compaction).

    ``deletion``: rows it marks are left out; ``position``: name of an added int64 column with
    each row's position in the file. ``kept`` (instead of both): the sorted positions of the
    only rows to read; row groups without any are not decoded. ``dictionaries``: columns that
    may come as dictionary arrays, for the caller to decode after it takes rows
    (:mod:`lakehouse.format.dictionaries`).
    """
    path, old_by_id, wanted = _locate(table, bucket_path, meta, fields, system)
    stored = {old_by_id[f.id].name for f in fields if f.name in dictionaries and f.id in old_by_id}
    deleted = None if deletion is None else deletion.deleted_mask(meta.row_count)
    start = 0
    evolution = None
    with _reading(table, path):
        for raw in parquet.iter_batches(table.io, path, wanted, rows, batch_bytes, kept, stored):
            if evolution is None:  # every batch of a file has its schema
                evolution = _Evolution(
                    raw.schema, fields, old_by_id, system, f"table {table.name}: data file {path}"
                )
            batch = evolution.apply(raw)
            n = batch.num_rows
            if position is not None:
                batch = batch.append_column(position, pa.array(np.arange(start, start + n, dtype=np.int64)))
            if deleted is not None and deleted[start : start + n].any():
                batch = batch.filter(pa.array(~deleted[start : start + n]))
            start += n
            yield batch


def decoded_bytes(table: TableStore, bucket_path: str, files: list[DataFileMeta]) -> int:
    """What decoding ``files`` whole takes, as their Parquet footers record it."""
    return sum(file_decoded_bytes(table, bucket_path, meta) for meta in files)


def file_decoded_bytes(
    table: TableStore,
    bucket_path: str,
    meta: DataFileMeta,
    fields: list[DataField] | None = None,
    system: Sequence[str] = (),
) -> int:
    """What decoding one data file takes, as its Parquet footer records it: its columns that
    hold ``fields`` of the current schema and the ``system`` columns, all when ``fields`` is None."""
    if fields is None:
        path, names = table.paths.data_file(bucket_path, meta.file_name, meta.external_path), None
        check_format(table.name, path)
    else:
        path, _, wanted = _locate(table, bucket_path, meta, fields, system)
        names = set(wanted)
    with _reading(table, path):
        return parquet.decoded_bytes(parquet.open_file(table.io, path).metadata, names)


def _locate(table: TableStore, bucket_path: str, meta: DataFileMeta, fields: list[DataField], system):
    path = table.paths.data_file(bucket_path, meta.file_name, meta.external_path)
    check_format(table.name, path)
    old_by_id = {f.id: f for f in table.schema_by_id(meta.schema_id).fields}
    wanted = [old_by_id[f.id].name for f in fields if f.id in old_by_id]
    return path, old_by_id, wanted + list(system)


def file_format(path: str) -> str:
    """A data file's format as Paimon decides it: its name's extension (``parquet``, ``orc``...),
    ``vector`` for vector files, ``""`` for none."""
    name = path.rsplit("/", 1)[-1]
    return "vector" if ".vector." in name else name.rsplit(".", 1)[-1].lower() if "." in name else ""


def check_format(table: str, path: str) -> None:
    """Refuse a data file this engine cannot read: its format is not Parquet. The file is valid;
    a newer or other Paimon wrote it."""
    fmt = file_format(path)
    if fmt != "parquet":
        kind = "vector" if fmt == "vector" else fmt.upper() or "an unknown"
        raise UnsupportedFeatureError(
            f"table {table}: data file {path} is in {kind} format; this engine reads Parquet data files "
            f"only - read the table with Apache Paimon (Java) or pypaimon"
        )


@contextmanager
def _reading(table: TableStore, path: str) -> Iterator[None]:
    """Missing or unreadable data files become ``CorruptFileError`` naming the file."""
    try:
        yield
    except FileNotFoundError:
        raise CorruptFileError(
            f"table {table.name}: data file {path} is missing; restore it or roll the table back to a "
            f"snapshot that does not reference it"
        ) from None
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(
            f"table {table.name}: data file {path} is unreadable ({e}); restore it or roll the table back "
            f"to a snapshot that does not reference it"
        ) from None


class _Evolution:
    """How the columns of a file's batches (``stored``) become ``fields`` of the current schema
    plus the ``system`` columns: planned once per file, applied to each batch."""

    def __init__(
        self,
        stored: pa.Schema,
        fields: list[DataField],
        old_by_id: dict[int, DataField],
        system: Sequence[str],
        where: str,
    ) -> None:
        position = {name: i for i, name in enumerate(stored.names)}
        self.sources: list[tuple[int | None, pa.DataType | None]] = []  # (stored column, cast to)
        out = []
        for f in fields:
            target = arrow_field(f.name, f.type)
            old = old_by_id.get(f.id)
            i = None if old is None else position.get(old.name)
            cast = None
            if i is not None:
                kept = stored.field(i).type
                if pa.types.is_dictionary(kept) and kept.value_type == target.type:
                    target = target.with_type(kept)  # read so to be decoded after a take
                elif isinstance(f.type, NewerType) and not _same_layout(kept, target.type):
                    raise UnsupportedFeatureError(
                        f"{where} stores column {f.name!r} ({f.type}) as {kept}, not as Paimon's plain "
                        f"{target.type} (e.g. a shredded VARIANT), which this engine does not read; read "
                        f"the other columns"
                    )
                cast = None if kept == target.type else target.type
            self.sources.append((i, cast))
            out.append(target)
        for name in system:
            self.sources.append((position[name], None))
            out.append(stored.field(name))
        self.schema = pa.schema(out)  # the table's fields, not the stored ones (Parquet field ids)

    def apply(self, raw: pa.Table) -> pa.Table:
        n = raw.num_rows
        arrays = [
            pa.nulls(n, field.type)
            if i is None
            else raw.column(i)
            if cast is None
            else raw.column(i).cast(cast, safe=False)
            for (i, cast), field in zip(self.sources, self.schema, strict=True)
        ]
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _same_layout(stored: pa.DataType, expected: pa.DataType) -> bool:
    """Whether ``stored`` holds ``expected``'s values as they are (field names, types; not nullability)."""
    if pa.types.is_struct(stored) and pa.types.is_struct(expected):
        return [(f.name, f.type) for f in stored] == [(f.name, f.type) for f in expected]
    if pa.types.is_fixed_size_list(expected):
        return (pa.types.is_fixed_size_list(stored) or pa.types.is_list(stored)) and (
            stored.value_type == expected.value_type
        )
    return stored == expected
