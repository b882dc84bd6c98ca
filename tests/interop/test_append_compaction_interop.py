"""pypaimon reads append tables we compacted and clustered with the same rows; we compact the
append tables pypaimon wrote."""

from __future__ import annotations

import numpy as np
import pytest

from lakehouse import Catalog

from ..conftest import ORDERS, orders
from . import oracle
from .test_pypaimon import same

pytestmark = pytest.mark.interop

DAYS = ["2024-01-01", "2024-01-02"]


def _small_appends(write, n: int = 6) -> None:
    rng = np.random.default_rng(7)
    for i in range(n):
        ids = rng.permutation(np.arange(i * 50, i * 50 + 50)).tolist()
        write(orders(ids, dt=DAYS * 25, price=[float(v) for v in rng.integers(0, 100, 50)]))


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "order_id"}])
def test_pypaimon_reads_our_compacted_append_table(catalog, warehouse, options):
    t = catalog.create_table("db.a", ORDERS, partition_keys=["dt"], options=options)
    _small_appends(t.write)
    assert t.compact().files_before > 0
    same(t.read(), oracle.read(warehouse, "db.a"), "order_id")
    t.compact(full=True)
    same(t.read(), oracle.read(warehouse, "db.a"), "order_id")


@pytest.mark.parametrize("strategy", ["order", "zorder", "hilbert"])
def test_pypaimon_reads_our_clustered_table(catalog, warehouse, strategy):
    t = catalog.create_table("db.c", ORDERS, partition_keys=["dt"], options={"target-file-size": "4 kb"})
    _small_appends(t.write)
    t.sort_compact(["price", "user_id"], strategy=strategy)
    same(t.read(), oracle.read(warehouse, "db.c"), "order_id")


def test_we_compact_pypaimons_append_table(warehouse):
    oracle.create(warehouse, "db.a", ORDERS, partition_keys=["dt"])
    _small_appends(lambda d: oracle.write(warehouse, "db.a", d))
    table = Catalog(warehouse).get_table("db.a")
    before = oracle.read(warehouse, "db.a")
    done = table.compact()
    assert (done.files_before, done.files_after) == (12, 2)
    same(table.read(), before, "order_id")
    same(table.read(), oracle.read(warehouse, "db.a"), "order_id")
