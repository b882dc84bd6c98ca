"""Shared fixtures: golden vectors from Apache Paimon's Java implementation, and tiny warehouses;
the hooks of ``tests/parts.py``, which mark each test by the part of the project it needs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse import Catalog
from lakehouse.bucket import hash_index
from lakehouse.format import parquet
from lakehouse.io.fs import FileIO
from lakehouse.manifest.index_manifest import by_bucket
from tests.parts import (  # noqa: F401 - the hooks that mark the parts of the suite
    pytest_addoption,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

GOLDEN = Path(__file__).resolve().parent / "golden"  # vectors produced by Apache Paimon (Java)


# golden probe names -> our predicate ops
GOLDEN_OPS = {
    "equal": "eq", "not_equal": "ne", "in": "in", "not_in": "not_in", "is_null": "is_null",
    "is_not_null": "is_not_null", "less_than": "lt", "less_or_equal": "le", "greater_than": "gt",
    "greater_or_equal": "ge",
}  # fmt: skip


def golden(name: str) -> dict:
    """Load one golden vector file (``../shared/golden/<name>``)."""
    return json.loads((GOLDEN / name).read_text())


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole run (started on first use), ``paimon`` registered."""
    from lakehouse.spark import session

    spark = session(conf=SPARK_TEST_CONF)
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


SPARK_TEST_CONF = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"}


@pytest.fixture(scope="session")
def connect_server():
    """A Spark Connect server on ``local[2]``, started on loopback for the run."""
    from lakehouse.spark.connect import ConnectServer
    from lakehouse.spark.loopback import free_port

    # no spark.default.parallelism: sessions measure the server's parallelism (2 for local[2])
    conf = {"spark.sql.shuffle.partitions": "4", "spark.log.level": "ERROR"}
    server = ConnectServer(free_port(), conf=conf).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect client session on the run's server, ``paimon`` registered."""
    from lakehouse.spark import session

    spark = session(connect_server.url)
    yield spark
    spark.stop()


@pytest.fixture(params=["local", "connect"])
def any_spark(request):
    """The shared local session, then the Spark Connect one: for the tests both must pass."""
    return request.getfixturevalue("spark" if request.param == "local" else "connect_spark")


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server (moto, which honours ``If-None-Match``) on loopback for the run."""
    from assets.s3_server import S3Server  # moto, and the Spark extra's loopback helpers

    with S3Server() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server on loopback for the run (a catalog lock's database)."""
    from tests.database_servers import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_server():
    """A MariaDB server on loopback for the run (a MySQL catalog lock's database; ``make e2e``
    installs it)."""
    from tests.database_servers import MariaDBServer

    with MariaDBServer() as server:
        yield server


LOCK_SERVERS = [
    pytest.param("postgres_server", marks=pytest.mark.postgres),
    pytest.param("mariadb_server", marks=[pytest.mark.mysql, pytest.mark.e2e]),
]


@pytest.fixture(params=LOCK_SERVERS)
def lock_server(request):
    """The run's PostgreSQL server, then (in ``make e2e``) its MariaDB server."""
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["sqlite", *LOCK_SERVERS])
def lock_uri(request, tmp_path) -> str:
    """A catalog lock's database: a SQLite file, then the servers of :func:`lock_server`."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/lock.sqlite"
    return request.getfixturevalue(request.param).uri


@pytest.fixture
def s3_warehouse(s3_server) -> tuple[str, dict[str, str]]:
    """A fresh bucket on the test S3 server: its warehouse URI and the catalog options to reach it."""
    return f"s3://{s3_server.bucket('wh')}/warehouse", s3_server.options


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def catalog(warehouse: str) -> Catalog:
    cat = Catalog(warehouse)
    cat.create_database("db")
    return cat


ORDERS = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("user_id", pa.int32()),
        pa.field("price", pa.float64()),
        pa.field("status", pa.string()),
    ]
)


def pk_orders_table(catalog: Catalog, **options: str):
    """``db.t``: the orders schema keyed by (order_id, dt), partitioned by dt, 2 buckets."""
    return catalog.create_table(
        "db.t",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "2", **options},
    )


def orders(ids, dt="2024-01-01", price=1.0, status="PAID") -> pa.Table:
    """A small orders table: one row per id, ``user_id = id % 7``."""
    ids = list(ids)
    dts = dt if isinstance(dt, list) else [dt] * len(ids)
    prices = price if isinstance(price, list) else [float(price)] * len(ids)
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "dt": pa.array(dts, pa.string()),
            "user_id": pa.array([i % 7 for i in ids], pa.int32()),
            "price": pa.array(prices, pa.float64()),
            "status": pa.array([status] * len(ids), pa.string()),
        },
        schema=ORDERS,
    )


def stored_hashes(table) -> dict[tuple[bytes, int], set[int]]:
    """The key hashes of each (partition, bucket)'s HASH index file of a dynamic-bucket table."""
    return {
        key: set(hash_index.read(table.io, table.paths, e.index_file).tolist())
        for key, e in by_bucket(table.index_entries(), hash_index.HASH_INDEX).items()
    }


def rows(table: pa.Table, key: str | list[str] = "order_id") -> list[dict]:
    """Rows sorted by ``key`` as dicts, for order-insensitive comparisons."""
    keys = [key] if isinstance(key, str) else key
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


@pytest.fixture
def decode_threads(tmp_path, monkeypatch) -> tuple[Callable[[], int], list[bool]]:
    """A read of a small data file (:func:`lakehouse.format.parquet.iter_batches`, returning the
    rows read) and, in order, whether each Parquet read it made asked for Arrow's threads."""
    pq.write_table(pa.table({"a": range(100), "b": [str(i) for i in range(100)]}), tmp_path / "f.parquet")
    io, root = FileIO.for_uri(str(tmp_path))
    asked: list[bool] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self, *args, use_threads: bool = True, **kwargs):
        asked.append(use_threads)
        return iter_batches(self, *args, use_threads=use_threads, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)

    def read() -> int:
        return sum(b.num_rows for b in parquet.iter_batches(io, f"{root}/f.parquet", ["a", "b"], 1000))

    return read, asked
