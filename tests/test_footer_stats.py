"""Data file stats read from the Parquet footer equal the stats of the rows themselves, for every
atomic type and stats mode, over several row groups (with nulls, NaNs, negative decimals, long
strings that truncation rounds up, and a row group holding only NaNs)."""

from datetime import date, datetime, time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse.format.parquet import ParquetFileWriter, ParquetOptions, data_field
from lakehouse.io.fs import FileIO
from lakehouse.manifest import binary_row, stats
from lakehouse.manifest.stats import StatsMode, from_parquet, truncate_max, truncate_min
from lakehouse.predicate import ColumnStats
from lakehouse.types import STRING_ROOTS, DataField, parse_type

TYPES = [
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(5, 2)",
    "DECIMAL(18, 3)",
    "DECIMAL(30, 4)",
    "DATE",
    "TIME(3)",
    "TIMESTAMP(0)",
    "TIMESTAMP(3)",
    "TIMESTAMP(6)",
    "TIMESTAMP(9)",
    "TIMESTAMP(6) WITH LOCAL TIME ZONE",
    "STRING",
    "CHAR(3)",
    "BYTES",
    "BINARY(2)",
    {"type": "ARRAY", "element": "INT"},
]
FIELDS = [DataField(i, f"c{i}", parse_type(t)) for i, t in enumerate(TYPES)]
MODES = ["full", "counts", "none", "truncate(2)"]


def _values(dtype, group: int) -> list:
    """Three values of ``dtype`` (one null); group 1 holds larger values than group 0."""
    root, g = dtype.root, group
    scale = dtype.scale if root == "DECIMAL" else 0
    return {
        "BOOLEAN": [g == 1, False, None],
        "TINYINT": [-5 + g * 10, 3, None],
        "SMALLINT": [-300, 7 + g * 1000, None],
        "INT": [-70000, 12 + g, None],
        "BIGINT": [-(2**40) + g, 2**41, None],
        "FLOAT": [-1.5, 2.25 + g, None],
        "DOUBLE": [float("nan"), float("nan"), None] if g == 1 else [-0.0, 3.5, None],
        "DECIMAL": [Decimal(-123 - g).scaleb(-scale), Decimal(45 + g).scaleb(-scale), None],
        "DATE": [date(1969, 12, 31), date(2024, 2, 29 - g), None],
        "TIME": [time(0, 0, 1), time(23, 59, 59, 999000 - g * 1000), None],
        "TIMESTAMP": [datetime(1960, 1, 1, 0, 0, g), datetime(2024, 1, 2, 3, 4, 5), None],
        "TIMESTAMP_LTZ": [datetime(1999, 1, 1), datetime(2030, 1, 1, 0, 0, g), None],
        "CHAR": ["abc", "ab" + "\U0010ffff" * g, None],
        "VARCHAR": ["\U0010ffff\U0010ffff", "zz" * (g + 1), None],
        "BINARY": [b"\x00\x01", b"\xff\xff" + bytes(g), None],
        "VARBINARY": [b"\x7f", b"\xff" * (3 + g), None],
        "ARRAY": [[1], None, [2, 3]],
    }[root]


def _table(group: int) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(_values(f.type, group), data_field(f).type) for f in FIELDS],
        schema=pa.schema([data_field(f) for f in FIELDS]),
    )


def _row_stats(column: pa.ChunkedArray, dtype, mode: StatsMode) -> ColumnStats:
    """The stats of the rows themselves: what a file's stats must say."""
    rows = len(column)
    if not stats.has_stats(dtype, mode):
        return ColumnStats(None, None, None, rows)
    nulls = column.null_count
    if mode.kind == "counts" or nulls == rows:
        return ColumnStats(None, None, nulls, rows)
    physical = binary_row.physical_array(column, dtype)
    if dtype.root in ("FLOAT", "DOUBLE"):
        physical = physical.filter(pc.invert(pc.is_nan(physical)))
    lo, hi = (v.as_py() for v in pc.min_max(physical).values())
    if lo is None:
        return ColumnStats(None, None, nulls, rows)
    if mode.kind == "truncate" and dtype.root in STRING_ROOTS + ("BINARY", "VARBINARY"):
        lo, hi = truncate_min(lo, mode.length), truncate_max(hi, mode.length)
        if hi is None:
            return ColumnStats(None, None, nulls, rows)
    return ColumnStats(lo, hi, nulls, rows)


@pytest.mark.parametrize("groups", [[0], [1], [0, 1], [1, 0]])
@pytest.mark.parametrize("mode", MODES)
def test_footer_stats_are_the_stats_of_the_rows(tmp_path, groups, mode):
    io, root = FileIO.for_uri(str(tmp_path))
    writer = ParquetFileWriter(io, f"{root}/data.parquet", _table(0).schema, ParquetOptions())
    for g in groups:
        writer.write(_table(g))  # one row group each
    writer.close()
    assert writer.metadata.num_row_groups == len(groups)
    rows = pa.concat_tables([_table(g) for g in groups])
    modes = [StatsMode.parse(mode)] * len(FIELDS)
    got = from_parquet(writer.metadata, FIELDS, modes)
    want = [_row_stats(rows.column(f.name), f.type, m) for f, m in zip(FIELDS, modes, strict=True)]
    for f, a, b in zip(FIELDS, got, want, strict=True):
        assert a == b, (f.type, a, b)


def test_footer_stats_encode_to_the_same_simple_stats(tmp_path):
    """The bounds also encode to the same BinaryRows (types and scales of the Python values)."""
    io, root = FileIO.for_uri(str(tmp_path))
    writer = ParquetFileWriter(io, f"{root}/data.parquet", _table(0).schema, ParquetOptions())
    writer.write(_table(0))
    writer.close()
    modes = [StatsMode.parse("full")] * len(FIELDS)
    rows = _table(0)
    got = from_parquet(writer.metadata, FIELDS, modes)
    want = [_row_stats(rows.column(f.name), f.type, m) for f, m in zip(FIELDS, modes, strict=True)]
    assert stats.to_dense_stats(FIELDS, modes, [got]) == stats.to_dense_stats(FIELDS, modes, [want])


def test_values_too_long_for_footer_bounds_leave_only_the_null_count(tmp_path):
    """The writer keeps no bounds over 4 KiB (as Parquet writers do): the file says unknown."""
    io, root = FileIO.for_uri(str(tmp_path))
    field = DataField(0, "s", parse_type("STRING"))
    table = pa.table({"s": ["a" * 5000, "b", None]}, schema=pa.schema([data_field(field)]))
    writer = ParquetFileWriter(io, f"{root}/data.parquet", table.schema, ParquetOptions())
    writer.write(table)
    writer.close()
    for mode in ("full", "truncate(16)"):
        got = from_parquet(writer.metadata, [field], [StatsMode.parse(mode)])
        assert got == [ColumnStats(None, None, 1, 3)]
