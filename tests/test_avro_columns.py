"""The column-wise manifest decoder against fastavro: the same entries from the same bytes."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.manifest import avro, avro_columns
from lakehouse.manifest import files as manifest_files
from lakehouse.manifest.avro_container import Container, parse
from lakehouse.manifest.decoded import DecodedManifest
from lakehouse.manifest.entries import DataFileMeta, FileKind, ManifestEntry, SimpleStats

from .interop import oracle

LONGS = st.integers(-(2**63), 2**63 - 1)
INTS = st.integers(-(2**31), 2**31 - 1)
BLOBS = st.binary(max_size=80)
TEXT = st.text(max_size=70)


@st.composite
def stats(draw) -> SimpleStats:
    return SimpleStats(draw(BLOBS), draw(BLOBS), tuple(draw(st.lists(st.none() | LONGS, max_size=70))))


@st.composite
def entries(draw) -> ManifestEntry:
    def maybe(s):
        return draw(st.none() | s)

    def names():
        return st.lists(TEXT, max_size=3).map(tuple)

    meta = DataFileMeta(
        file_name=draw(TEXT),
        file_size=draw(LONGS),
        row_count=draw(LONGS),
        min_key=draw(BLOBS),
        max_key=draw(BLOBS),
        key_stats=draw(stats()),
        value_stats=draw(stats()),
        min_sequence_number=draw(LONGS),
        max_sequence_number=draw(LONGS),
        schema_id=draw(LONGS),
        level=draw(INTS),
        extra_files=draw(names()),
        creation_time=maybe(st.integers(0, 2**46)),  # fastavro: datetimes up to year 9999
        delete_row_count=maybe(LONGS),
        embedded_index=maybe(st.binary(max_size=300)),
        file_source=maybe(INTS),
        value_stats_cols=maybe(names()),
        external_path=maybe(TEXT),
        first_row_id=maybe(LONGS),
        write_cols=maybe(names()),
        write_cols_sequences=maybe(st.lists(LONGS, max_size=4).map(tuple)),
    )
    kind = draw(st.sampled_from(list(FileKind)))
    return ManifestEntry(
        kind, draw(st.sampled_from([b"\0\0\0\1a", b"\0\0\0\1b", b""])), draw(INTS), draw(INTS), meta
    )


def _container(records: list[ManifestEntry], sync_interval: int) -> bytes:
    """A manifest file with blocks of about ``sync_interval`` bytes (many blocks: many lanes)."""
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        avro.MANIFEST_ENTRY_SCHEMA,
        map(avro.entry_record, records),
        codec="zstandard",
        sync_interval=sync_interval,
    )
    return buf.getvalue()


def _fastavro(data: bytes) -> list[ManifestEntry]:
    return [avro.entry_from(r) for r in avro.read_container(data)]


def _columnar(files: list[bytes]) -> list[list[ManifestEntry]]:
    decoded = avro_columns.decode([parse(f) for f in files], min_lanes=0)
    assert all(c is not None for c in decoded)
    return [DecodedManifest.of_columns(c, "m").entries() for c in decoded]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(entries(), max_size=12), min_size=1, max_size=4), st.sampled_from([1, 300, 64000]))
def test_columnar_entries_equal_fastavro(files, sync_interval):
    data = [_container(f, sync_interval) for f in files]
    assert _columnar(data) == [_fastavro(d) for d in data] == files


@given(st.lists(entries(), min_size=1, max_size=20), st.data())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_entries_of_some_partitions(records, data):
    columns = avro_columns.decode([parse(_container(records, 200))], min_lanes=0)[0]
    decoded = DecodedManifest.of_columns(columns, "m")
    wanted = data.draw(st.sets(st.sampled_from([b"\0\0\0\1a", b"\0\0\0\1b", b""])))
    assert decoded.entries(wanted.__contains__) == [e for e in records if e.partition in wanted]
    assert decoded.entries() == records  # the rest built later, in file order


def _entry() -> ManifestEntry:
    meta = DataFileMeta("f", 1, 1, b"", b"", *[SimpleStats(b"", b"", ())] * 2, 0, 0, 0, 0)
    return ManifestEntry(FileKind.ADD, b"", 0, 1, meta)


def _records(*blocks: bytes) -> Container:
    """A checked-looking container of the manifest schema whose blocks hold ``blocks`` (one record
    each): damage behind valid framing, for the record walk to find."""
    return Container(json.dumps(avro.MANIFEST_ENTRY_SCHEMA), "null", tuple((1, b) for b in blocks))


def _encoded(e: ManifestEntry) -> bytes:
    return parse(avro.write_container(avro.MANIFEST_ENTRY_SCHEMA, [avro.entry_record(e)], "null")).blocks[0][
        1
    ]


def test_records_that_do_not_fill_their_block_are_corrupt():
    good = _encoded(_entry())
    for damaged in (good + bytes(4), good[:-3]):
        with pytest.raises(CorruptFileError, match="do not end where their blocks end"):
            avro_columns.decode([_records(damaged)], min_lanes=0)


def _with_name_length(encoded: bytes, varint: bytes) -> bytes:
    at = encoded.index(b"\x02f")  # the file name: zigzag 1 (its length), then "f"
    return encoded[:at] + varint + encoded[at + 1 :]


def test_a_string_longer_than_the_data_is_corrupt():
    huge = _with_name_length(_encoded(_entry()), b"\xff\xff\xff\xff\x0f")
    with pytest.raises(CorruptFileError, match="past the end"):
        avro_columns.decode([_records(huge)], min_lanes=0)


def test_a_negative_string_length_is_corrupt():
    """A file name of length -1 moves the walk backwards; the walk still ends (record and item
    counts bound it) and the damage is found, even where the walk happens to end in place."""
    with pytest.raises(CorruptFileError):
        avro_columns.decode([_records(_with_name_length(_encoded(_entry()), b"\x01"))], min_lanes=0)
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}],
    }
    # s: length -1 steps back onto its own length byte, which n then reads as -1: the record
    # ends exactly at the end of its block
    in_place = Container(json.dumps(schema), "null", ((1, b"\x01"),))
    with pytest.raises(CorruptFileError, match="negative length"):
        avro_columns.decode([in_place], min_lanes=0)


def _with_extra_files(count: int, items: bytes) -> bytes:
    """A record whose ``_EXTRA_FILES`` array claims ``count`` items, followed by ``items``."""
    good = _encoded(replace(_entry(), file=replace(_entry().file, extra_files=("x",))))
    at = good.index(b"\x02\x02x")  # one item, then the item: a string of length 1
    zigzag = (count << 1) ^ (count >> 63)
    varint = bytearray()
    while zigzag > 0x7F:
        varint.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    varint.append(zigzag)
    return good[:at] + bytes(varint) + items + good[at + 3 :]


@pytest.mark.parametrize("count", [2**40, 2**62])
def test_array_items_that_do_not_move_the_walk_are_bounded_by_the_bytes(count):
    """Items of length -1 step back onto themselves: a damaged count of them would loop that many
    times. Every item takes a byte at least, so more items than bytes is damage."""
    with pytest.raises(CorruptFileError, match="_EXTRA_FILES claim more items than the data has bytes"):
        avro_columns.decode([_records(_with_extra_files(count, b"\x01"))], min_lanes=0)


def test_an_array_count_without_an_absolute_value_is_corrupt():
    """A negative count is followed by a byte size; -2**63 has no count to read then."""
    with pytest.raises(CorruptFileError, match="count out of range"):
        avro_columns.decode([_records(_with_extra_files(-(2**63), b"\x02\x02x"))], min_lanes=0)


def test_other_shapes_are_left_to_fastavro():
    buf = io.BytesIO()
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}],
    }
    fastavro.writer(buf, schema, [{"m": {"a": 1}}])
    assert avro_columns.decode([parse(buf.getvalue())], min_lanes=0) == [None]


def test_a_damaged_manifest_read_by_the_store_is_a_corrupt_file(catalog, tmp_path):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    for i in range(3):
        t.write(pa.table({"id": list(range(i * 100, i * 100 + 100))}))
    store = t.store.manifests()
    names = [m.file_name for m in store.data_manifests(t.store.snapshots.latest())]
    path = t.store.paths.manifest(names[0])
    t.store.io.write_bytes(path, t.store.io.read_bytes(path)[:-20])
    manifest_files._CACHE.clear()
    with pytest.raises(CorruptFileError, match=f"manifest {path} is corrupt or truncated"):
        store.read_manifests(names)
    with pytest.raises(CorruptFileError, match=f"manifest {path} is corrupt or truncated"):
        store.concat_manifests(store.data_manifests(t.store.snapshots.latest()))  # a manifest merge


def test_an_entry_of_an_unknown_kind_is_corrupt_when_it_is_built():
    record = {**avro.entry_record(_entry()), "_KIND": 5}
    data = avro.write_container(avro.MANIFEST_ENTRY_SCHEMA, [record], "null")
    decoded = DecodedManifest.of_columns(avro_columns.decode([parse(data)], min_lanes=0)[0], "dir/manifest-1")
    with pytest.raises(CorruptFileError, match="manifest dir/manifest-1 is corrupt.*KeyError: 5"):
        decoded.entries()


def _manifest_with(field: str, avro_type: object, value: object) -> bytes:
    """A manifest of one entry whose field ``field`` has another type (None: the field is left out)."""
    schema = json.loads(json.dumps(avro.MANIFEST_ENTRY_SCHEMA))
    schema["fields"] = [f for f in schema["fields"] if f["name"] != field]
    record = {k: v for k, v in avro.entry_record(_entry()).items() if k != field}
    if avro_type is not None:
        schema["fields"].append({"name": field, "type": avro_type})
        record[field] = value
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [record])
    return buf.getvalue()


def test_a_manifest_without_partitions_is_corrupt():
    columns = avro_columns.decode([parse(_manifest_with("_PARTITION", None, None))], min_lanes=0)[0]
    with pytest.raises(CorruptFileError, match="manifest dir/manifest-1 is corrupt.*_PARTITION is missing"):
        DecodedManifest.of_columns(columns, "dir/manifest-1")


@pytest.mark.parametrize(
    ("field", "avro_type", "value", "problem"),
    [
        ("_BUCKET", ["null", "int"], None, "_BUCKET is missing or null"),  # a field every entry has
        ("_BUCKET", "string", "3", "_BUCKET does not have the type"),
        ("_TOTAL_BUCKETS", None, None, "_TOTAL_BUCKETS is missing"),
    ],
)
def test_an_entry_without_a_value_it_must_have_is_corrupt_when_it_is_built(field, avro_type, value, problem):
    columns = avro_columns.decode([parse(_manifest_with(field, avro_type, value))], min_lanes=0)[0]
    decoded = DecodedManifest.of_columns(columns, "dir/manifest-1")
    with pytest.raises(CorruptFileError, match=f"manifest dir/manifest-1 is corrupt.*{problem}"):
        decoded.entries()


@pytest.mark.interop
def test_manifests_written_by_pypaimon(tmp_path):
    """pypaimon's manifests (its own record names and field set) decode as fastavro reads them."""
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("p", pa.string())])
    warehouse = str(tmp_path)
    oracle.create(
        warehouse, "db.t", schema, partition_keys=["p"], options={"bucket": "2", "bucket-key": "id"}
    )
    for i in range(4):
        rows = pa.table(
            {"id": [i, i + 10, i + 20], "s": ["x", None, "y"], "p": ["a", "b", "a"]}, schema=schema
        )
        oracle.write(warehouse, "db.t", rows)
    found = sorted((tmp_path / "db.db" / "t" / "manifest").glob("manifest-[!l]*"))
    data = [p.read_bytes() for p in found]
    assert data and _columnar(data) == [_fastavro(d) for d in data]
