"""One manifest file as planning keeps it: entries by column, ``ManifestEntry`` objects on demand.

A partition-filtered plan of a table of 100,000 files needs a few hundred entries; building the
others' objects (about 8 us each) would cost more than reading the files. So a decoded manifest
keeps its distinct partitions and one partition code per entry, and builds (then keeps) the
entries of the partitions asked for. Once every entry is built, the columns are dropped.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from lakehouse.errors import CorruptFileError
from lakehouse.manifest.avro_columns import Columns, IntColumn, ListColumn, RangeColumn, expect
from lakehouse.manifest.entries import DataFileMeta, FileKind, ManifestEntry, SimpleStats

_ENTRY_BYTES = 1200  # memory of one built entry with its file meta and stats, measured (tracemalloc)
_F = "_FILE."
_KINDS = {k.value: k for k in FileKind}
_Leaf = TypeVar("_Leaf", IntColumn, RangeColumn)


class DecodedManifest:
    """The entries of one manifest file, in file order."""

    def __init__(
        self,
        partitions: list[bytes],
        codes: np.ndarray,
        columns: Columns | None,
        built: list[ManifestEntry | None],
        path: str,
    ) -> None:
        self.partitions = partitions  # distinct, in order of first appearance
        self.codes = codes  # per entry: its partition's index in ``partitions``
        self.path = path  # of the file the columns come from, for errors
        self._columns = columns
        self._built = built
        self._missing = sum(e is None for e in built)
        self._lock = threading.Lock()  # cached manifests are shared by the threads of a process

    @classmethod
    def of_entries(cls, entries: list[ManifestEntry], path: str) -> DecodedManifest:
        """A manifest at ``path`` whose entries are built already (written here, or decoded by
        fastavro)."""
        index: dict[bytes, int] = {}
        codes = np.fromiter(
            (index.setdefault(e.partition, len(index)) for e in entries), np.int32, len(entries)
        )
        return cls(list(index), codes, None, list(entries), path)

    @classmethod
    def of_columns(cls, columns: Columns, path: str) -> DecodedManifest:
        """A manifest decoded column-wise from the file at ``path``; entries are built on demand."""
        try:
            values = _required_bytes(columns, "_PARTITION", np.arange(columns.rows))
        except CorruptFileError as e:
            raise _corrupt(path, e) from None
        index: dict[bytes, int] = {}
        codes = np.fromiter((index.setdefault(p, len(index)) for p in values), np.int32, len(values))
        return cls(list(index), codes, columns, [None] * columns.rows, path)

    def __len__(self) -> int:
        return len(self._built)

    @property
    def nbytes(self) -> int:
        """About the memory this manifest holds (for the cache's bound)."""
        held = self.codes.nbytes + sum(len(p) + 40 for p in self.partitions)
        held += (len(self._built) - self._missing) * _ENTRY_BYTES + 8 * len(self._built)
        if self._columns is not None:
            held += len(self._columns.data) + sum(c.nbytes for c in self._columns.columns.values())
        return held

    def holds(self, f: DataFileMeta) -> bool:
        """Whether ``f`` is the file of one of the entries built so far."""
        return any(e is not None and e.file is f for e in self._built)

    def entries(self, partitions: Callable[[bytes], bool] | None = None) -> list[ManifestEntry]:
        """The entries (in file order) of the partitions ``partitions`` accepts (default all)."""
        if partitions is None:
            rows = np.arange(len(self._built))
        else:
            accepted = np.fromiter(map(partitions, self.partitions), bool, len(self.partitions))
            rows = np.flatnonzero(accepted[self.codes])
        if self._missing:
            with self._lock:
                self._build(rows)
        built = cast(list[ManifestEntry], self._built)  # every entry of ``rows`` is built now
        return [built[r] for r in rows.tolist()]

    def _build(self, rows: np.ndarray) -> None:
        built = self._built
        todo = np.array([r for r in rows.tolist() if built[r] is None], np.int64)
        if not len(todo):
            return
        assert self._columns is not None  # dropped only once every entry is built
        # Entries hold no reference cycles, but allocating 100,000s of them sets off the cyclic
        # collector's full passes over the heap, which cost a third of building them.
        collecting = gc.isenabled()
        gc.disable()
        try:
            entries = _entries(self._columns, todo)
        except (KeyError, UnicodeDecodeError, CorruptFileError) as e:  # a kind, text, field it cannot hold
            raise _corrupt(self.path, e) from None
        finally:
            if collecting:
                gc.enable()
        for r, entry in zip(todo.tolist(), entries, strict=True):
            built[r] = entry
        self._missing -= len(todo)
        if not self._missing:
            self._columns = None


def _corrupt(path: str, e: Exception) -> CorruptFileError:
    return CorruptFileError(
        f"manifest {path} is corrupt: an entry does not decode ({type(e).__name__}: {e}); "
        f"roll back to an earlier snapshot or restore the file"
    )


def _required(column: _Leaf | None, path: str) -> _Leaf:
    """``column`` of a field every entry has (a non-null type in Paimon's schema)."""
    if column is None or not column.present.all():
        raise CorruptFileError(f"its field {path} is missing or null")
    return column


def _required_bytes(c: Columns, path: str, rows: np.ndarray) -> list[bytes]:
    values = _required(c.get(path, RangeColumn), path).bytes_of(c.data, rows)
    return cast(list[bytes], values)  # _required: every value is present


def _entries(c: Columns, rows: np.ndarray) -> list[ManifestEntry]:
    """``ManifestEntry`` of records ``rows``, field for field as ``avro.entry_from`` reads a record."""
    n = len(rows)
    data = c.data

    def ints(path: str) -> list[int | None]:
        col = c.get(path, IntColumn)
        return [None] * n if col is None else col.ints(rows)

    def blobs(path: str) -> list[bytes | None]:
        col = c.get(path, RangeColumn)
        return [None] * n if col is None else col.bytes_of(data, rows)

    def texts(path: str) -> list[str | None]:
        return [None if b is None else b.decode() for b in blobs(path)]

    def required_ints(path: str) -> list[int]:
        return _required(c.get(path, IntColumn), path).values[rows].tolist()

    def required_blobs(path: str) -> list[bytes]:
        return _required_bytes(c, path, rows)

    def required_texts(path: str) -> list[str]:
        return [b.decode() for b in required_blobs(path)]

    def lists(path: str, text: bool = False) -> list[tuple | None]:
        col = c.get(path, ListColumn)
        if col is None:
            return [None] * n
        starts, counts = col.offsets[rows], col.offsets[rows + 1] - col.offsets[rows]
        ends = np.cumsum(counts)
        taken = np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if n else 0)
        values: list[Any]
        if text:
            items = expect(col.items, RangeColumn, path).bytes_of(data, taken)
            values = [None if v is None else v.decode() for v in items]
        else:
            values = expect(col.items, IntColumn, path).ints(taken)
        bounds = zip((ends - counts).tolist(), ends.tolist(), col.present[rows].tolist(), strict=True)
        return [tuple(values[a:b]) if p else None for a, b, p in bounds]

    def stats(prefix: str) -> list[SimpleStats]:
        counts = lists(f"{prefix}._NULL_COUNTS")
        return [
            SimpleStats(lo, hi, nulls or ())
            for lo, hi, nulls in zip(
                required_blobs(f"{prefix}._MIN_VALUES"),
                required_blobs(f"{prefix}._MAX_VALUES"),
                counts,
                strict=True,
            )
        ]

    extra = lists(_F + "_EXTRA_FILES", text=True)
    files = map(
        DataFileMeta,  # its fields in declaration order
        required_texts(_F + "_FILE_NAME"),
        required_ints(_F + "_FILE_SIZE"),
        required_ints(_F + "_ROW_COUNT"),
        required_blobs(_F + "_MIN_KEY"),
        required_blobs(_F + "_MAX_KEY"),
        stats(_F + "_KEY_STATS"),
        stats(_F + "_VALUE_STATS"),
        required_ints(_F + "_MIN_SEQUENCE_NUMBER"),
        required_ints(_F + "_MAX_SEQUENCE_NUMBER"),
        required_ints(_F + "_SCHEMA_ID"),
        required_ints(_F + "_LEVEL"),
        [x or () for x in extra],
        ints(_F + "_CREATION_TIME"),
        ints(_F + "_DELETE_ROW_COUNT"),
        blobs(_F + "_EMBEDDED_FILE_INDEX"),
        ints(_F + "_FILE_SOURCE"),
        lists(_F + "_VALUE_STATS_COLS", text=True),
        texts(_F + "_EXTERNAL_PATH"),
        ints(_F + "_FIRST_ROW_ID"),
        lists(_F + "_WRITE_COLS", text=True),
        lists(_F + "_WRITE_COLS_SEQUENCES"),
    )
    kinds = [_KINDS[k] for k in required_ints("_KIND")]
    return list(
        map(
            ManifestEntry,
            kinds,
            required_blobs("_PARTITION"),
            required_ints("_BUCKET"),
            required_ints("_TOTAL_BUCKETS"),
            files,
        )
    )
