"""Repeating string columns are read as dictionaries where rows are taken from them (merges,
deletion vectors) and decoded after: what a reader returns is the same, in the table's types."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse import col
from lakehouse.format.dictionaries import concat, decoded
from lakehouse.format.parquet import _open_for, iter_batches, one_valued, read_columns, repeating
from lakehouse.io.fs import FileIO
from tests.conftest import rows

N = 5000
WORDS = np.array(["new", "paid", "shipped", "delivered", "cancelled"])


def _file(tmp_path, table: pa.Table, **kwargs) -> tuple[FileIO, str]:
    io, root = FileIO.for_uri(str(tmp_path))
    pq.write_table(table, tmp_path / "f.parquet", **kwargs)
    return io, f"{root}/f.parquet"


def _columns() -> pa.Table:
    ids = np.arange(N)
    return pa.table(
        {
            "id": pa.array(ids),
            "status": pa.array(WORDS[ids % 5]),  # repeats
            "uuid": pa.array([f"{i:032x}" for i in ids * 7919]),  # distinct
            "raw": pa.array([w.encode() for w in WORDS[ids % 5]], pa.binary()),  # repeats
            "tags": pa.array([[w] for w in WORDS[ids % 5]]),  # nested: never
            "big": pa.array(WORDS[ids % 5]).cast(pa.large_string()),  # not the table's string type
        }
    )


def test_only_top_level_repeating_strings_and_binaries_are_read_as_dictionaries(tmp_path):
    io, path = _file(tmp_path, _columns(), dictionary_pagesize_limit=16 * 1024)
    pf = pq.ParquetFile(io.open_input(path))
    assert repeating(pf.metadata, pf.schema_arrow, pf.schema_arrow.names) == ["status", "raw"]
    assert repeating(pf.metadata, pf.schema_arrow, ["uuid", "raw"]) == ["raw"]


def test_a_row_group_of_a_few_rows_does_not_keep_a_file_from_being_read_as_dictionaries(tmp_path):
    """The file's last row group holds one row: its dictionary outweighs it, not the file's."""
    table = _columns().select(["status"]).slice(0, 4001)
    io, path = _file(tmp_path, table, row_group_size=1000)
    pf = pq.ParquetFile(io.open_input(path))
    assert pf.metadata.row_group(pf.metadata.num_row_groups - 1).num_rows == 1
    assert repeating(pf.metadata, pf.schema_arrow, ["status"]) == ["status"]


def test_a_column_stored_plain_is_not_read_as_a_dictionary(tmp_path):
    io, path = _file(tmp_path, _columns(), use_dictionary=False)
    pf = pq.ParquetFile(io.open_input(path))
    assert repeating(pf.metadata, pf.schema_arrow, ["status", "raw"]) == []


def test_a_column_whose_values_are_mostly_distinct_is_not_read_as_a_dictionary(tmp_path):
    """A dictionary as large as the values (here no page fell back): reading it as one would not pay."""
    ids = np.arange(N)
    table = pa.table({"half": pa.array([f"value-{i // 2:08d}" for i in ids])})
    io, path = _file(tmp_path, table)
    pf = pq.ParquetFile(io.open_input(path))
    assert pf.metadata.row_group(0).column(0).has_dictionary_page
    assert repeating(pf.metadata, pf.schema_arrow, ["half"]) == []


def test_requested_columns_come_as_dictionaries_where_they_repeat(tmp_path):
    io, path = _file(tmp_path, _columns(), dictionary_pagesize_limit=16 * 1024)
    names = ["id", "status", "uuid", "raw"]
    batches = list(iter_batches(io, path, names, 1000, dictionaries=["status", "uuid"]))
    assert len(batches) == 5
    types = {f.name: f.type for f in batches[0].schema}
    assert types["status"] == pa.dictionary(pa.int32(), pa.string())
    assert types["uuid"] == pa.string()  # its pages fell back to plain
    assert types["raw"] == pa.binary()  # not requested
    assert decoded(pa.concat_tables(batches)).equals(_columns().select(names))


def test_rows_kept_of_a_file_come_plain_unless_requested(tmp_path):
    table = _columns().select(["id", "status", "uuid", "raw"])
    io, path = _file(tmp_path, table, row_group_size=2000)
    kept = np.flatnonzero(np.arange(N) % 3 != 1)
    got = pa.concat_tables(iter_batches(io, path, table.column_names, 700, rows=kept))
    assert got.schema == table.schema
    assert got.equals(table.take(kept))
    asked = pa.concat_tables(iter_batches(io, path, table.column_names, 700, rows=kept, dictionaries=["raw"]))
    assert asked.schema.field("raw").type == pa.dictionary(pa.int32(), pa.binary())
    assert asked.schema.field("status").type == pa.string()
    assert decoded(asked).equals(table.take(kept))


def test_only_columns_of_one_value_per_row_group_are_one_valued(tmp_path):
    day = pa.array(["2024-01-01"] * N)
    table = _columns().select(["status"]).append_column("dt", day).append_column("day", day)
    table = table.append_column("late", pa.array(["2024-01-01"] * (N - 1) + ["2024-01-02"]))
    table = table.append_column("gap", pa.array(["2024-01-01"] * (N - 1) + [None]))
    io, path = _file(tmp_path, table, row_group_size=1000)
    pf = pq.ParquetFile(io.open_input(path))
    asked = ["status", "dt", "late", "gap"]  # "day": not asked for
    assert one_valued(pf.metadata, pf.schema_arrow, asked) == ["dt"]


def test_columns_after_nested_ones_are_found_by_their_path(tmp_path):
    """A nested column spans several Parquet columns: the columns after it are not at their
    field's position, and the nested one is never a dictionary read."""
    day = pa.array(["2024-01-01"] * N)
    point = pa.StructArray.from_arrays([pa.array(range(N)), day], ["x", "dt"])
    table = pa.table({"point": point, "tags": pa.array([["a", "b"]] * N)}).append_column("dt", day)
    table = table.append_column("status", _columns().column("status"))
    io, path = _file(tmp_path, table, row_group_size=1000)
    pf = pq.ParquetFile(io.open_input(path))
    assert pf.metadata.num_columns == 5
    assert repeating(pf.metadata, pf.schema_arrow, ["point", "tags", "dt", "status"]) == ["dt", "status"]
    assert one_valued(pf.metadata, pf.schema_arrow, ["point", "tags", "dt", "status"]) == ["dt"]
    (tmp_path / "lists").mkdir()
    io, path = _file(tmp_path / "lists", table.drop_columns(["point"]), row_group_size=1000)
    pf = pq.ParquetFile(io.open_input(path))  # a list of strings: one column, at its field's position
    assert pf.metadata.num_columns == 3
    assert one_valued(pf.metadata, pf.schema_arrow, ["tags", "dt", "status"]) == ["dt"]


