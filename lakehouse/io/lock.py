"""The catalog lock: commits on a store that cannot create a file atomically go through it.

Enabled by the catalog options ``lock.enabled=true`` and ``lock.uri``, a database every committer
reaches:

- ``sqlite:///path/lock.sqlite`` (the default, ``~/.lakehouse/catalog-lock.sqlite``): a
  ``BEGIN IMMEDIATE`` transaction on a file of one machine's disk, so every committing process
  must run there (in Spark only the driver commits);
- ``postgresql://host:5432/db`` (or ``jdbc:postgresql://...``): a session advisory lock;
- ``mysql://host:3306/db`` (or ``jdbc:mysql://...``): a named lock (``GET_LOCK``).

Credentials come from the URL (``user:password@host`` or ``?user=&password=``) or the options
``lock.user`` and ``lock.password``; PostgreSQL needs ``pip install 'lakehouse[postgres]'``
(psycopg), MySQL ``'lakehouse[mysql]'`` (PyMySQL). On a server, each table's commits take their
own lock, so commits to different tables never wait for each other. ``lock-acquire-timeout``
(Paimon's name, default 8 min) bounds the wait. Every lock belongs to a database connection: a
committer that dies releases it with its connection, so no lock outlives its holder.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import importlib
import math
import os
import re
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from lakehouse.errors import CommitConflictError, InvalidOptionError, MissingExtraError
from lakehouse.options import LOCK_PASSWORD, parse_bool, parse_duration_ms

LOCK_ENABLED = "lock.enabled"
LOCK_URI = "lock.uri"
LOCK_USER = "lock.user"
LOCK_ACQUIRE_TIMEOUT = "lock-acquire-timeout"
DEFAULT_TIMEOUT = "8 min"
CONNECT_TIMEOUT_S = 30


class KeyLock(Protocol):
    """What ``FileIO`` takes around a create-if-absent on a store without an atomic one."""

    def hold(self, key: str) -> contextlib.AbstractContextManager[None]: ...


class ProcessLock:
    """Mutual exclusion of the threads of this process only, one lock per key: enough where one
    process commits to the warehouse (a REST catalog server), no database needed."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks[key]
        with lock:
            yield


class LockKind(enum.Enum):
    """The database behind the lock."""

    SQLITE = "sqlite"
    POSTGRES = "postgresql"
    MYSQL = "mysql"


SCHEMES = {"sqlite": LockKind.SQLITE, "postgresql": LockKind.POSTGRES, "postgres": LockKind.POSTGRES,
           "mysql": LockKind.MYSQL}  # fmt: skip
DEFAULT_PORTS = {LockKind.POSTGRES: 5432, LockKind.MYSQL: 3306}
DRIVERS = {LockKind.POSTGRES: ("psycopg", "postgres"), LockKind.MYSQL: ("pymysql", "mysql")}  # module, extra


@dataclass(frozen=True)
class Server:
    """Where a server lock's database is, and who connects."""

    host: str
    port: int
    database: str
    user: str | None
    password: str | None


def default_uri() -> str:
    return "sqlite://" + str(Path.home() / ".lakehouse" / "catalog-lock.sqlite")


