"""The catalog lock: commits on a store that cannot create a file atomically go through it.

Enabled by the catalog options ``lock.enabled=true`` (and ``lock.uri``, default a SQLite file
``~/.lakehouse/catalog-lock.sqlite``); ``lock-acquire-timeout`` (Paimon's name, default 8 min)
bounds the wait. The lock is a database transaction, ``BEGIN IMMEDIATE`` on a SQLite file, so every
committing process must reach that file on one machine's disk (in Spark only the driver commits).
A committer that dies releases the lock with its connection: no lock outlives its holder.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import CommitConflictError, InvalidOptionError
from lakehouse.options import parse_bool, parse_duration_ms

LOCK_ENABLED = "lock.enabled"
LOCK_URI = "lock.uri"
LOCK_ACQUIRE_TIMEOUT = "lock-acquire-timeout"
DEFAULT_TIMEOUT = "8 min"
SQLITE = "sqlite://"


def default_uri() -> str:
    return SQLITE + str(Path.home() / ".lakehouse" / "catalog-lock.sqlite")


@dataclass(frozen=True)
class CatalogLock:
    """Mutual exclusion of committers across processes, backed by a SQLite database."""

    uri: str
    timeout_ms: int

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CatalogLock | None:
        """The lock the catalog options configure; None unless ``lock.enabled`` is true."""
        if not parse_bool(options.get(LOCK_ENABLED, "false"), LOCK_ENABLED):
            return None
        uri = options.get(LOCK_URI) or default_uri()
        if not uri.startswith(SQLITE):
            raise InvalidOptionError(f"{LOCK_URI}={uri!r}: use sqlite:///path/to/lock.sqlite")
        timeout = parse_duration_ms(options.get(LOCK_ACQUIRE_TIMEOUT, DEFAULT_TIMEOUT), LOCK_ACQUIRE_TIMEOUT)
        return cls(uri, timeout)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the block; ``CommitConflictError`` after the timeout."""
        path = self.uri.removeprefix(SQLITE)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        conn = sqlite3.connect(path, timeout=self.timeout_ms / 1000, isolation_level=None)
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise self._timed_out(e) from e
            try:
                yield
            finally:
                conn.execute("ROLLBACK")
        finally:
            conn.close()

    def _timed_out(self, cause: Exception) -> CommitConflictError:
        return CommitConflictError(
            f"could not take the catalog lock at {self.uri} within {self.timeout_ms} ms ({cause}); another "
            f"committer holds it - retry, or raise {LOCK_ACQUIRE_TIMEOUT}"
        )
