"""Write scopes: one id in the name of every file a write creates, so that ending the write finds
its files by listing, even those no writer reported.

A write - ``table.write``, a Spark job with all its task attempts, the processes of a two-phase
write - has one id, and each of its writers names its data, changelog, index and file-index files
``<prefix><write id>-<writer>-<n><suffix>`` (:meth:`WriteScope.namer`), its writer token unique
within the write. :func:`abort_write` deletes every file of the write in the table's bucket and
index directories; a caller that cannot know whether the write was committed (Spark may abort
after a commit) keeps what snapshots after the write's start reference (:func:`committed_since`).

Writers in other processes (Spark tasks) hold a :class:`Lease` while they write: the file
``_writes/<write id>/<writer>`` in the table, rewritten every ``write.heartbeat-interval``, set to
``done`` once the writer returned its commit messages, deleted once a failed writer deleted its
files itself. Before listing, ending a leased write publishes ``_writes/<write id>/ENDED`` and
waits until every lease is done, deleted or stale (unchanged for ``write.heartbeat-timeout``:
its process is gone). A writer checks for ``ENDED`` right after creating its lease and at every
heartbeat, and once it saw it raises :class:`WriteAbortedError` instead of naming another file;
so a writer that starts late either sees the marker or is waited for.

The window that remains: a writer whose lease looked stale while it still ran (stalled for longer
than the timeout) can finish a file after the listing. No snapshot references such a file, so
nothing ever reads it, and ``remove_orphan_files`` deletes files of aborted writes whatever their
age. An aborted leased write leaves only its ``ENDED`` marker (for such late writers), which
orphan cleanup removes once it is older than its threshold.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidArgumentError, WriteAbortedError
from lakehouse.io.fs import FileIO, FileStatus, is_temporary, join
from lakehouse.options import WRITE_HEARTBEAT_INTERVAL, WRITE_HEARTBEAT_TIMEOUT, parse_duration_ms
from lakehouse.paths import FileNamer, TablePaths, bucket_dirs
from lakehouse.store.references import References, delete_paths

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

SCOPES_DIR = "_writes"
ENDED = "ENDED"
ABORTED = b"aborted"
COMMITTED = b"committed"
DONE = b"done"
DEFAULT_INTERVAL_MS = 2_000
DEFAULT_TIMEOUT_MS = 30_000
log = logging.getLogger(__name__)
POLL_MS = 200  # an ending write looks at its leases at least every POLL_MS / 2


@dataclass(frozen=True)
class WriteScope:
    """The id every file of one write carries, and how the leases of its writers are kept.

    ``leased``: writers in other processes take leases, so ending the write waits for them.
    """

    write_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    leased: bool = False
    heartbeat_ms: int = DEFAULT_INTERVAL_MS
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    @classmethod
    def leased_from(cls, options: Mapping[str, str]) -> WriteScope:
        """A new leased scope, its timing from ``write.heartbeat-interval`` and
        ``write.heartbeat-timeout`` in ``options`` (write options over table options)."""
        interval = parse_duration_ms(options.get(WRITE_HEARTBEAT_INTERVAL) or f"{DEFAULT_INTERVAL_MS} ms")
        timeout = parse_duration_ms(options.get(WRITE_HEARTBEAT_TIMEOUT) or f"{DEFAULT_TIMEOUT_MS} ms")
        if not 0 < interval < timeout:
            raise InvalidArgumentError(
                f"{WRITE_HEARTBEAT_INTERVAL} ({interval} ms) must be positive and shorter than "
                f"{WRITE_HEARTBEAT_TIMEOUT} ({timeout} ms), or a live writer would look dead; fix the options"
            )
        return cls(leased=True, heartbeat_ms=interval, timeout_ms=timeout)

    def namer(self, writer: str | None = None, guard: Lease | None = None) -> FileNamer:
        """The file names of one writer of this write; ``writer`` is a token unique within the
        write (letters and digits, default random), ``guard`` the writer's lease."""
        token = writer or uuid.uuid4().hex[:8]
        if not token.isalnum():
            raise InvalidArgumentError(f"writer token {token!r} must be letters and digits only")
        return FileNamer("", uid=f"{self.write_id}-{token}", guard=guard.check if guard else None)

    def directory(self, paths: TablePaths) -> str:
        """Where the write's leases and its ``ENDED`` marker live."""
        return join(paths.root, SCOPES_DIR, self.write_id)


