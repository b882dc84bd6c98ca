"""A catalog server that owns tables' commits (Paimon's REST catalog): where a table has one,
its snapshots and schema changes go through it instead of straight to the table's files, which
clients still read and write in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lakehouse.schema_change import SchemaChange
from lakehouse.snapshot import SnapshotCommit


class Metastore(SnapshotCommit, Protocol):
    """Commits of the tables of one catalog server; ``table``: ``db.t`` or ``db.t$branch_b``.
    Picklable: Spark tasks carry it with the table."""

    def alter_table(self, table: str, changes: Sequence[SchemaChange]) -> None:
        """Write the table's next schema version: its latest with ``changes`` applied."""
        ...