def test_a_whole_file_read_decodes_plain_but_columns_of_one_value(tmp_path):
    """Read whole, a repeating column is decoded by Parquet beside the others; one read to take
    rows from comes as a dictionary; a column of one value comes as one either way."""
    table = _columns().select(["id", "status"]).append_column("dt", pa.array(["2024-01-01"] * N))
    io, path = _file(tmp_path, table)
    whole, _ = _open_for(io, path, table.column_names, takes=False)
    assert [f.name for f in whole.schema_arrow if pa.types.is_dictionary(f.type)] == ["dt"]
    taking, _ = _open_for(io, path, table.column_names, takes=True)
    assert [f.name for f in taking.schema_arrow if pa.types.is_dictionary(f.type)] == ["status", "dt"]
    assert pa.concat_tables(iter_batches(io, path, table.column_names, 1000)).equals(table)
    assert read_columns(io, path, table.column_names).equals(table)


def test_decoded_keeps_what_it_is_told_to_and_leaves_plain_tables_alone():
    plain = pa.table({"a": ["x", "y", "x"], "b": [1, 2, 3]})
    both = plain.append_column("c", pa.array(["p", "q", "p"]).dictionary_encode())
    both = both.set_column(0, "a", plain.column("a").dictionary_encode())
    assert decoded(plain) is plain
    assert decoded(both).schema == pa.schema([("a", pa.string()), ("b", pa.int64()), ("c", pa.string())])
    kept = decoded(both, keep=["c"])
    assert kept.schema.field("a").type == pa.string()
    assert pa.types.is_dictionary(kept.schema.field("c").type)
    assert decoded(kept).to_pylist() == decoded(both).to_pylist()


