"""FileIO: filesystem access over ``pyarrow.fs`` with the atomic primitives commits rely on.

Paths handed to a ``FileIO`` are in the form its filesystem expects (an absolute OS path for
local files, ``bucket/key`` for object stores), as returned by :meth:`FileIO.for_uri`.

Invariants:
- nothing is ever visible under its final name half-written: files are written under a hidden
  temporary name in the same directory and moved into place (object stores publish a finished
  upload atomically, so they are written in place);
- :meth:`FileIO.try_create` is an atomic create-if-absent on local filesystems (``link(2)``), on
  HDFS (rename never overwrites) and on S3-compatible stores (a conditional put,
  :mod:`lakehouse.io.object_store`). Any other store needs the catalog lock
  (:mod:`lakehouse.io.lock`); without one, a commit there is refused rather than made unsafely;
- listings never follow a symbolic link: a link inside a table (to a directory or a file
  elsewhere) is not listed, so nothing that cleans by listing reaches outside the table.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse.errors import UnsafeCommitError
from lakehouse.io.lock import LOCK_ENABLED, LOCK_URI, CatalogLock, KeyLock
from lakehouse.io.object_store import Bucket, S3Settings
from lakehouse.options import HEADER_PREFIX, REST_CLIENT_OPTIONS

S3_SCHEMES = ("s3", "s3a")
REST_SCHEMES = ("http", "https")
STORAGE_PREFIXES = ("s3.", "fs.s3.", "lock.", "lock-")


def storage_options(options: Mapping[str, str], uri: str | None = None) -> dict[str, str]:
    """The options among ``options`` that say how to reach a warehouse (object-store settings,
    the catalog lock), e.g. of a Spark read, which carries them with its own. With the
    warehouse's ``uri``, an S3 store's settings are resolved (the environment's included), so
    they reach Spark tasks running elsewhere."""
    found = {k: v for k, v in options.items() if k.startswith(STORAGE_PREFIXES)}
    scheme = None if uri is None else uri.partition("://")[0]
    if scheme in S3_SCHEMES:
        found.update(S3Settings.parse(options).to_options())
    if scheme in REST_SCHEMES:  # a REST catalog server: its token and headers too
        found.update(
            {k: v for k, v in options.items() if k in REST_CLIENT_OPTIONS or k.startswith(HEADER_PREFIX)}
        )
    return found


@dataclass(frozen=True)
class FileStatus:
    """One entry of a directory listing."""

    path: str
    size: int
    is_dir: bool
    mtime_ms: int

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


def _nameable(path: str) -> None:
    """Paths are built from names read from metadata: one with a NUL (a damaged file's) names
    no file, and filesystems refuse it with errors of their own."""
    if "\0" in path:
        raise FileNotFoundError(f"no file is named {path!r}")


def _within(read: Callable[[int, int], bytes], size: int) -> Callable[[int, int], bytes]:
    """``read(offset, length)`` of a file of ``size`` bytes asked only for bytes the file has."""

    def clamped(offset: int, length: int) -> bytes:
        n = max(0, min(length, size - offset)) if offset >= 0 else 0
        return read(offset, n) if n else b""

    return clamped


class FileIO:
    """Read, write, list and delete files of one filesystem."""

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        bucket: Bucket | None = None,
        lock: KeyLock | None = None,
    ) -> None:
        self.fs = filesystem
        self.is_local = isinstance(filesystem, pafs.LocalFileSystem)
        self.is_hdfs = type(filesystem).__name__ == "HadoopFileSystem"
        self.bucket = bucket  # an S3 bucket's whole-object requests
        self.lock = lock

    @classmethod
    def for_uri(cls, uri: str, options: Mapping[str, str] | None = None) -> tuple[FileIO, str]:
        """The FileIO and root path of a local path or a ``file://``, ``s3://``, ``hdfs://`` URI;
        ``options``: the catalog's (object-store settings, the catalog lock)."""
        options = options or {}
        lock = CatalogLock.from_options(options)
        if "://" not in uri:
            return cls(pafs.LocalFileSystem(), lock=lock), os.path.abspath(uri)
        scheme, _, rest = uri.partition("://")
        if scheme in S3_SCHEMES:
            settings = S3Settings.parse(options)
            path = rest.rstrip("/")
            return cls(settings.filesystem(), Bucket(path.split("/", 1)[0], settings), lock), path
        filesystem, path = pafs.FileSystem.from_uri(uri)
        return cls(filesystem, lock=lock), path.rstrip("/") or "/"

    def uri(self, path: str) -> str | None:
        """The URI other readers reach the file at ``path`` by (``file://``, ``s3://``), None on
        the stores this engine does not name so."""
        if self.is_local:
            return "file://" + path
        if self.bucket is not None:
            return "s3://" + path
        return None

    @property
    def atomic_create(self) -> bool:
        """Whether :meth:`try_create` is atomic without the catalog lock."""
        return (
            self.is_local
            or self.is_hdfs
            or (self.bucket is not None and self.bucket.settings.conditional_writes)
        )

    # ---- reading ---------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Whether a file exists (on S3 one HEAD request; directories: :meth:`dir_exists`)."""
        if "\0" in path:
            return False  # a name read from a damaged file: no file has it
        if self.bucket is not None:
            return self.bucket.exists(_key(path))
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def dir_exists(self, path: str) -> bool:
        """Whether a directory exists (on object stores: anything is stored under it)."""
        return bool(self.fs.get_file_info(path).type == pafs.FileType.Directory)

    def read_bytes(self, path: str) -> bytes:
        """Read a whole file; raises ``FileNotFoundError`` when it is absent."""
        _nameable(path)
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        if self.bucket is not None:
            return self.bucket.get(_key(path))
        with self.fs.open_input_stream(path) as f:
            data: bytes = f.read()
        return data

    def open_input(self, path: str) -> pa.NativeFile:
        _nameable(path)
        return self.fs.open_input_file(path)

    @contextlib.contextmanager
    def open_ranges(self, path: str) -> Iterator[Callable[[int, int], bytes]]:
        """A ``read(offset, length)`` of one file, for formats read head first, then in pieces.

        Reads return fewer bytes at the end of the file, and none outside it (a negative offset
        or length read from a damaged file allocates nothing); ``FileNotFoundError`` when it is
        absent.
        """
        _nameable(path)
        if self.is_local:
            fd = os.open(path, os.O_RDONLY)
            try:
                yield _within(lambda offset, n: os.pread(fd, n, offset), os.fstat(fd).st_size)
            finally:
                os.close(fd)
        else:
            with self.fs.open_input_file(path) as f:
                yield _within(lambda offset, n: f.read_at(n, offset), f.size())

    def status(self, path: str) -> FileStatus | None:
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        return _status(info)

    def list_dir(self, path: str) -> list[FileStatus]:
        """List a directory's direct children, skipping hidden temporary files and symbolic
        links; [] if absent."""
        if self.is_local:
            return [st for st in _local_children(path) if not st.name.startswith(".")]
        infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [_status(i) for i in infos if not i.base_name.startswith(".")]

    def list_numbered(self, path: str, prefix: str) -> list[int]:
        """Sorted ``N`` of the files named ``<prefix>N`` in a directory (``schema-N``, ``snapshot-N``)."""
        numbers = []
        for st in self.list_dir(path):
            suffix = st.name.removeprefix(prefix)
            if st.name.startswith(prefix) and suffix.isdigit():
                numbers.append(int(suffix))
        return sorted(numbers)

    def list_recursive(self, path: str) -> list[FileStatus]:
        """List every file under a directory, temporary files included, symbolic links neither
        listed nor followed; [] if absent."""
        if self.is_local:
            found, pending = [], [path]
            while pending:
                for st in _local_children(pending.pop()):
                    if st.is_dir:
                        pending.append(st.path)
                    else:
                        found.append(st)
            return found
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=True)
        return [_status(i) for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    # ---- writing ---------------------------------------------------------------------------

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    @contextlib.contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        """Open ``path`` for writing; the file appears under its name only once the block succeeds."""
        if not (self.is_local or self.is_hdfs):
            with self.fs.open_output_stream(path, buffer_size=_BUFFER) as out:
                yield out
            return
        tmp = _temp_name(path)
        try:
            with self._create(tmp) as out:
                yield out
            self.fs.move(tmp, path)
        except BaseException:
            self._discard(tmp)
            raise

    def _create(self, path: str) -> pa.NativeFile:
        """A new output stream, creating the parent directory only when it is missing."""
        try:
            return self.fs.open_output_stream(path, buffer_size=_BUFFER)
        except FileNotFoundError:
            self.mkdirs(_parent(path))
            return self.fs.open_output_stream(path, buffer_size=_BUFFER)

    def publish(self, path: str, data: bytes) -> None:
        """Write a new immutable file of the data side (an index next to a data file) the way
        data files are written: visible under its name only once complete."""
        if self.bucket is not None:
            self.bucket.put(_key(path), data)
            return
        with self.open_output(path) as out:
            out.write(data)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (or atomically replace) a whole metadata file, synced to disk."""
        if self.is_local:
            self.mkdirs(_parent(path))
            tmp = _temp_name(path)
            try:
                _write_synced(tmp, data)
                os.replace(tmp, path)
            except BaseException:
                self._discard(tmp)
                raise
            return
        if self.bucket is not None:
            self.bucket.put(_key(path), data)
            return
        if self.is_hdfs and self.exists(path):
            # HDFS rename does not overwrite: publish the new content, then swap.
            self.delete(path)
        with self.open_output(path) as out:
            out.write(data)

    def try_create(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` unless it exists; True if this call created it.

        Two callers racing for the same path: exactly one gets True. A store without an atomic
        create takes the catalog lock around "absent? then write"; with no lock configured there,
        ``UnsafeCommitError`` (nothing is written).
        """
        if self.is_local:
            self.mkdirs(_parent(path))
            tmp = _temp_name(path)
            try:
                _write_synced(tmp, data)
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                self._discard(tmp)
        if self.bucket is not None and self.bucket.settings.conditional_writes:
            return self.bucket.create(_key(path), data)
        if not self.is_hdfs:
            return self._create_locked(path, data)
        if self.exists(path):
            return False
        tmp = _temp_name(path)
        with self._create(tmp) as out:
            out.write(data)
        try:
            self.fs.move(tmp, path)
            return True
        except OSError:
            if self.exists(path):
                return False
            raise
        finally:
            self._discard(tmp)

    def _create_locked(self, path: str, data: bytes) -> bool:
        if self.lock is None:
            raise UnsafeCommitError(
                f"cannot create {path} atomically on {self.fs.type_name}: two committers could both "
                f"write it and one commit would be lost; nothing was written - set the catalog options "
                f"{LOCK_ENABLED}=true and {LOCK_URI} (sqlite:///path/to/lock.sqlite on one machine, "
                f"postgresql://host/database or mysql://host/database across machines), or use a store "
                f"with conditional writes"
            )
        with self.lock.hold(_parent(path)):
            if self.exists(path):
                return False
            with self.open_output(path) as out:
                out.write(data)
            return True

    # ---- deleting --------------------------------------------------------------------------

    def delete(self, path: str) -> bool:
        """Delete a file; False if it was already gone."""
        try:
            self.fs.delete_file(path)
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> None:
        """Delete a directory and everything in it; nothing if it is absent."""
        if self.dir_exists(path):
            self.fs.delete_dir(path)

    def remove_empty_dirs(self, directories: Iterable[str], stop: str) -> None:
        """Remove each directory, then its parents below ``stop``, while they are empty: what a
        failed write leaves of the directories it created. Local filesystems only (object stores
        have no directories); a directory another writer filled meanwhile stays, and a writer whose
        directory goes before its file creates it again (:meth:`open_output`)."""
        if not self.is_local:
            return
        for directory in sorted(set(directories), key=len, reverse=True):
            while directory.startswith(stop.rstrip("/") + "/"):
                try:
                    os.rmdir(directory)
                except OSError:
                    break
                directory = _parent(directory)

    def delete_quietly(self, paths: list[str]) -> None:
        """Best-effort removal of files a failed operation wrote."""
        for p in paths:
            self._discard(p)

    def _discard(self, path: str) -> None:
        with contextlib.suppress(OSError):
            self.fs.delete_file(path)


_BUFFER = 1 << 20  # coalesce the many small writes of a Parquet writer


def join(*parts: str) -> str:
    """Join path segments with '/' (every pyarrow filesystem accepts it)."""
    return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts) if p)


def _key(path: str) -> str:
    """The object key of a ``bucket/key`` path."""
    return path.split("/", 1)[1]


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _temp_name(path: str) -> str:
    parent, _, name = path.rpartition("/")
    return f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"


def is_temporary(name: str) -> bool:
    """Whether a file name is a temporary name files are written under before they are moved
    into place (what a process killed mid-write leaves behind)."""
    return name.startswith(".") and name.endswith(".tmp")


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _local_children(path: str) -> list[FileStatus]:
    """The entries of a local directory but symbolic links; [] if it is absent."""
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        if e.is_symlink():
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:  # deleted while listing
            continue
        out.append(
            FileStatus(e.path, st.st_size, e.is_dir(follow_symlinks=False), st.st_mtime_ns // 1_000_000)
        )
    return out


def _status(info: pafs.FileInfo) -> FileStatus:
    mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
    return FileStatus(info.path, info.size or 0, info.type == pafs.FileType.Directory, mtime)
