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

import numpy as np

from lakehouse.errors import CorruptFileError
from lakehouse.manifest.avro_columns import Column, Columns, ListColumn
from lakehouse.manifest.entries import DataFileMeta, FileKind, ManifestEntry, SimpleStats

_ENTRY_BYTES = 1200  # memory of one built entry with its file meta and stats, measured (tracemalloc)
_F = "_FILE."
_KINDS = {k.value: k for k in FileKind}


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
        part = columns["_PARTITION"]
        values = part.bytes_of(columns.data, np.arange(columns.rows))
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
            held += len(self._columns.data) + sum(_nbytes(c) for c in self._columns.columns.values())
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
        built = self._built
        return [built[r] for r in rows.tolist()]

    def _build(self, rows: np.ndarray) -> None:
        built = self._built
        todo = np.array([r for r in rows.tolist() if built[r] is None], np.int64)
        if not len(todo):
            return
        # Entries hold no reference cycles, but allocating 100,000s of them sets off the cyclic
        # collector's full passes over the heap, which cost a third of building them.
        collecting = gc.isenabled()
        gc.disable()
        try:
            entries = _entries(self._columns, todo)
        except (KeyError, UnicodeDecodeError) as e:  # a kind or a text the file cannot hold
            raise CorruptFileError(
                f"manifest {self.path} is corrupt: an entry does not decode ({type(e).__name__}: {e}); "
                f"roll back to an earlier snapshot or restore the file"
            ) from None
        finally:
            if collecting:
                gc.enable()
        for r, e in zip(todo.tolist(), entries, strict=True):
            built[r] = e
        self._missing -= len(todo)
        if not self._missing:
            self._columns = None


def _nbytes(c: Column | ListColumn) -> int:
    if isinstance(c, ListColumn):
        return c.present.nbytes + c.offsets.nbytes + _nbytes(c.items)
    return sum(a.nbytes for a in (c.present, c.values, c.starts, c.lengths) if a is not None)


def _entries(c: Columns, rows: np.ndarray) -> list[ManifestEntry]:
    """``ManifestEntry`` of records ``rows``, field for field as ``avro.entry_from`` reads a record."""
    n = len(rows)
    data = c.data

    def ints(path: str) -> list[int | None]:
        return c[path].ints(rows) if path in c else [None] * n

    def blobs(path: str) -> list[bytes | None]:
        return c[path].bytes_of(data, rows) if path in c else [None] * n

    def texts(path: str) -> list[str | None]:
        return [None if b is None else b.decode() for b in blobs(path)]

    def lists(path: str, text: bool = False) -> list[tuple | None]:
        if path not in c:
            return [None] * n
        col: ListColumn = c[path]
        starts, counts = col.offsets[rows], col.offsets[rows + 1] - col.offsets[rows]
        ends = np.cumsum(counts)
        taken = np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if n else 0)
        items = col.items
        values = items.bytes_of(data, taken) if items.values is None else items.ints(taken)
        if text:
            values = [None if v is None else v.decode() for v in values]
        bounds = zip((ends - counts).tolist(), ends.tolist(), col.present[rows].tolist(), strict=True)
        return [tuple(values[a:b]) if p else None for a, b, p in bounds]

    def stats(prefix: str) -> list[SimpleStats]:
        counts = lists(f"{prefix}._NULL_COUNTS")
        return [
            SimpleStats(lo, hi, nulls or ())
            for lo, hi, nulls in zip(
                blobs(f"{prefix}._MIN_VALUES"), blobs(f"{prefix}._MAX_VALUES"), counts, strict=True
            )
        ]

    extra = lists(_F + "_EXTRA_FILES", text=True)
    files = map(
        DataFileMeta,  # its fields in declaration order
        texts(_F + "_FILE_NAME"),
        ints(_F + "_FILE_SIZE"),
        ints(_F + "_ROW_COUNT"),
        blobs(_F + "_MIN_KEY"),
        blobs(_F + "_MAX_KEY"),
        stats(_F + "_KEY_STATS"),
        stats(_F + "_VALUE_STATS"),
        ints(_F + "_MIN_SEQUENCE_NUMBER"),
        ints(_F + "_MAX_SEQUENCE_NUMBER"),
        ints(_F + "_SCHEMA_ID"),
        ints(_F + "_LEVEL"),
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
    kinds = [_KINDS[k] for k in ints("_KIND")]
    return list(
        map(ManifestEntry, kinds, blobs("_PARTITION"), ints("_BUCKET"), ints("_TOTAL_BUCKETS"), files)
    )
