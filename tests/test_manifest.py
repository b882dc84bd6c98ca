from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.manifest import avro, binary_row
from lakehouse.manifest.avro_container import parse
from lakehouse.manifest.entries import (
    EMPTY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    SimpleStats,
    merge_entries,
)
from lakehouse.manifest.stats import truncate_max, truncate_min
from lakehouse.types import BIGINT

from .conftest import ORDERS, orders


def _file(name: str, **kw) -> DataFileMeta:
    base = dict(
        file_size=10,
        row_count=3,
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=0,
        max_sequence_number=2,
        schema_id=0,
        level=0,
    )
    return DataFileMeta(name, **{**base, **kw})


def test_manifest_entry_round_trips_through_avro():
    stats = SimpleStats(
        binary_row.serialize(binary_row.encode_row([1], [BIGINT]), 1),
        binary_row.serialize(binary_row.encode_row([9], [BIGINT]), 1),
        (0,),
    )
    f = _file(
        "data-a-0.parquet",
        creation_time=1_700_000_000_123,
        value_stats=stats,
        value_stats_cols=("x",),
        extra_files=("data-a-0.parquet.index",),
        embedded_index=b"\x01",
        delete_row_count=2,
    )
    e = ManifestEntry(FileKind.DELETE, EMPTY_ROW, 3, 4, f)
    data = avro.write_container(avro.MANIFEST_ENTRY_SCHEMA, [avro.entry_record(e)], "zstandard")
    assert [avro.entry_from(r) for r in avro.read_container(data)] == [e]


def test_data_manifest_top_level_is_what_javas_strict_reader_checks():
    # ManifestRecordDecoder.validateTopLevelFields: exactly these six, in order, no unions
    fields = [
        (f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"])
        for f in avro.MANIFEST_ENTRY_SCHEMA["fields"]
    ]
    assert fields == [
        ("_VERSION", "int"),
        ("_KIND", "int"),
        ("_PARTITION", "bytes"),
        ("_BUCKET", "int"),
        ("_TOTAL_BUCKETS", "int"),
        ("_FILE", "record"),
    ]
    creation = next(
        f for f in avro.MANIFEST_ENTRY_SCHEMA["fields"][5]["type"]["fields"] if f["name"] == "_CREATION_TIME"
    )
    assert creation["type"][0] == "null" and creation["type"][1]["logicalType"] == "timestamp-millis"


def test_index_manifest_round_trips():
    dv = IndexFileMeta(
        "DELETION_VECTORS",
        "index-x-0",
        100,
        2,
        (DeletionVectorMeta("data-a-0.parquet", 1, 30, 4), DeletionVectorMeta("data-b-0.parquet", 31, 20)),
    )
    entries = [
        IndexManifestEntry(FileKind.ADD, EMPTY_ROW, 0, dv),
        IndexManifestEntry(FileKind.ADD, EMPTY_ROW, 1, IndexFileMeta("HASH", "index-y-0", 8, 2)),
    ]
    data = avro.write_container(
        avro.INDEX_MANIFEST_SCHEMA, map(avro.index_entry_record, entries), "zstandard"
    )
    assert [avro.index_entry_from(r) for r in avro.read_container(data)] == entries


def test_merge_entries_cancels_pairs_and_refuses_double_adds():
    a, b = _file("a"), _file("b")
    add = lambda f: ManifestEntry(FileKind.ADD, EMPTY_ROW, 0, 1, f)  # noqa: E731
    delete = lambda f: ManifestEntry(FileKind.DELETE, EMPTY_ROW, 0, 1, f)  # noqa: E731
    assert merge_entries([add(a), add(b), delete(a)]) == [add(b)]
    assert merge_entries([delete(a)]) == [delete(a)]  # its ADD lives in another manifest
    with pytest.raises(ValueError, match="added twice"):
        merge_entries([add(a), add(a)])


@pytest.mark.parametrize(
    ("value", "lo", "hi"),
    [
        ("abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnop", "abcdefghijklmnoq"),
        ("short", "short", "short"),
        ("a" * 15 + "\U0010ffff" * 3, "a" * 15 + "\U0010ffff", "a" * 14 + "b"),
        (b"\x01" * 15 + b"\xff\xff", b"\x01" * 15 + b"\xff", b"\x01" * 14 + b"\x02"),
    ],
)
def test_truncated_bounds_stay_bounds(value, lo, hi):
    assert truncate_min(value, 16) == lo and truncate_max(value, 16) == hi
    assert lo <= value <= hi


def test_truncation_that_cannot_round_up_drops_the_bounds():
    assert truncate_max(b"\xff" * 20, 16) is None


def test_manifest_list_partition_stats(catalog):
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"])
    t.write(pa.concat_tables([orders([1], dt="2024-01-03"), orders([2], dt="2024-01-01")]))
    store = t.manifests()
    (m,) = store.read_list(t.snapshots.latest().delta_manifest_list)
    types = t.schema.partition_types()
    low = binary_row.decode_row(binary_row.deserialize(m.partition_stats.min_values)[1], types)
    high = binary_row.decode_row(binary_row.deserialize(m.partition_stats.max_values)[1], types)
    assert (low, high, m.partition_stats.null_counts) == (["2024-01-01"], ["2024-01-03"], (0,))
    assert (m.num_added_files, m.num_deleted_files, m.min_bucket, m.max_bucket) == (2, 0, 0, 0)


def test_containers_append_by_copying_encoded_records_in_order():
    """Files of one schema append by their encoded records (tiny blocks coalesced), in order and
    mixed with records written one by one; a file of another schema is refused untouched."""
    import io

    import fastavro

    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}
    files = [parse(avro.write_container(schema, [{"x": i} for i in range(a, b)], "zstandard"))
             for a, b in [(0, 1), (1, 2), (2, 5000), (5000, 5001)]]  # fmt: skip
    writer = avro.ContainerWriter(schema, "zstandard")
    assert writer.append_file(files[0]) and writer.append_file(files[1])
    writer.write({"x": -1})
    assert writer.append_file(files[2]) and writer.append_file(files[3])
    other = avro.write_container({**schema, "name": "other"}, [{"x": 9}], "zstandard")
    assert not writer.append_file(parse(other))
    data = writer.finish()
    assert [r["x"] for r in avro.read_container(data)] == [0, 1, -1, *range(2, 5001)]
    blocks = list(fastavro.block_reader(io.BytesIO(data)))
    assert len(blocks) < 10 and blocks[0].num_records == 2  # the one-record blocks coalesced