class Lease:
    """A writer's claim, renewed by a background thread, that it may still create files of a write."""

    def __init__(self, table: TableStore, scope: WriteScope, writer: str) -> None:
        self.io = table.io
        self.table_name = table.name
        self.scope = scope
        self.writer = writer
        directory = scope.directory(table.paths)
        self.path = join(directory, writer)
        self.marker = join(directory, ENDED)
        self.ended = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> Lease:
        """Take the lease; raises :class:`WriteAbortedError` if the write has already ended."""
        self.io.write_bytes(self.path, b"0")
        if self.io.exists(self.marker):
            self.io.delete(self.path)
            self.ended = True
            self.check()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.writer}", daemon=True)
        self._thread.start()
        return self

    def check(self) -> None:
        """Raise :class:`WriteAbortedError` once the write has ended (called before each new file)."""
        if self.ended:
            raise WriteAbortedError(
                f"write {self.scope.write_id} to table {self.table_name} has ended without writer "
                f"{self.writer} (aborted, or committed without it); the writer stops and deletes its "
                f"files - nothing it wrote is committed"
            )

    def finish(self) -> None:
        """Mark the writer done: its files are in the commit messages it returned."""
        self._halt()
        self.io.write_bytes(self.path, DONE)

    def release(self) -> None:
        """Give the lease up once the writer deleted its own files (it failed)."""
        self._halt()
        self.io.delete(self.path)

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        beats = itertools.count(1)
        while not self._stop.wait(self.scope.heartbeat_ms / 1000):
            try:
                self.ended = self.ended or self.io.exists(self.marker)
                self.io.write_bytes(self.path, str(next(beats)).encode())
            except OSError:
                pass  # a missed renewal only makes the lease look older; the next beat retries


def abort_write(table: TableStore, scope: WriteScope, keep: Collection[str] = ()) -> list[str]:
    """End a write that will not be committed: once none of its writers can still create files,
    delete every file of it but the paths in ``keep``. Returns the paths deleted."""
    directory = scope.directory(table.paths)
    if scope.leased:
        table.io.write_bytes(join(directory, ENDED), ABORTED)
        _await_writers(table.io, directory, scope)
    kept = set(keep)
    doomed = [p for p in write_files(table, scope.write_id) if p not in kept]
    delete_paths(table.io, doomed)
    table.io.remove_empty_dirs(data_dirs(table, doomed), table.paths.root)
    if scope.leased:
        left = [st.path for st in table.io.list_recursive(directory) if is_temporary(st.name)]
        delete_paths(table.io, [*(st.path for st in _leases(table.io, directory)), *left])
    return doomed


def finish_write(table: TableStore, scope: WriteScope, committed_writers: Collection[str]) -> list[str]:
    """After a leased write committed: wait for the writers whose files were not committed (a
    crashed attempt, a lost speculative one), delete their files and the write's leases.
    Returns the paths deleted. Never raises - the write is committed; what a failure here leaves
    behind is orphan cleanup's."""
    io, directory = table.io, scope.directory(table.paths)
    doomed: list[str] = []
    try:
        stragglers = [st.name for st in _leases(io, directory) if st.name not in committed_writers]
        if stragglers:
            io.write_bytes(join(directory, ENDED), COMMITTED)
            _await_writers(io, directory, scope, stragglers)
            doomed = [p for w in stragglers for p in write_files(table, f"{scope.write_id}-{w}-")]
            delete_paths(io, doomed)
        io.delete_dir(directory)  # the leases, and the temporary files of renewals a kill cut short
    except Exception:
        log.warning(
            "table %s: write %s is committed; deleting the files of its writers that were not committed "
            "failed (remove_orphan_files deletes them)",
            table.name,
            scope.write_id,
            exc_info=True,
        )
    return doomed


def write_files(table: TableStore, marker: str) -> list[str]:
    """Files in the table's bucket and index directories whose names contain ``marker`` (a write
    id, or a write id and writer token), temporary files included."""
    io, paths = table.io, table.paths
    directories = [paths.index_dir, *bucket_dirs(io, paths.root, len(table.schema.partition_keys))]
    return [st.path for d in directories for st in io.list_recursive(d) if marker in st.name]


