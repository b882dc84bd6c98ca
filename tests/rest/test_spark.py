"""Spark jobs on a REST catalog: the ``paimon`` data source takes the server's URL as its
warehouse and the token as an option; tasks write files, the driver commits through the server."""

from __future__ import annotations

import pyarrow as pa

from lakehouse import Catalog
from tests.rest.server_process import ServerProcess


def test_spark_writes_and_reads_through_the_server(spark, tmp_path):
    with ServerProcess(str(tmp_path / "warehouse"), tmp_path) as server:
        catalog = Catalog(server.uri, options={"token": server.admin})
        catalog.create_database("shop")
        schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
        catalog.create_table("shop.t", schema)
        options = {"warehouse": server.uri, "token": server.admin}
        for rows in ([(1, "a"), (2, "b")], [(1, "c")]):
            frame = spark.createDataFrame(rows, "id long, v string")
            frame.write.format("paimon").options(**options).mode("append").save("shop.t")
        read = spark.read.format("paimon").options(**options).load("shop.t")
        assert sorted(map(tuple, read.collect())) == [(1, "a"), (1, "c"), (2, "b")]
        snapshots = spark.read.format("paimon").options(**options).load("shop.t$snapshots")
        assert snapshots.count() == 2
        assert Catalog(server.warehouse).load_table("shop.t").read().num_rows == 3
