"""Avro object container files decoded a column at a time, many records per numpy call.

fastavro builds one dict per record: about 15 us for a manifest entry, 1.5 s for the manifests of
a table of 100,000 files, which dominated planning. Records follow each other inside a block, so
where one starts is only known once the one before is read; blocks are independent, though. This
reader walks the schema once per record position and reads that record of every block at once
(one "lane" per block, over all the files given): blocks of R records cost R schema walks over
arrays as long as the number of blocks. Every leaf field becomes a column: varint values as int64,
strings and bytes as (start, length) ranges of the decompressed data, unions' nulls as a mask,
arrays as their items with offsets per record.

Only the shapes of manifests are supported: records, int, long, string, bytes, unions of null and
one other type, arrays of those (not of records or arrays). :func:`decode` returns None for
anything else, which callers leave to fastavro.

Files come checked by :mod:`lakehouse.manifest.avro_container` (block record counts fit their
bytes), and a walk over damaged records stays bounded: the items of an array never outnumber the
bytes (an item takes one at least), and reads past the data, records that do not end where their
block ends and negative string lengths are :class:`CorruptFileError` (with lengths that are not
negative, positions only move forward, so every string lies inside its block). The checks are a
scalar per step and a vector operation per column, never one per record.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import numpy as np

from lakehouse.errors import CorruptFileError
from lakehouse.manifest.avro_container import Container

_PAD = 16  # zero bytes after the data, so a window of 10 varint bytes never reads past it
_WINDOW = np.arange(10)
_SHIFTS = (7 * _WINDOW).astype(np.uint64)
_VARINTS = ("int", "long")
_RANGES = ("string", "bytes")


@dataclass(frozen=True)
class IntColumn:
    """One varint leaf (int, long) of every record, or of every item of an array; ``present`` is
    False where a union held null."""

    present: np.ndarray
    values: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.present.nbytes + self.values.nbytes

    def ints(self, rows: np.ndarray) -> list[int | None]:
        """The values of ``rows`` as Python ints (None where null)."""
        values = self.values[rows].tolist()
        present = self.present[rows]
        return values if present.all() else [v if p else None for v, p in zip(values, present, strict=True)]

    def take(self, order: np.ndarray) -> IntColumn:
        return IntColumn(self.present[order], self.values[order])

    def window(self, lo: int, hi: int, start: int) -> IntColumn:
        """Slots ``lo:hi`` (values hold no positions in the data to make relative to ``start``)."""
        return IntColumn(self.present[lo:hi], self.values[lo:hi])


@dataclass(frozen=True)
class RangeColumn:
    """One string or bytes leaf of every record, or of every item of an array: ``starts`` and
    ``lengths`` in the data; ``present`` is False where a union held null."""

    present: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.present.nbytes + self.starts.nbytes + self.lengths.nbytes

    def bytes_of(self, data: bytes, rows: np.ndarray) -> list[bytes | None]:
        """The byte strings of ``rows`` (None where null)."""
        present = self.present[rows]
        lengths = self.lengths[rows]
        if present.all() and not lengths.any():  # e.g. the empty keys of append tables
            return [b""] * len(rows)
        starts, ends = self.starts[rows].tolist(), (self.starts[rows] + lengths).tolist()
        if present.all():
            return [data[s:e] for s, e in zip(starts, ends, strict=True)]
        return [data[s:e] if p else None for s, e, p in zip(starts, ends, present.tolist(), strict=True)]

    def take(self, order: np.ndarray) -> RangeColumn:
        return RangeColumn(self.present[order], self.starts[order], self.lengths[order])

    def window(self, lo: int, hi: int, start: int) -> RangeColumn:
        """Slots ``lo:hi`` of a column whose data begins at byte ``start``, positions made relative
        to it."""
        return RangeColumn(self.present[lo:hi], self.starts[lo:hi] - start, self.lengths[lo:hi])


Column = IntColumn | RangeColumn


@dataclass(frozen=True)
class ListColumn:
    """An array field: per record whether it is there (not a null union) and where its items are."""

    present: np.ndarray
    offsets: np.ndarray  # items of record r: offsets[r]:offsets[r + 1]
    items: Column

    @property
    def nbytes(self) -> int:
        return self.present.nbytes + self.offsets.nbytes + self.items.nbytes


_Shape = TypeVar("_Shape", IntColumn, RangeColumn, ListColumn)


def expect(column: Column | ListColumn, shape: type[_Shape], path: str) -> _Shape:
    """``column`` (field ``path``) as the shape its reader takes; a file whose schema has another
    type there is corrupt."""
    if isinstance(column, shape):
        return column
    raise CorruptFileError(f"its field {path} does not have the type manifests hold there")


@dataclass(frozen=True)
class Columns:
    """The records of one container file, by leaf path (``"_FILE._FILE_NAME"``)."""

    data: bytes
    rows: int
    columns: dict[str, Column | ListColumn]

    def get(self, path: str, shape: type[_Shape]) -> _Shape | None:
        """The column of field ``path`` (None when the file's schema has no such field), which
        must have ``shape``."""
        column = self.columns.get(path)
        return None if column is None else expect(column, shape, path)


MIN_LANES = 16  # a schema walk over few lanes costs more than fastavro's records


def decode(files: list[Container], min_lanes: int = MIN_LANES) -> list[Columns | None]:
    """The records of each container file, decoded together: files with the same schema share
    their lanes. None for a file of a shape this reader does not support, or whose group has
    fewer than ``min_lanes`` records per step (blocks too few for the lock step to pay).

    Raises :class:`CorruptFileError` when records of a group do not decode; which file is
    damaged is for a reader of each file alone to tell."""
    out: list[Columns | None] = [None] * len(files)
    groups: dict[str, list[int]] = {}
    plans: dict[str, _Record] = {}
    for i, f in enumerate(files):
        plan = _compile(f.schema)
        if plan is not None:
            plans[f.schema] = plan
            groups.setdefault(f.schema, []).append(i)
    for schema, members in groups.items():
        blocks = [b for i in members for b in files[i].blocks]
        steps = max((count for count, _ in blocks), default=0)
        if sum(count for count, _ in blocks) < min_lanes * steps:
            continue
        decoded = _decode_group(plans[schema], [files[i].blocks for i in members])
        for i, columns in zip(members, decoded, strict=True):
            out[i] = columns
    return out


# ---- schema ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    path: str
    kind: str  # "int" (varint) or "range" (string, bytes)


@dataclass(frozen=True)
class _Union:
    branch: int  # index of the non-null branch
    inner: _Node


@dataclass(frozen=True)
class _Array:
    path: str
    items: _Leaf | _Union  # a leaf, or a union of null and a leaf


@dataclass(frozen=True)
class _Record:
    fields: tuple[_Node, ...]


_Node = _Leaf | _Union | _Array | _Record


@lru_cache(maxsize=64)
def _compile(schema_text: str) -> _Record | None:
    """The decoding plan of a schema (None when a shape is not supported)."""
    try:
        node = _node(json.loads(schema_text), "")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return node if isinstance(node, _Record) else None


def _node(schema, path: str, in_array: bool = False) -> _Node | None:
    if isinstance(schema, list):
        others = [i for i, s in enumerate(schema) if s != "null"]
        if len(schema) != 2 or len(others) != 1:
            return None
        inner = _node(schema[others[0]], path, in_array)
        if inner is None or in_array and not isinstance(inner, _Leaf):
            return None
        return _Union(others[0], inner)
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, dict | list):
        return _node(kind, path, in_array)
    if kind in _VARINTS:
        return _Leaf(path, "int")
    if kind in _RANGES:
        return _Leaf(path, "range")
    if kind == "record" and not in_array:
        fields = []
        for f in schema["fields"]:
            child = _node(f["type"], f"{path}.{f['name']}" if path else f["name"])
            if child is None:
                return None
            fields.append(child)
        return _Record(tuple(fields))
    if kind == "array" and not in_array:
        items = _node(schema["items"], path, True)
        return _Array(path, items) if isinstance(items, _Leaf | _Union) else None
    return None


# ---- decoding --------------------------------------------------------------------------------


class _Sink:
    """Values of one leaf as they are read, by slot (record or array item number)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.slots: list[np.ndarray] = []
        self.parts: list[tuple[np.ndarray, ...]] = []

    def put(self, slots: np.ndarray, *parts: np.ndarray) -> None:
        self.slots.append(slots)
        self.parts.append(parts)

    def column(self, total: int) -> Column:
        present = np.zeros(total, bool)
        arrays = [np.zeros(total, np.int64) for _ in range(1 if self.kind == "int" else 2)]
        if self.slots:
            slots = np.concatenate(self.slots)
            present[slots] = True
            for j, a in enumerate(arrays):
                a[slots] = np.concatenate([p[j] for p in self.parts])
        if self.kind == "int":
            return IntColumn(present, arrays[0])
        return RangeColumn(present, arrays[0], arrays[1])


class _ArraySink:
    """The items of one array field: who owns each item, and the items' own leaf."""

    def __init__(self, kind: str) -> None:
        self.present: list[np.ndarray] = []
        self.owners: list[np.ndarray] = []
        self.count = 0
        self.items = _Sink(kind)

    def new_items(self, owners: np.ndarray) -> np.ndarray:
        ids = np.arange(self.count, self.count + len(owners))
        self.count += len(owners)
        self.owners.append(owners)
        return ids

    def column(self, total: int) -> ListColumn:
        present = np.zeros(total, bool)
        if self.present:
            present[np.concatenate(self.present)] = True
        owners = np.concatenate(self.owners) if self.owners else np.zeros(0, np.int64)
        order = np.argsort(owners, kind="stable")  # item ids of one owner increase in item order
        offsets = np.zeros(total + 1, np.int64)
        np.cumsum(np.bincount(owners, minlength=total), out=offsets[1:])
        return ListColumn(present, offsets, self.items.column(self.count).take(order))


def _decode_group(plan: _Record, files: list[tuple[tuple[int, bytes], ...]]) -> list[Columns]:
    """Decode files of one schema: every block is a lane, record ``s`` of every lane at step ``s``."""
    chunks, lane_start, lane_end, lane_count, lane_first = [], [], [], [], []
    file_rows, file_bytes = [], []
    at = rows = 0
    for blocks in files:
        first_row, first_byte = rows, at
        for count, data in blocks:
            if count:
                lane_start.append(at)
                lane_end.append(at + len(data))
                lane_count.append(count)
                lane_first.append(rows)
            chunks.append(data)
            at += len(data)
            rows += count
        file_rows.append((first_row, rows))
        file_bytes.append((first_byte, at))
    data = b"".join(chunks)
    buf = np.frombuffer(data + bytes(_PAD), np.uint8)
    sinks: dict[str, _Sink | _ArraySink] = {}
    walk = _walker(plan, sinks, len(data))
    counts = np.array(lane_count, np.int64)
    order = np.argsort(-counts, kind="stable")  # the lanes still active at step s are a prefix
    pos = np.array(lane_start, np.int64)[order]
    first = np.array(lane_first, np.int64)[order]
    counts = counts[order]
    try:
        for step in range(int(counts[0]) if len(counts) else 0):
            active = int(np.searchsorted(-counts, -step))  # the lanes with more than ``step`` records
            pos[:active] = walk(buf, pos[:active], first[:active] + step)
    except IndexError:
        raise CorruptFileError("records run past the end of the data") from None
    if not np.array_equal(pos, np.array(lane_end, np.int64)[order]):
        raise CorruptFileError("records do not end where their blocks end")
    columns = {path: sink.column(rows) for path, sink in sinks.items()}
    # positions only move forward where no length is negative, and end at their block's end:
    # every string then lies inside its block
    for path, c in columns.items():
        leaf = c.items if isinstance(c, ListColumn) else c
        if isinstance(leaf, RangeColumn) and len(leaf.lengths) and leaf.lengths.min() < 0:
            raise CorruptFileError(f"a value of {path} has a negative length")
    return [_slice(data, columns, r, b) for r, b in zip(file_rows, file_bytes, strict=True)]


def _slice(
    data: bytes, columns: dict[str, Column | ListColumn], rows: tuple[int, int], span: tuple[int, int]
) -> Columns:
    """The columns of records ``rows`` (bytes ``span`` of ``data``), positions made file-relative."""
    (lo, hi), (start, end) = rows, span
    out: dict[str, Column | ListColumn] = {}
    for path, c in columns.items():
        if isinstance(c, ListColumn):
            a, b = int(c.offsets[lo]), int(c.offsets[hi])
            out[path] = ListColumn(c.present[lo:hi], c.offsets[lo : hi + 1] - a, c.items.window(a, b, start))
        else:
            out[path] = c.window(lo, hi, start)
    return Columns(data[start:end], hi - lo, out)


Walk = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _walker(node: _Node, sinks: dict, size: int, item_of: _ArraySink | None = None) -> Walk:
    """A function reading ``node`` at positions ``pos`` for slots ``slot``; returns the positions
    after it. Leaves record their values into ``sinks`` (or into ``item_of``'s items); ``size``
    is the bytes of the data, which bounds the items of an array (each takes a byte at least)."""
    if isinstance(node, _Record):
        steps = [_walker(f, sinks, size) for f in node.fields]

        def record(buf, pos, slot):
            for step in steps:
                pos = step(buf, pos, slot)
            return pos

        return record
    if isinstance(node, _Leaf):
        sink = item_of.items if item_of is not None else sinks.setdefault(node.path, _Sink(node.kind))
        if node.kind == "int":

            def varint(buf, pos, slot):
                values, pos = _varints(buf, pos)
                sink.put(slot, values)
                return pos

            return varint

        def byte_range(buf, pos, slot):
            lengths, pos = _varints(buf, pos)
            sink.put(slot, pos, lengths)
            return pos + lengths

        return byte_range
    if isinstance(node, _Union):
        inner, branch = _walker(node.inner, sinks, size, item_of), node.branch

        def union(buf, pos, slot):
            some = buf[pos] == 2 * branch  # a branch index of two is one zigzag byte: 0 or 2
            pos = pos + 1
            if some.all():
                return inner(buf, pos, slot)
            if some.any():
                pos[some] = inner(buf, pos[some], slot[some])
            return pos

        return union
    array = sinks.setdefault(node.path, _ArraySink(_leaf_kind(node.items)))
    item = _walker(node.items, sinks, size, array)

    def walk_array(buf, pos, slot):
        array.present.append(slot)
        out = pos.copy()
        lane = np.arange(len(pos))
        while len(pos):
            count, pos = _varints(buf, pos)
            sized = count < 0
            if sized.any():  # a negative count is followed by the block's size in bytes
                count = np.abs(count)
                if count.min() < 0:  # -2**63 has no absolute value
                    raise CorruptFileError(f"an array of {node.path} has a count out of range")
                pos[sized] = _varints(buf, pos[sized])[1]
            done = count == 0
            if done.any():
                out[lane[done]] = pos[done]
                keep = ~done
                pos, slot, lane, count = pos[keep], slot[keep], lane[keep], count[keep]
            top = int(count.max()) if len(count) else 0
            for j in range(top):
                sel = count > j
                ids = array.new_items(slot[sel])
                if array.count > size:  # an item takes a byte at least: the counts are damaged
                    raise CorruptFileError(f"arrays of {node.path} claim more items than the data has bytes")
                pos[sel] = item(buf, pos[sel], ids)
        return out

    return walk_array


def _leaf_kind(node: _Leaf | _Union) -> str:
    leaf = node if isinstance(node, _Leaf) else node.inner
    assert isinstance(leaf, _Leaf)  # _node puts only unions of a leaf in arrays
    return leaf.kind


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints (Avro int and long) at ``pos``, and the positions after them."""
    first = buf[pos]
    if not len(first) or first.max() < 0x80:  # one byte each: the common case
        v = first.astype(np.int64)
        return (v >> 1) ^ -(v & 1), pos + 1
    window = buf[pos[:, None] + _WINDOW]
    lengths = np.argmin(window >= 0x80, axis=1) + 1
    parts = (window & 0x7F).astype(np.uint64) << _SHIFTS
    parts[lengths[:, None] <= _WINDOW] = 0
    v = np.bitwise_or.reduce(parts, axis=1)
    return ((v >> np.uint64(1)) ^ (np.uint64(0) - (v & np.uint64(1)))).view(np.int64), pos + lengths
