"""The local session: reachable from this machine only."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.spark


def listening_addresses(pid: int) -> set[str]:
    """IPv4/IPv6 addresses the process's TCP sockets listen on (from /proc, Linux)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.islink(f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                    found.add(fields[1].rsplit(":", 1)[0])
    return found


@pytest.mark.skipif(not os.path.exists("/proc/self/net/tcp"), reason="reads Linux's /proc")
def test_a_local_session_listens_on_loopback_only(spark):
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    addresses = listening_addresses(pid)
    # 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc prints them
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    assert addresses and addresses <= loopback


PURE_CONNECT = """
import sys
import pyarrow as pa
from pyspark.sql import functions as F
from lakehouse import Catalog
from lakehouse.spark import compact, session, write
from lakehouse.spark.parallelism import default_parallelism

url, warehouse = sys.argv[1:]
spark = session(url)
catalog = Catalog(warehouse)
catalog.create_database("db")
catalog.create_table("db.t", pa.schema([("id", pa.int64(), False), ("v", pa.int64())]), primary_keys=["id"],
                     options={"bucket": "2"})
write(spark.range(100).select("id", (F.col("id") * 2).alias("v")), "db.t", warehouse=warehouse)
compact(spark, "db.t", full=True, warehouse=warehouse)
df = spark.read.format("paimon").option("warehouse", warehouse).load("db.t")
latest = catalog.get_table("db.t").latest_snapshot_id()
print(default_parallelism(spark), df.where(F.col("v") >= 100).count(), latest)
"""


def test_a_process_with_only_a_connect_session_writes_compacts_and_reads(connect_server, tmp_path):
    """Spark Connect mode as a deployed run has it: PySpark's functions build Connect columns."""
    args = [sys.executable, "-c", PURE_CONNECT, connect_server.url, str(tmp_path / "warehouse")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["2", "50", "2"]


JOIN_SHARED = """
import sys
from lakehouse.spark import session

url, name = sys.argv[1:]
spark = session(url, app_name=name, shared=True)
print(spark.session_id, spark.conf.get("lakehouse.test.mark"))
"""


def test_shared_connect_sessions_are_one_server_session_across_processes(connect_server, spark):
    """Every run joins the same server-side session; one closed by ``stop()`` is replaced. The
    process's local session keeps working (it is not switched to Connect mode)."""
    from pyspark.sql import functions as F

    from lakehouse.spark import session

    to_next_hour = 3600 - time.time() % 3600  # the shared session changes with the UTC hour
    if to_next_hour < 120:
        time.sleep(to_next_hour + 1)
    name = f"shared-{os.getpid()}"
    first = session(connect_server.url, app_name=name, shared=True)
    first.conf.set("lakehouse.test.mark", "set by the first client")
    args = [sys.executable, "-c", JOIN_SHARED, connect_server.url, name]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"{first.session_id} set by the first client"

    first.stop()  # closed on the server for every client: the next one moves to a new session
    second = session(connect_server.url, app_name=name, shared=True)
    assert second.session_id != first.session_id
    assert second.range(5).count() == 5
    assert session(connect_server.url, app_name=name, shared=True).session_id == second.session_id
    other = session(connect_server.url, app_name=f"{name}-other", shared=True)
    assert other.session_id not in (first.session_id, second.session_id)
    assert spark.range(3).select(F.col("id") + 1).collect()[-1][0] == 3


def test_the_data_source_is_registered_once_per_session(spark, monkeypatch):
    """Writes register the source on their session: again would replace it, with a warning each time."""
    from pyspark.sql.datasource import DataSourceRegistration

    from lakehouse.spark import register
    from lakehouse.spark.parallelism import default_parallelism
    from lakehouse.spark.source import REGISTERED

    register(spark)
    assert spark.conf.get(REGISTERED) == str(default_parallelism(spark))

    def again(self, source):
        raise AssertionError("registered twice")

    monkeypatch.setattr(DataSourceRegistration, "register", again)
    register(spark)


def test_python_workers_start_with_the_engine_imported(any_spark):
    """Workers fork from lakehouse.spark.daemon, which imported the engine: a task whose own code
    imports nothing of it finds it loaded (a fresh worker then starts without importing it)."""
    import pyarrow as pa

    def loaded(batches):  # pickled by value: unpickling it imports only pyarrow
        import sys

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"loaded": ["lakehouse.spark.source" in sys.modules]})

    rows = any_spark.range(2, numPartitions=2).mapInArrow(loaded, "loaded boolean").collect()
    assert [r.loaded for r in rows] == [True, True]


def test_the_daemon_imports_the_worker_module_before_it_forks():
    """lakehouse.spark.daemon imports the module its workers run (``pyspark.worker``) once, before
    forking them: imported from Spark's pyspark.zip, it would be compiled again in every fork."""
    probe = (
        "import sys; from lakehouse.spark.daemon import preload; before = 'pyspark.worker' in sys.modules; "
        "preload(['daemon.py', 'not.a.pyspark.module']); preload(['daemon.py', 'pyspark.worker']); "
        "print(before, 'pyspark.worker' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
