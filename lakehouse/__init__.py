"""Lakehouse: a Python storage engine for Apache Paimon tables."""

from lakehouse import errors
from lakehouse.catalog import Catalog
from lakehouse.predicate import col
from lakehouse.table.table import Table

__all__ = ["Catalog", "Table", "col", "errors"]
