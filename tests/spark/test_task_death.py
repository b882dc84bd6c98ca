"""A Spark write whose task dies - by an exception, ``os._exit`` or SIGKILL of its Python worker -
commits nothing and, once the abort returned, leaves no file of the write in the table (only the
write's ``ENDED`` marker); the table takes the next write as if nothing happened."""

from __future__ import annotations

import os

import pytest

from lakehouse.spark import maintenance, write
from lakehouse.write.scope import ENDED, SCOPES_DIR

from ..conftest import ORDERS, orders, rows
from ..interop import oracle
from .dying import LEASES, CompactThenDie, DyingSource, orders_df, table_files

pytestmark = pytest.mark.spark


@pytest.fixture
def dying(spark):
    """The ``paimon_dying`` source, with 40-row Arrow batches so tasks see several."""
    spark.dataSource.register(DyingSource)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "40")
    yield spark
    spark.conf.set(key, before)


@pytest.mark.interop
@pytest.mark.parametrize("mode", ["raise", "exit", "kill"])
@pytest.mark.parametrize("primary_key", [False, True], ids=["append", "primary-key"])
def test_a_dying_task_leaves_no_file_of_the_write(dying, catalog, warehouse, mode, primary_key):
    keys = {"primary_keys": ["order_id", "dt"]} if primary_key else {}
    # small files and buffers: both tasks have published files when the victim dies
    options = {
        "target-file-size": "1 kb",
        "write-buffer-size": "1 kb",
        "bucket": "1" if primary_key else "-1",
    }
    t = catalog.create_table("db.t", ORDERS, partition_keys=["dt"], options=options, **keys)
    df = orders_df(dying, 400)
    save = df.write.format("paimon_dying").option("warehouse", warehouse).options(**LEASES)
    save = save.option("fault.mode", mode).option("fault.partition", "1").option("fault.after-batches", "3")
    with pytest.raises(Exception, match="dies on purpose|crashed|exited|Python worker"):
        save.option("fault.slow-ms", "50").mode("append").save("db.t")
    assert t.latest_snapshot_id() is None
    [marker] = table_files(t.paths.root)
    assert marker.startswith(SCOPES_DIR + os.sep) and marker.endswith(os.sep + ENDED)
    write(df, "db.t", warehouse=warehouse)
    assert rows(t.read()) == rows(df.toArrow()) == rows(oracle.read(warehouse, "db.t"))


def test_a_dying_compaction_task_leaves_no_file_of_the_job(spark, catalog, warehouse):
    t = catalog.create_table(
        "db.t",
        ORDERS,
        primary_keys=["order_id", "dt"],
        partition_keys=["dt"],
        options={"bucket": "2", "write-only": "true", **LEASES},
    )
    for price in range(3):
        t.write(orders(range(40), dt=["2024-01-01", "2024-01-02"] * 20, price=price))
    latest, before = t.latest_snapshot_id(), table_files(t.paths.root)
    job = CompactThenDie(t, victim=1)
    with pytest.raises(Exception, match="crashed|exited|Python worker"):
        maintenance.run_job(spark, job)
    assert t.latest_snapshot_id() == latest
    [marker] = set(table_files(t.paths.root)) - set(before)
    assert marker == os.path.join(SCOPES_DIR, job.write.scope.write_id, ENDED)
    maintenance.compact(spark, "db.t", full=True, warehouse=warehouse)
    assert rows(t.read()) == rows(orders(range(40), dt=["2024-01-01", "2024-01-02"] * 20, price=2))