@pytest.mark.parametrize("kind", [pa.string(), pa.binary(), pa.large_string(), pa.large_binary()])
def test_a_dictionary_of_one_value_decodes_as_a_cast_would(kind):
    """A partition's column in a file: its value repeated, however the chunk was sliced; chunks
    of other dictionaries, nulls and empty values decode as before."""
    one = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(10, np.int32)), pa.array(["2024-01-01"]).cast(kind)
    )
    chunks = [
        one,
        one.slice(3, 4),
        one.slice(10),
        pa.DictionaryArray.from_arrays(pa.array([0, None, 0], pa.int32()), pa.array(["x"]).cast(kind)),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(3, np.int32)), pa.array([""]).cast(kind)),
        pa.DictionaryArray.from_arrays(pa.array([1, 0, 1], pa.int32()), pa.array(["a", "bc"]).cast(kind)),
    ]
    column = pa.chunked_array(chunks)
    table = pa.table({"p": column, "n": pa.array(np.arange(len(column)))})
    got = decoded(table)
    got.validate(full=True)
    assert got.schema == pa.schema([("p", kind), ("n", pa.int64())])
    assert got.equals(table.cast(got.schema))


def test_concat_decodes_a_column_only_where_tables_differ_in_it():
    a = pa.table(
        {"s": pa.array(["x", "y"]).dictionary_encode(), "t": pa.array(["u", "u"]).dictionary_encode()}
    )
    b = pa.table({"s": pa.array(["z"]), "t": pa.array(["v"]).dictionary_encode()})
    both = concat([a, b])
    assert both.schema.field("s").type == pa.string()
    assert pa.types.is_dictionary(both.schema.field("t").type)
    assert decoded(both).to_pylist() == [{"s": "x", "t": "u"}, {"s": "y", "t": "u"}, {"s": "z", "t": "v"}]
    same = concat([a, a])
    assert same.schema == a.schema and same.num_rows == 4


def _comments(ids: np.ndarray, distinct: bool) -> pa.Array:
    """A comment per id: a few repeating words, or one distinct string each."""
    if distinct:
        return pa.array([f"comment {i:012d} of its own" for i in ids])
    return pa.array(WORDS[ids % 5])


@pytest.mark.parametrize("options", [{"write-only": "true"}, {"deletion-vectors.enabled": "true"}])
def test_merged_reads_and_compaction_give_every_key_its_latest_row(catalog, options):
    """Files of one bucket differ in which columns repeat: merges read those that do as
    dictionaries; reads and a full compaction give the same rows as a model of the history."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("status", pa.string()), ("comment", pa.string())]
    )
    table = catalog.create_table("db.d", schema, primary_keys=["id"], options={"bucket": "1", **options})
    rng = np.random.default_rng(7)
    model: dict[int, dict] = {}
    for round_, distinct in enumerate([False, True, False, True]):
        ids = np.sort(rng.choice(4 * N, N, replace=False)) if round_ else np.arange(4 * N)
        status = pa.array(np.full(len(ids), WORDS[round_]))
        batch = pa.table(
            {"id": pa.array(ids), "status": status, "comment": _comments(ids, distinct)}, schema=schema
        )
        table.write(batch)
        model.update({r["id"]: r for r in batch.to_pylist()})
    expected = sorted(model.values(), key=lambda r: r["id"])
    got = table.read()
    assert got.schema == schema
    assert rows(got, "id") == expected
    shipped = table.read(columns=["id", "comment"], filter=col("status") == "shipped")
    assert rows(shipped, "id") == [
        {"id": r["id"], "comment": r["comment"]} for r in expected if r["status"] == "shipped"
    ]
    table.compact(full=True)
    assert rows(table.read(), "id") == expected
