"""A SparkSession ready for the ``paimon`` data source: local, on a cluster, or over Spark Connect.

``master`` picks the kind:

- ``sc://host:port``: a Spark Connect server (:mod:`lakehouse.spark.connect` starts one). The
  session is a thin client; the server's Python workers must have this package installed. With
  ``shared=True`` every client of the server joins one server-side session named after the app, so
  what a session keeps warm (its Python workers, the registered data source) outlives each run.
- ``local[n]``: Spark in this process's JVM. Its Python workers are pinned to this interpreter
  and to the directory this package is imported from, so they run the same code as the driver,
  and it listens on the loopback interface only (``spark.driver.bindAddress``/``host`` and
  ``SPARK_LOCAL_IP`` 127.0.0.1) unless ``conf`` says otherwise.
- ``spark://host:port`` (or any other master URL): a cluster. Nothing is pinned: the workers run
  the interpreter ``spark.pyspark.python`` names in ``conf`` (else their ``PYSPARK_PYTHON``),
  which must have this package installed; no path of this machine is handed to them.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import lakehouse
from lakehouse.spark.source import register

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

LOOPBACK = "127.0.0.1"
PROJECT_ROOT = str(Path(lakehouse.__file__).resolve().parent.parent)
CONNECT = "sc://"
UTC = {"spark.sql.session.timeZone": "UTC"}
# Python workers fork from a daemon that has the engine imported (lakehouse.spark.daemon)
DAEMON = {"spark.python.daemon.module": "lakehouse.spark.daemon"}
SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"
MAX_GENERATIONS = 100  # shared sessions of one name and hour closed by stop() before giving up
LOG_SETTINGS = Path(__file__).with_name("log4j2.properties")
# where the driver of this process's session also logs, so a step can show what Spark said meanwhile
DRIVER_LOG = Path(tempfile.gettempdir()) / f"lakehouse-spark-driver-{os.getpid()}.log"
atexit.register(DRIVER_LOG.unlink, missing_ok=True)  # the log of this process's session only


def driver_logging(log_file: Path | None = None) -> dict[str, str]:
    """The driver JVM logs with :data:`LOG_SETTINGS` (warnings, minus the expected ones), to
    stderr and to ``log_file`` if given."""
    options = f"-Dlog4j2.configurationFile={LOG_SETTINGS.as_uri()}"
    if log_file is not None:
        options += f" -Dlakehouse.spark.driver.log={log_file}"
    return {"spark.driver.extraJavaOptions": options}


def worker_pythonpath() -> str:
    """This package's root first, then the driver's ``PYTHONPATH``."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != PROJECT_ROOT]
    return os.pathsep.join([PROJECT_ROOT, *inherited])


def session(
    master: str = "local[2]",
    app_name: str = "lakehouse",
    conf: Mapping[str, str] | None = None,
    shared: bool = False,
) -> SparkSession:
    """Get or create a SparkSession on ``master`` (a master URL or a Spark Connect URL) with the
    ``paimon`` data source registered; ``conf``: Spark settings (over Spark Connect, the runtime
    ones: the server's own are fixed when it starts). ``shared``: over Spark Connect, join the
    server-side session every shared client of ``app_name`` joins (never ``stop()`` it: that
    closes it for all of them, and the next client moves on to a new one)."""
    if master.startswith(CONNECT):
        settings = {**UTC, **(conf or {})}
        if shared:
            remote = _shared(master, app_name, settings)
        else:
            remote = _connect(master)
            _configure(remote, settings)
        # a Connect session serves as a SparkSession (PySpark's builder hands one out as such)
        spark = cast(SparkSession, remote)
    else:
        builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.enabled", "false")
        local = _local_settings() if master.startswith("local") else {}
        settings = {**UTC, **DAEMON, **driver_logging(DRIVER_LOG), **local, **(conf or {})}
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    register(spark)
    return spark


def _connect(url: str, create: bool = False) -> RemoteSparkSession:
    """A Spark Connect session: the process's current one, or a new one if ``create``.

    PySpark's builder also switches the process to Connect mode (``pyspark.sql.functions`` then
    build Connect columns), which a process running a local session must not be: there the
    Connect client's own builder connects (see :mod:`lakehouse.spark.kinds` for building columns
    there)."""
    # PySpark's own test for a local session in the process (it refuses Connect mode then)
    local = SparkContext._active_spark_context is not None or SparkSession._instantiatedSession is not None
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession  # only where one connects

    if local:
        remote = RemoteSparkSession.builder.remote(url)
        return remote.create() if create else remote.getOrCreate()
    builder = SparkSession.builder.remote(url)
    # for a remote URL the classic builder hands out a Connect session
    return cast("RemoteSparkSession", builder.create() if create else builder.getOrCreate())


def _shared(url: str, name: str, settings: Mapping[str, str]) -> RemoteSparkSession:
    """The open server-side session of ``name``, configured with ``settings``. Its id derives
    from the URL, the name, the UTC hour (a server closes sessions idle for an hour, and never
    reopens a closed id: each hour starts a new one) and a generation: the first generation of
    the hour not closed on the server is the current one."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    active = RemoteSparkSession.getActiveSession()
    prefix = url if ";" in url else f"{url.rstrip('/')}/"
    hour = time.strftime("%Y-%m-%dT%H", time.gmtime())
    for generation in range(MAX_GENERATIONS):
        session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{url}#{name}#{hour}#{generation}"))
        if active is not None and active.session_id == session_id:
            spark = active
        else:
            spark = _connect(f"{prefix};session_id={session_id}", create=True)
        try:
            _configure(spark, settings)
        except PySparkException as e:
            if e.getCondition() != SESSION_CLOSED:
                raise
            spark.client.close()
            continue
        return spark
    raise RuntimeError(
        f"the last {MAX_GENERATIONS} shared Spark Connect sessions of {name!r} at {url} were stopped: a "
        "client stops the session all share; use session(shared=False) where a session is stopped"
    )


def _configure(spark: SparkSession | RemoteSparkSession, settings: Mapping[str, str]) -> None:
    for key, value in settings.items():
        spark.conf.set(key, value)


def _local_settings() -> dict[str, str]:
    """Python workers on this interpreter and code, the driver on loopback.

    Sets ``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` in this process's environment (PySpark reads
    the first when the session starts, ``spark.pyspark.python`` alone only reaches spark-submit
    launches; Spark resolves its own address before reading the conf and would warn that it uses
    the machine's network address)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    return {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": worker_pythonpath(),
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
    }