@dataclass(frozen=True)
class CatalogLock:
    """Mutual exclusion of committers across processes and machines, held in a database."""

    uri: str  # as messages show it: without a password
    kind: LockKind
    timeout_ms: int
    path: str = ""  # SQLite: the database file
    server: Server | None = None  # PostgreSQL, MySQL

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CatalogLock | None:
        """The lock the catalog options configure; None unless ``lock.enabled`` is true."""
        if not parse_bool(options.get(LOCK_ENABLED, "false"), LOCK_ENABLED):
            return None
        uri = options.get(LOCK_URI) or default_uri()
        timeout = parse_duration_ms(options.get(LOCK_ACQUIRE_TIMEOUT, DEFAULT_TIMEOUT), LOCK_ACQUIRE_TIMEOUT)
        parts = urlsplit(uri.removeprefix("jdbc:"))
        kind = SCHEMES.get(parts.scheme)
        shown = _without_password(uri)
        if kind is None or (kind is LockKind.SQLITE and not parts.path):
            raise InvalidOptionError(
                f"{LOCK_URI}={shown!r}: use sqlite:///path/to/lock.sqlite, postgresql://host:5432/database "
                "or mysql://host:3306/database"
            )
        if kind is LockKind.SQLITE:
            return cls(shown, kind, timeout, path=unquote(parts.path))
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        server = Server(
            host=parts.hostname or "localhost",
            port=parts.port or DEFAULT_PORTS[kind],
            database=parts.path.lstrip("/"),
            user=options.get(LOCK_USER) or unquote(parts.username or "") or query.get("user"),
            password=options.get(LOCK_PASSWORD) or unquote(parts.password or "") or query.get("password"),
        )
        if not server.database:
            raise InvalidOptionError(
                f"{LOCK_URI}={shown!r}: name the database, e.g. {parts.scheme}://host/lakehouse"
            )
        return cls(shown, kind, timeout, server=server)

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the lock of ``key`` (on a server; SQLite has one lock) for the block;
        ``CommitConflictError`` after the timeout."""
        hold = {LockKind.SQLITE: self._sqlite, LockKind.POSTGRES: self._postgres, LockKind.MYSQL: self._mysql}
        with hold[self.kind](key):
            yield

    @contextlib.contextmanager
    def _sqlite(self, key: str) -> Iterator[None]:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout_ms / 1000, isolation_level=None)
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

    @contextlib.contextmanager
    def _postgres(self, key: str) -> Iterator[None]:
        psycopg = self._driver()
        s = self._server()
        conn = self._connected(
            psycopg.Error,
            lambda: psycopg.connect(
                host=s.host,
                port=s.port,
                dbname=s.database,
                user=s.user,
                password=s.password,
                connect_timeout=CONNECT_TIMEOUT_S,
                autocommit=True,
            ),  # fmt: skip
        )
        lock_id = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
        with conn:
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(self.timeout_ms, 1)}ms",))
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (lock_id,))
            except psycopg.errors.LockNotAvailable as e:
                raise self._timed_out(e) from e
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))

    @contextlib.contextmanager
    def _mysql(self, key: str) -> Iterator[None]:
        pymysql = self._driver()
        s = self._server()
        conn = self._connected(
            pymysql.Error,
            lambda: pymysql.connect(
                host=s.host,
                port=s.port,
                database=s.database,
                user=s.user,
                password=s.password or "",
                connect_timeout=CONNECT_TIMEOUT_S,
                autocommit=True,
            ),  # fmt: skip
        )
        name = "lakehouse:" + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()  # at most 64 chars
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT GET_LOCK(%s, %s)", (name, math.ceil(self.timeout_ms / 1000)))
                if cursor.fetchone()[0] != 1:
                    raise self._timed_out("GET_LOCK timed out")
                try:
                    yield
                finally:
                    cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
        finally:
            conn.close()

    def _server(self) -> Server:
        assert self.server is not None  # from_options gives every server kind one
        return self.server

    def _driver(self) -> ModuleType:
        module, extra = DRIVERS[self.kind]
        try:
            return importlib.import_module(module)
        except ImportError as e:
            raise MissingExtraError(f"the catalog lock {LOCK_URI}={self.uri!r}", extra, e) from e

    def _connected(self, error: type[Exception], connect):
        try:
            return connect()
        except error as e:
            raise CommitConflictError(
                f"could not reach the catalog lock's database at {self.uri} ({e}); nothing was committed - "
                f"check {LOCK_URI} and its credentials ({LOCK_USER}, {LOCK_PASSWORD}), then retry"
            ) from e

    def _timed_out(self, cause: object) -> CommitConflictError:
        return CommitConflictError(
            f"could not take the catalog lock at {self.uri} within {self.timeout_ms} ms ({cause}); another "
            f"committer holds it - retry, or raise {LOCK_ACQUIRE_TIMEOUT}"
        )


def _without_password(uri: str) -> str:
    """``uri`` with the password of its user part and of its query replaced by ``***``."""
    parts = urlsplit(uri.removeprefix("jdbc:"))
    if parts.password:
        uri = uri.replace(f":{parts.password}@", ":***@", 1)
    return re.sub(r"([?&;]password=)[^&;]*", r"\1***", uri)
