"""Avro object container files taken apart with every count and length checked against the bytes.

A container is a header (magic, a metadata map holding the schema and the codec, a 16-byte sync
marker) and blocks (record count, byte size, data, the sync marker again). Damaged bytes must
not make a reader loop for ages or allocate gigabytes, so nothing read from the file is trusted
before it is checked: map counts and lengths against the bytes left, block sizes against the
file, each block's sync marker, record counts against the block's decompressed bytes (every
record of a Paimon metadata file takes at least one byte: its ``_VERSION``), and the schema for
arrays whose items take no bytes (a count of them costs time but no input). Both decoders - the
column-wise one (:mod:`lakehouse.manifest.avro_columns`) and fastavro - only ever see a
container that passed, fastavro as a plain (uncompressed) file rebuilt from the checked blocks.

Errors are :class:`CorruptFileError` saying what is wrong; the layer that read the file adds its
path.
"""

from __future__ import annotations

import bz2
import importlib
import io
import json
import lzma
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import fastavro

from lakehouse.errors import CorruptFileError, UnsupportedFeatureError

# the zstd module fastavro uses too: the standard library's from Python 3.14, its backport before
zstd = importlib.import_module("compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd")

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
_PLAIN_SYNC = bytes(SYNC_SIZE)


@dataclass(frozen=True)
class Container:
    """The checked parts of a container file: its schema text, codec and blocks as
    ``(record count, decompressed bytes)``."""

    schema: str
    codec: str
    blocks: tuple[tuple[int, bytes], ...]

    def records(self) -> Iterator[dict]:
        """The records, decoded by fastavro with the file's own schema."""
        _check_schema(self.schema)
        try:
            for record in fastavro.reader(io.BytesIO(_plain(self.schema, self.blocks))):
                if not isinstance(record, dict):  # a file whose schema is not a record
                    raise CorruptFileError(f"it holds {type(record).__name__} values, not records")
                yield record
        except CorruptFileError:
            raise
        except Exception as e:  # fastavro raises many types on bytes that do not fit the schema
            raise CorruptFileError(f"its records do not decode ({type(e).__name__}: {e})") from None


def _snappy(data: bytes) -> bytes:
    """Avro's snappy block: raw snappy, then the big-endian CRC32 of the decompressed bytes."""
    import cramjam  # (fastavro's snappy codec too) imported where a table has snappy manifests

    out = bytes(cramjam.snappy.decompress_raw(data[:-4]))
    if len(data) < 4 or zlib.crc32(out) != int.from_bytes(data[-4:], "big"):
        raise ValueError("checksum mismatch")
    return out


# The codecs Java's Avro writes (CodecFactory); decompressing never allocates more than the
# codec's own bounded ratio over the compressed bytes
_INFLATE: dict[str, Callable[[bytes], bytes]] = {
    "null": bytes,
    "deflate": lambda b: zlib.decompressobj(-15).decompress(b),
    "zstandard": zstd.decompress,
    "snappy": _snappy,
    "bzip2": lambda b: bz2.BZ2Decompressor().decompress(b),
    "xz": lambda b: lzma.LZMADecompressor().decompress(b),
}


def parse(raw: bytes) -> Container:
    """The checked header and blocks of a container file."""
    if raw[:4] != MAGIC:
        raise CorruptFileError("it is not an Avro container file (bad magic bytes)")
    meta, pos = _metadata(raw, 4)
    if len(raw) - pos < SYNC_SIZE:
        raise CorruptFileError("it is truncated inside its header")
    sync = raw[pos : pos + SYNC_SIZE]
    pos += SYNC_SIZE
    try:
        codec = meta.get("avro.codec", b"null").decode()
        schema = meta["avro.schema"].decode()
    except KeyError:
        raise CorruptFileError("its header has no schema") from None
    except UnicodeDecodeError:
        raise CorruptFileError("its header's schema or codec is not UTF-8 text") from None
    inflate = _INFLATE.get(codec)
    if inflate is None:
        raise CorruptFileError(f"its codec {codec!r} is not an Avro codec (one of {', '.join(_INFLATE)})")
    blocks: list[tuple[int, bytes]] = []
    end = len(raw)
    while pos < end:
        count, pos = _varint(raw, pos)
        size, pos = _varint(raw, pos)
        if count < 0 or not 0 <= size <= end - pos - SYNC_SIZE:
            raise CorruptFileError(
                f"block {len(blocks)} claims {count} records in {size} bytes, {end - pos} are left"
            )
        start, pos = pos, pos + size + SYNC_SIZE
        if raw[pos - SYNC_SIZE : pos] != sync:
            raise CorruptFileError(f"block {len(blocks)} does not end with the file's sync marker")
        data = _inflated(inflate, raw[start : start + size], codec, len(blocks))
        if count > len(data):  # every record takes at least one byte
            raise CorruptFileError(f"block {len(blocks)} claims {count} records in {len(data)} bytes")
        blocks.append((count, data))
    return Container(schema, codec, tuple(blocks))


