"""Deterministic crash points: a process that SIGKILLs itself at the N-th mutating file-system
operation of the engine.

:func:`install` wraps, in the calling process only, what ``lakehouse/io/fs.py`` mutates files
with - the ``pyarrow.fs`` filesystem of every new ``FileIO`` (create, write, move, delete,
mkdir), its synced metadata writes and its ``os.replace`` / ``os.link`` - and counts each
operation that changes the disk. Between two counted operations lies every distinct crash state:
a kill at operation N leaves the disk exactly as the first N operations made it. A kill at a
write leaves half of that write's bytes in the file (flushed), at the 1st, 2nd, 4th, 8th ...
write of a stream. Nothing in ``lakehouse/`` knows about this.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import SimpleNamespace

import lakehouse.io.fs as fs_module
from lakehouse.io import cores
from lakehouse.io.fs import FileIO


class KillSwitch:
    """Counts mutating operations; SIGKILLs this process at operation ``kill_at`` (1-based).

    ``phase`` labels the operations counted from now on (e.g. ``write``, ``commit``);
    ``on_kill`` is called with a description of the fatal operation just before the kill.
    """

    def __init__(self, kill_at: int | None = None, on_kill: Callable[[str], None] | None = None) -> None:
        self.kill_at = kill_at
        self.on_kill = on_kill
        self.count = 0
        self.phase = ""
        self.phases: list[str] = []  # the phase of each counted operation
        self._lock = threading.Lock()

    def reset(self, kill_at: int | None = None) -> None:
        with self._lock:
            self.kill_at, self.count, self.phases = kill_at, 0, []

    def hit(self, what: str, path: str, partial: Callable[[], None] | None = None) -> None:
        """Count an operation on ``path``: one that just took effect, or with ``partial`` one
        about to happen, of which ``partial`` does the part that gets out before death. At the
        kill point, die."""
        with self._lock:
            self.count += 1
            self.phases.append(self.phase)
            fatal = self.count == self.kill_at
        if not fatal:
            return
        if partial is not None:
            partial()
        if self.on_kill is not None:
            self.on_kill(f"{self.phase} {what} {os.path.basename(path)}")
        os.kill(os.getpid(), signal.SIGKILL)


def install(switch: KillSwitch) -> None:
    """Count (and kill at) the mutating file-system operations of every ``FileIO`` created from
    now on in this process; for child processes that end with their test."""
    init = FileIO.__init__

    def counting_init(self: FileIO, filesystem, *args, **kwargs) -> None:
        init(self, filesystem, *args, **kwargs)
        self.fs = _CountingFileSystem(self.fs, switch)

    FileIO.__init__ = counting_init
    synced = fs_module._write_synced

    def write_synced(path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            switch.hit("create", path)
            switch.hit("write", path, partial=lambda: _flushed(f, data[: len(data) // 2]))
        synced(path, data)

    def replace(src: str, dst: str) -> None:
        os.replace(src, dst)
        switch.hit("rename", dst)

    def link(src: str, dst: str) -> None:
        os.link(src, dst)
        switch.hit("link", dst)

    fs_module._write_synced = write_synced
    fs_module.os = SimpleNamespace(**{**vars(os), "replace": replace, "link": link})
    # threads of map_parallel would shuffle which operation is the N-th
    os.environ[cores.THREADS_ENV] = "1"
    cores.usable_cores.cache_clear()


def _flushed(f, data: bytes) -> None:
    f.write(data)
    f.flush()


class _CountingFileSystem:
    """A ``pyarrow.fs`` filesystem whose mutating calls go through a :class:`KillSwitch`."""

    def __init__(self, fs, switch: KillSwitch) -> None:
        self._fs = fs
        self._switch = switch

    def __getattr__(self, name: str):
        return getattr(self._fs, name)

    def open_output_stream(self, path: str, *args, **kwargs):
        stream = self._fs.open_output_stream(path, *args, **kwargs)
        self._switch.hit("create", path)
        return _CountingStream(stream, path, self._switch)

    def move(self, src: str, dst: str) -> None:
        self._fs.move(src, dst)
        self._switch.hit("rename", dst)

    def delete_file(self, path: str) -> None:
        self._fs.delete_file(path)  # raises FileNotFoundError when absent: nothing changed
        self._switch.hit("delete", path)

    def delete_dir(self, path: str) -> None:
        self._fs.delete_dir(path)
        self._switch.hit("delete", path)

    def create_dir(self, path: str, *args, **kwargs) -> None:
        existed = os.path.isdir(path)
        self._fs.create_dir(path, *args, **kwargs)
        if not existed:
            self._switch.hit("mkdir", path)


class _CountingStream:
    """An output stream whose 1st, 2nd, 4th ... writes are crash points (half written, flushed)."""

    def __init__(self, stream, path: str, switch: KillSwitch) -> None:
        self._stream = stream
        self._path = path
        self._switch = switch
        self._writes = 0

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def __enter__(self) -> _CountingStream:
        return self

    def __exit__(self, *exc) -> None:
        self._stream.close()

    def write(self, data) -> int:
        self._writes += 1
        if self._writes & (self._writes - 1) == 0:
            view = memoryview(data)
            self._switch.hit("write", self._path, partial=lambda: self._partial(view[: len(view) // 2]))
        return self._stream.write(data)

    def _partial(self, data: memoryview) -> None:
        self._stream.write(data)
        self._stream.flush()
