"""The column-wise manifest decoder against fastavro: the same entries from the same bytes."""

from __future__ import annotations

import io

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.manifest import avro, avro_columns
from lakehouse.manifest import files as manifest_files
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
    decoded = avro_columns.decode(files, min_lanes=0)
    assert all(c is not None for c in decoded)
    return [DecodedManifest.of_columns(c).entries() for c in decoded]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(entries(), max_size=12), min_size=1, max_size=4), st.sampled_from([1, 300, 64000]))
def test_columnar_entries_equal_fastavro(files, sync_interval):
    data = [_container(f, sync_interval) for f in files]
    assert _columnar(data) == [_fastavro(d) for d in data] == files


@given(st.lists(entries(), min_size=1, max_size=20), st.data())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_entries_of_some_partitions(records, data):
    decoded = DecodedManifest.of_columns(avro_columns.decode([_container(records, 200)], min_lanes=0)[0])
    wanted = data.draw(st.sets(st.sampled_from([b"\0\0\0\1a", b"\0\0\0\1b", b""])))
    assert decoded.entries(wanted.__contains__) == [e for e in records if e.partition in wanted]
    assert decoded.entries() == records  # the rest built later, in file order


def test_damaged_files_are_not_decoded():
    e = ManifestEntry(
        FileKind.ADD,
        b"",
        0,
        1,
        DataFileMeta("f", 1, 1, b"", b"", *[SimpleStats(b"", b"", ())] * 2, 0, 0, 0, 0),
    )
    data = _container([e] * 50, 300)
    with pytest.raises(Exception):  # noqa: B017 - any error: the store falls back to fastavro
        avro_columns.decode([data[:-40]], min_lanes=0)
    plain = avro.write_container(avro.MANIFEST_ENTRY_SCHEMA, [avro.entry_record(e)] * 50, "null")
    with pytest.raises(ValueError, match="corrupt"):
        avro_columns.decode([plain[:-60] + bytes(4) + plain[-60:]], min_lanes=0)  # 4 bytes too many


def test_other_shapes_are_left_to_fastavro():
    buf = io.BytesIO()
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}],
    }
    fastavro.writer(buf, schema, [{"m": {"a": 1}}])
    assert avro_columns.decode([buf.getvalue()], min_lanes=0) == [None]
    snappy = io.BytesIO()
    fastavro.writer(snappy, avro.MANIFEST_ENTRY_SCHEMA, [], codec="bzip2")
    assert avro_columns.decode([snappy.getvalue()], min_lanes=0) == [None]


def test_a_damaged_manifest_read_by_the_store_is_a_corrupt_file(catalog, tmp_path):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    for i in range(3):
        t.write(pa.table({"id": list(range(i * 100, i * 100 + 100))}))
    store = t.store.manifests()
    names = [m.file_name for m in store.data_manifests(t.store.snapshots.latest())]
    path = t.store.paths.manifest(names[0])
    t.store.io.write_bytes(path, t.store.io.read_bytes(path)[:-20])
    manifest_files._CACHE.clear()
    with pytest.raises(CorruptFileError, match="corrupt or truncated"):
        store.read_manifests(names)


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