def _inflated(inflate: Callable[[bytes], bytes], data: bytes, codec: str, block: int) -> bytes:
    try:
        return inflate(data)
    except UnsupportedFeatureError:
        raise
    except Exception as e:  # each codec's library has its own errors for damaged bytes
        raise CorruptFileError(f"block {block} does not decompress as {codec} ({e})") from None


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint (Avro long) at ``pos`` and the position after it."""
    shift = value = 0
    at = pos
    while True:
        if at >= len(raw) or shift > 63:
            raise CorruptFileError(f"it is truncated or garbled at byte {pos} (a bad varint)")
        b = raw[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def _bytes(raw: bytes, pos: int) -> tuple[bytes, int]:
    """The length-prefixed bytes at ``pos`` and the position after them."""
    n, pos = _varint(raw, pos)
    if not 0 <= n <= len(raw) - pos:
        raise CorruptFileError(f"a length of {n} bytes at byte {pos} runs past the end of the file")
    return raw[pos : pos + n], pos + n


def _metadata(raw: bytes, pos: int) -> tuple[dict[str, bytes], int]:
    """The header's map and the position after it: blocks of (count, entries) up to a count of
    0; a negative count is followed by the block's size in bytes."""
    meta: dict[str, bytes] = {}
    while True:
        count, pos = _varint(raw, pos)
        if count == 0:
            return meta, pos
        if count < 0:
            count = -count
            _, pos = _varint(raw, pos)
        if count > (len(raw) - pos) // 2:  # an entry is a key and a value of a byte each at least
            raise CorruptFileError(f"its header claims {count} entries in {len(raw) - pos} bytes")
        for _ in range(count):
            key, pos = _bytes(raw, pos)
            meta[key.decode("utf-8", "replace")], pos = _bytes(raw, pos)


def _plain(schema: str, blocks: tuple[tuple[int, bytes], ...]) -> bytes:
    """An uncompressed container file of ``blocks``: what fastavro reads."""
    out = [MAGIC, _zigzag(1), _string(b"avro.schema"), _string(schema.encode()), _zigzag(0), _PLAIN_SYNC]
    for count, data in blocks:
        out += [_zigzag(count), _string(data), _PLAIN_SYNC]
    return b"".join(out)


def _zigzag(n: int) -> bytes:
    """An Avro long's bytes."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(data: bytes) -> bytes:
    return _zigzag(len(data)) + data


# ---- the schema ------------------------------------------------------------------------------


def _check_schema(text: str) -> None:
    """Refuse a schema with arrays of items that take no bytes (null, empty records): a count
    read from the file would make fastavro produce that many items out of nothing."""
    try:
        schema = json.loads(text)
        named: dict[str, object] = {}
        _empty(schema, named, set())
    except (ValueError, RecursionError, TypeError, AttributeError, KeyError) as e:
        raise CorruptFileError(f"its schema is not a valid Avro schema ({type(e).__name__}: {e})") from None


def _empty(schema, named: dict, seen: set) -> bool:
    """Whether a value of ``schema`` can take no bytes; raises on arrays of such items."""
    if isinstance(schema, list):  # a union writes its branch index
        for branch in schema:
            _empty(branch, named, seen)
        return False
    if isinstance(schema, str):
        name = schema.rsplit(".", 1)[-1]  # a reference by full name or by name
        if name in named:
            return name not in seen and _empty(named[name], named, seen | {name})
        return schema == "null"
    kind = schema["type"]
    if not isinstance(kind, str) or kind not in ("record", "error", "fixed", "array", "map", "enum"):
        return _empty(kind, named, seen)
    name = schema.get("name", "").rsplit(".", 1)[-1]
    if name:
        named[name] = schema
    if kind in ("record", "error"):
        return all([_empty(f["type"], named, seen | {name}) for f in schema["fields"]])
    if kind == "fixed":
        return schema["size"] == 0
    if kind == "array" and _empty(schema["items"], named, seen):
        raise CorruptFileError("its schema has an array of items that take no bytes")
    if kind == "map":
        _empty(schema["values"], named, seen)
    return False
