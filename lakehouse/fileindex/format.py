"""The file-index container (``FileIndexFormat``): every index of one data file in one blob.

Layout (big-endian): magic 1493475289347502 (8 bytes), version (1), head length, column count,
then per column its name (Java modified UTF-8 with a 2-byte length), index count and per index
its type name, absolute start (-1 for an empty index) and length; a redundant-bytes length (0
in version 1; readers skip whatever later versions put there), then the body.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from lakehouse.errors import CorruptFileError, UnsupportedFeatureError

MAGIC = 1493475289347502
VERSION = 1
EMPTY = -1  # start of an index that holds nothing (reads as SKIP)
HEAD_READ = 64 * 1024
_HEAD_FIXED = 24  # magic, version, head length, column count, redundant length


def java_utf(text: str) -> bytes:
    """``DataOutput.writeUTF``: 2-byte length, modified UTF-8 (NUL and supplementary chars differ)."""
    out = bytearray()
    for ch in text:
        cp = ord(ch)
        if 0 < cp < 0x80:
            out.append(cp)
        elif cp < 0x800:
            out += bytes([0xC0 | cp >> 6, 0x80 | cp & 0x3F])
        elif cp < 0x10000:
            out += bytes([0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F])
        else:  # surrogate pair, each half encoded as a 3-byte sequence
            for unit in struct.unpack(">2H", ch.encode("utf-16-be")):
                out += bytes([0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F])
    if len(out) > 0xFFFF:
        raise ValueError(f"name too long for writeUTF: {text[:40]!r}...")
    return struct.pack(">H", len(out)) + bytes(out)


def _read_utf(data: memoryview, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">H", data, pos)
    raw = bytes(data[pos + 2 : pos + 2 + n])
    if len(raw) < n:
        raise struct.error("truncated name")
    if raw.isascii() and 0 not in raw:  # the common case: plain ASCII is its own modified UTF-8
        return raw.decode("ascii"), pos + 2 + n
    units = []
    i = 0
    while i < n:  # decode modified UTF-8 into UTF-16 code units
        b = raw[i]
        if b < 0x80:
            units.append(b)
            i += 1
        elif b >> 5 == 0b110:
            units.append((b & 0x1F) << 6 | raw[i + 1] & 0x3F)
            i += 2
        else:
            units.append((b & 0x0F) << 12 | (raw[i + 1] & 0x3F) << 6 | raw[i + 2] & 0x3F)
            i += 3
    return struct.pack(f">{len(units)}H", *units).decode("utf-16-be", errors="surrogatepass"), pos + 2 + n


def write(indexes: Mapping[str, Mapping[str, bytes | None]]) -> bytes:
    """Serialize ``{column: {index type: bytes or None (empty)}}`` in the mapping's order."""
    names = b"".join(java_utf(c) + b"".join(java_utf(t) for t in types) for c, types in indexes.items())
    entries = sum(len(types) for types in indexes.values())
    head_length = 8 + 4 + 4 + 4 + entries * 8 + len(indexes) * 4 + 4 + len(names)
    head = bytearray(struct.pack(">qiii", MAGIC, VERSION, head_length, len(indexes)))
    body = bytearray()
    for column, types in indexes.items():
        head += java_utf(column) + struct.pack(">i", len(types))
        for index_type, data in types.items():
            if data is None:
                head += java_utf(index_type) + struct.pack(">ii", EMPTY, 0)
            else:
                head += java_utf(index_type) + struct.pack(">ii", head_length + len(body), len(data))
                body += data
    head += struct.pack(">i", 0)  # redundant length
    return bytes(head + body)


def read(data: bytes) -> dict[str, dict[str, bytes | None]]:
    """``{column: {index type: bytes or None (empty)}}`` of a whole container."""
    return read_columns(lambda offset, length: data[offset : offset + length], None)


def read_columns(
    fetch: Callable[[int, int], bytes], columns: set[str] | None
) -> dict[str, dict[str, bytes | None]]:
    """The indexes of ``columns`` (None: all) of a container read through ``fetch(offset, length)``.

    The head is fetched first (one read of ``HEAD_READ`` bytes usually covers it and the small
    indexes), then only the wanted indexes' bytes, so a query on one column of a file with many
    large indexes reads little more than that column's index.
    """
    try:
        prefix = fetch(0, HEAD_READ)
        magic, version, head_length, count = struct.unpack_from(">qiii", prefix, 0)
        if magic != MAGIC:
            raise CorruptFileError("not a Paimon file index (bad magic)")
        if version > VERSION:
            raise UnsupportedFeatureError(
                f"file index container version {version} is newer than this engine, which reads version "
                f"{VERSION}"
            )
        if version < VERSION:
            raise CorruptFileError(f"file index version {version} does not exist")
        if head_length > len(prefix):
            prefix += fetch(len(prefix), head_length - len(prefix))
        if not _HEAD_FIXED <= head_length <= len(prefix):
            raise CorruptFileError(f"file index head claims {head_length} bytes, the file has {len(prefix)}")
        # a column takes 6 bytes of the head at least, an index 10: counts beyond them are damage
        if not 0 <= count <= head_length // 6:
            raise CorruptFileError(f"file index head claims {count} columns in {head_length} bytes")
        view = memoryview(prefix)[:head_length]
        pos = 20
        out: dict[str, dict[str, bytes | None]] = {}
        for _ in range(count):
            column, pos = _read_utf(view, pos)
            (entries,) = struct.unpack_from(">i", view, pos)
            pos += 4
            if not 0 <= entries <= (head_length - pos) // 10:
                raise CorruptFileError(f"file index head claims {entries} indexes of column {column}")
            for _ in range(entries):
                index_type, pos = _read_utf(view, pos)
                start, length = struct.unpack_from(">ii", view, pos)
                pos += 8
                if columns is not None and column not in columns:
                    continue
                types = out.setdefault(column, {})
                if start == EMPTY:
                    types[index_type] = None
                    continue
                if start < head_length or length < 0:
                    raise CorruptFileError(f"file index entry {column}/{index_type} points into the head")
                end = start + length
                body = prefix[start:end] if end <= len(prefix) else fetch(start, length)
                if len(body) < length:
                    raise CorruptFileError(f"file index entry {column}/{index_type} points outside the file")
                types[index_type] = bytes(body)
        # the redundant bytes of later versions sit before head_length and are skipped
        return out
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise CorruptFileError(f"file index is corrupt or truncated ({e})") from None
