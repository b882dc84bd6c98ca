"""Avro container files taken apart with every count and length checked: damaged headers and
blocks are CorruptFileError at once, never a long loop or a large allocation."""

from __future__ import annotations

import contextlib
import io
import json

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.manifest import avro, avro_columns
from lakehouse.manifest.avro_container import MAGIC, Container, parse
from lakehouse.manifest.entries import DataFileMeta, FileKind, ManifestEntry, SimpleStats

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}
SYNC = bytes(range(16))


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def text(b: bytes) -> bytes:
    return varint(len(b)) + b


def header(*entries: tuple[bytes, bytes], count: int | None = None) -> bytes:
    """Magic, a metadata map of ``entries`` (claiming ``count`` of them) and the sync marker."""
    body = b"".join(text(k) + text(v) for k, v in entries)
    return MAGIC + varint(len(entries) if count is None else count) + body + varint(0) + SYNC


HEAD = header((b"avro.schema", json.dumps(SCHEMA).encode()), (b"avro.codec", b"null"))


def block(count: int, data: bytes, size: int | None = None, sync: bytes = SYNC) -> bytes:
    return varint(count) + varint(len(data) if size is None else size) + data + sync


@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard", "snappy", "bzip2", "xz"])
def test_every_avro_codec_reads(codec):
    buf = io.BytesIO()
    fastavro.writer(buf, SCHEMA, [{"x": i} for i in range(3000)], codec=codec, sync_interval=1000)
    container = parse(buf.getvalue())
    assert container.codec == codec and len(container.blocks) > 1
    assert [r["x"] for r in container.records()] == list(range(3000))


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b"Obj\x02" + HEAD[4:], "not an Avro container"),
        (MAGIC + varint(2**60), "claims 1152921504606846976 entries"),  # the map count of a hang
        (MAGIC + varint(-(2**60)) + varint(10), "claims 1152921504606846976 entries"),
        (MAGIC + varint(1) + varint(-5) + b"avro", "a length of -5 bytes"),  # the key length of a hang
        (MAGIC + varint(1) + varint(2**40) + b"avro", "a length of 1099511627776 bytes"),
        (MAGIC + varint(1) + text(b"avro.schema") + varint(3) + b"{", "a length of 3 bytes"),
        (HEAD[:-5], "truncated inside its header"),
        (MAGIC + b"\xff" * 12, "a bad varint"),
        (header((b"avro.codec", b"null")), "no schema"),
        (header((b"avro.schema", b"{}"), (b"avro.codec", b"lzo")), "codec 'lzo' is not an Avro codec"),
    ],
    ids=[
        "magic", "map-count", "negative-map-count", "negative-length", "huge-length", "short-value",
        "no-sync", "endless-varint", "no-schema", "codec",
    ],
)  # fmt: skip
def test_a_damaged_header_is_corrupt(raw, problem):
    with pytest.raises(CorruptFileError, match=problem):
        parse(raw)


@pytest.mark.parametrize(
    "blocks, problem",
    [
        (block(-1, b"\x02"), "block 0 claims -1 records"),
        (block(1, b"\x02", size=-3), "block 0 claims 1 records in -3 bytes"),
        (block(1, b"\x02", size=2**40), "in 1099511627776 bytes"),
        (block(1, b"\x02", sync=bytes(16)), "does not end with the file's sync marker"),
        (block(1, b"\x02")[:-4], "claims 1 records in 1 bytes, 13 are left"),
        (block(2**40, b"\x02\x04"), "block 0 claims 1099511627776 records in 2 bytes"),
        (block(1, b"\x02") + block(1, b"\x04")[:3], "block 1"),
    ],
    ids=["negative-count", "negative-size", "huge-size", "sync", "truncated", "huge-count", "second-block"],
)
def test_a_damaged_block_is_corrupt(blocks, problem):
    with pytest.raises(CorruptFileError, match=problem):
        parse(HEAD + blocks)


def test_a_block_that_does_not_decompress_is_corrupt():
    deflated = HEAD.replace(text(b"null"), text(b"deflate"))
    with pytest.raises(CorruptFileError, match="does not decompress as deflate"):
        parse(deflated + block(1, b"\xff\xff\xff"))


def test_records_that_do_not_fit_the_schema_are_corrupt():
    """Framing checks out, the bytes inside do not: fastavro's own error comes out typed."""
    string = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    head = header((b"avro.schema", json.dumps(string).encode()))
    with pytest.raises(CorruptFileError, match="do not decode"):
        list(parse(head + block(1, b"\x10abc")).records())  # a string of 8 bytes holding 3
    with pytest.raises(CorruptFileError, match="do not decode"):
        list(parse(head + block(1, b"\x02\xff")).records())  # not UTF-8


@pytest.mark.parametrize(
    "items",
    ["null", {"type": "record", "name": "e", "fields": []}, {"type": "fixed", "name": "f", "size": 0}],
    ids=["null", "empty-record", "empty-fixed"],
)
def test_an_array_of_items_that_take_no_bytes_is_refused(items):
    """A count of such items costs no input: fastavro would make 2**62 of them out of one byte."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "a", "type": {"type": "array", "items": items}}],
    }
    head = header((b"avro.schema", json.dumps(schema).encode()))
    with pytest.raises(CorruptFileError, match="items that take no bytes"):
        list(parse(head + block(1, varint(2**62) + varint(0))).records())


def test_a_schema_that_is_not_json_is_corrupt():
    head = header((b"avro.schema", b'{"type": "record", "fields": [' * 3))
    with pytest.raises(CorruptFileError, match="not a valid Avro schema"):
        list(parse(head).records())


def test_a_recursive_schema_is_no_empty_array():
    node = {
        "type": "record",
        "name": "node",
        "fields": [{"name": "children", "type": {"type": "array", "items": "node"}}],
    }
    head = header((b"avro.schema", json.dumps(node).encode()))
    assert list(parse(head + block(1, varint(1) + varint(0) + varint(0))).records()) == [
        {"children": [{"children": []}]}
    ]


def _manifest() -> bytes:
    meta = DataFileMeta("data-1.parquet", 10, 5, b"", b"", *[SimpleStats(b"", b"", ())] * 2, 0, 4, 0, 0)
    entries = [ManifestEntry(FileKind.ADD, b"\0\0\0\0", i % 3, 3, meta) for i in range(40)]
    buf = io.BytesIO()
    fastavro.writer(buf, avro.MANIFEST_ENTRY_SCHEMA, map(avro.entry_record, entries), sync_interval=300)
    return buf.getvalue()


MANIFEST = _manifest()


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, len(MANIFEST)), st.binary(min_size=1, max_size=40), st.sampled_from(["insert", "replace"])
)
def test_a_damaged_manifest_reads_or_is_corrupt(at, chunk, how):
    """Runs of bytes inserted or overwritten anywhere (as in the header of the manifests that
    once hung a read): each decoder ends with records or CorruptFileError."""
    raw = MANIFEST[:at] + chunk + MANIFEST[at + (len(chunk) if how == "replace" else 0) :]
    try:
        container = parse(raw)
    except CorruptFileError:
        return
    for decode in (lambda: list(container.records()), lambda: avro_columns.decode([container], min_lanes=0)):
        with contextlib.suppress(CorruptFileError):
            decode()


def test_a_container_is_what_fastavro_reads():
    """The blocks handed to fastavro are the checked ones, uncompressed."""
    container = Container(json.dumps(SCHEMA), "zstandard", ((2, b"\x02\x04"), (1, b"\x06")))
    assert [r["x"] for r in container.records()] == [1, 2, 3]