def data_dirs(table: TableStore, paths: Iterable[str]) -> set[str]:
    """The bucket directories of those of ``paths`` that are data files (not index files)."""
    index_dir = table.paths.index_dir + "/"
    return {p.rsplit("/", 1)[0] for p in paths if not p.startswith(index_dir)}


def aborted_writes(io: FileIO, paths: TablePaths) -> list[str]:
    """Ids of the writes whose ``ENDED`` marker says they were aborted."""
    found = []
    for st in io.list_dir(join(paths.root, SCOPES_DIR)):
        try:
            if st.is_dir and io.read_bytes(join(st.path, ENDED)) == ABORTED:
                found.append(st.name)
        except FileNotFoundError:
            continue
    return found


def _await_writers(
    io: FileIO, directory: str, scope: WriteScope, only: Collection[str] | None = None
) -> None:
    """Return once no writer (of ``only``) can still create files: each lease done, deleted, or
    unchanged for the timeout."""
    first_seen: dict[str, tuple[bytes, float]] = {}
    while True:
        now = time.monotonic()
        running = False
        for st in _leases(io, directory):
            if only is not None and st.name not in only:
                continue
            try:
                state = io.read_bytes(st.path)
            except FileNotFoundError:
                continue
            if state == DONE:
                continue
            seen = first_seen.get(st.name)
            if seen is None or seen[0] != state:
                first_seen[st.name] = (state, now)
                running = True
            elif (now - seen[1]) * 1000 < scope.timeout_ms:
                running = True
        if not running:
            return
        time.sleep(min(scope.heartbeat_ms, POLL_MS) / 2000)


def _leases(io: FileIO, directory: str) -> list[FileStatus]:
    """The writers' leases in a write's directory: neither its ``ENDED`` marker nor the temporary
    file of a renewal that its writer was killed in the middle of (listings hide those)."""
    return [st for st in io.list_dir(directory) if st.name != ENDED]


def committed_since(table: TableStore, base_snapshot: int | None) -> set[str]:
    """Every file a snapshot after ``base_snapshot`` references: what an abort whose caller cannot
    know whether the write was committed must keep (none when there is no such snapshot)."""
    snapshots = table.snapshots
    later = [sid for sid in snapshots.snapshot_ids() if base_snapshot is None or sid > base_snapshot]
    if not later:
        return set()
    return References(table).of_removed([snapshots.snapshot(sid) for sid in later]).all()


@dataclass(frozen=True)
class LeasedWrite:
    """A write whose writers run in other processes: its leased scope and the latest snapshot when
    it started (an abort keeps what later snapshots reference). Picklable: the writers take it
    along; each writes under :meth:`lease`, the one that commits calls :meth:`finish` or
    :meth:`abort`."""

    table: TableStore
    scope: WriteScope
    base_snapshot: int | None

    @classmethod
    def start(cls, table: TableStore) -> LeasedWrite:
        """A new leased write; its heartbeat timing from the table's (dynamic) options."""
        return cls(table, WriteScope.leased_from(table.schema.options), table.latest_snapshot_id())

    def of(self, write_id: str, base_snapshot: int | None) -> LeasedWrite:
        """The same kind of write, started at ``base_snapshot`` under id ``write_id`` (that of the
        writers being committed, when another instance started them)."""
        return LeasedWrite(self.table, replace(self.scope, write_id=write_id), base_snapshot)

    def lease(self, writer: str) -> Lease:
        """Take writer ``writer``'s lease (a token unique within the write: letters and digits)."""
        return Lease(self.table, self.scope, writer).acquire()

    def names(self, writer: str, lease: Lease) -> FileNamer:
        """The file names of writer ``writer`` while it holds ``lease``."""
        return self.scope.namer(writer, lease)

    def finish(self, committed_writers: Collection[str]) -> list[str]:
        """After the commit: delete the files of writers that were not committed (see
        :func:`finish_write`)."""
        return finish_write(self.table, self.scope, committed_writers)

    def abort(self) -> list[str]:
        """Delete every file of the write, once none of its writers can still create one; what a
        snapshot after its start references stays (its commit may have landed)."""
        return abort_write(self.table, self.scope, committed_since(self.table, self.base_snapshot))
