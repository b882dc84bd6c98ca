"""How many tasks a session runs at once, asked through the DataFrame API (Spark Connect sessions
have no ``sparkContext``).

``spark.default.parallelism`` or ``spark.sql.leafNodeDefaultParallelism`` when set; else the
number of partitions of ``spark.range``, which Spark sizes by the cluster's default parallelism
(the cores of its executors, ``n`` of ``local[n]``). The measured value is kept in the session's
conf, so a session pays for the one small job once.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse.spark.kinds import functions_for

DEFAULT_PARALLELISM = "spark.default.parallelism"
LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
MEASURED = "spark.lakehouse.measuredParallelism"
PROBE_ROWS = 1 << 16  # more rows than any cluster has cores: every partition holds some


def default_parallelism(spark: SparkSession) -> int:
    """The session's default parallelism (at least 1)."""
    for key in (DEFAULT_PARALLELISM, LEAF_PARALLELISM, MEASURED):
        value = spark.conf.get(key, None)
        if value:
            return max(1, int(value))
    probe = spark.range(PROBE_ROWS)
    functions = functions_for(probe)
    ids = probe.select(functions.spark_partition_id().alias("partition"))
    row = ids.agg(functions.max("partition")).first()
    assert row is not None  # an aggregate without grouping has one row
    partitions = row[0] + 1
    spark.conf.set(MEASURED, str(partitions))
    return partitions
