"""Database servers on loopback for the catalog lock's tests, each a new instance in a temporary
directory that nothing else uses, stopped and deleted afterwards:

- PostgreSQL (``make test``): the machine's binaries (Debian's ``/usr/lib/postgresql/<v>/bin`` or
  ``PATH``), else those of the ``pgserver`` wheel (a development dependency);
- MariaDB, for the MySQL lock (``make e2e``, which installs Debian's ``mariadb-server``).

Neither runs as root: as root, the servers run as ``nobody``."""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

from lakehouse.spark.loopback import LOOPBACK, free_port, stop_groups, wait_until


class DatabaseServer(ABC):
    """``with Server() as db``: a server for the catalog lock at :attr:`uri`."""

    name = "database"

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"lakehouse-{self.name}-"))
        self.process: subprocess.Popen | None = None
        self.user = "nobody" if os.geteuid() == 0 else None

    @property
    @abstractmethod
    def uri(self) -> str:
        """The catalog lock's ``lock.uri`` for this server."""

    @abstractmethod
    def commands(self, data: Path) -> tuple[list, list]:
        """The command creating the instance in ``data`` and the one serving it."""

    @abstractmethod
    def serves(self) -> bool:
        """Whether the server answers a connection."""

    def start(self, timeout_s: float = 60) -> DatabaseServer:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        create, serve = self.commands(self.root / "data")
        log = self.root / "server.log"
        with log.open("wb") as out:
            subprocess.run(create, user=self.user, stdout=out, stderr=subprocess.STDOUT, check=True)
            self.process = subprocess.Popen(
                serve, user=self.user, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            wait_until(self.serves, [self.process], timeout_s, f"{self.name} did not start; see {log}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_groups([self.process])
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> DatabaseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PostgresServer(DatabaseServer):
    """PostgreSQL with trust authentication; the lock uses its database ``postgres``."""

    name = "postgres"

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/postgres"

    def commands(self, data: Path) -> tuple[list, list]:
        bin_dir = postgres_binaries()
        create = [bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        serve = [bin_dir / "postgres", "-D", data, "-h", LOOPBACK, "-p", str(self.port), "-k", self.root,
                 "-c", "fsync=off"]  # fmt: skip
        return create, serve

    def serves(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.uri, connect_timeout=2).close()
            return True
        except psycopg.OperationalError:  # not listening, or still starting up
            return False


def postgres_binaries() -> Path:
    """The directory holding ``initdb`` and ``postgres``."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if shutil.which("initdb"):
        candidates.append(str(Path(shutil.which("initdb")).resolve().parent))
    wheel = importlib.util.find_spec("pgserver")
    if wheel is not None and wheel.origin:
        candidates.append(str(Path(wheel.origin).parent / "pginstall" / "bin"))
    for directory in map(Path, candidates):
        if os.access(directory / "initdb", os.X_OK) and os.access(directory / "postgres", os.X_OK):
            return directory
    raise RuntimeError("no PostgreSQL binaries: install Debian's postgresql, or pgserver from PyPI")


class MariaDBServer(DatabaseServer):
    """MariaDB without grant tables (any user connects); the lock uses its database ``mysql``."""

    name = "mariadb"

    @property
    def uri(self) -> str:
        return f"mysql://lakehouse@{LOOPBACK}:{self.port}/mysql"

    def commands(self, data: Path) -> tuple[list, list]:
        create = ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--skip-test-db",
                  "--auth-root-authentication-method=normal"]  # fmt: skip
        serve = ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.root / 'mysqld.sock'}",
                 f"--port={self.port}", f"--bind-address={LOOPBACK}", "--skip-grant-tables",
                 "--skip-log-bin"]  # fmt: skip
        return create, serve

    def serves(self) -> bool:
        import pymysql

        try:
            pymysql.connect(host=LOOPBACK, port=self.port, user="lakehouse", connect_timeout=2).close()
            return True
        except pymysql.err.OperationalError:
            return False
