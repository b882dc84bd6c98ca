"""The ``paimon`` data source where Spark looks for installed ones: Spark registers the
``DefaultSource`` of every installed ``pyspark_*`` package by its name, so
``spark.read.format("paimon")`` works in any session whose Python workers have this installed,
without calling :func:`lakehouse.spark.register` (which also sizes reads for the session and
turns filter pushdown on)."""

from lakehouse.spark.source import PaimonDataSource as DefaultSource

__all__ = ["DefaultSource"]
