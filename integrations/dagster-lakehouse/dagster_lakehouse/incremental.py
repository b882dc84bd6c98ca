"""Incremental materializations: a table fed by what its upstream tables changed since it last read them.

A spec with ``incremental=True`` is materialized from the changes of each upstream table after
the snapshot its previous materialization read up to - the *position* - through the upstream's
latest snapshot, as a changelog with row kinds (:meth:`~dagster_lakehouse.spec.Inputs.changes`):
changelog files when the upstream has a changelog producer, else the files its appends (and its
dynamic overwrites of empty partitions) added. The result is upserted, so updates and deletes
propagate as ``-U``/``+U``/``-D`` rows.

Days an upstream *replaced* since the position (an overwrite that removed rows - a rerun of
the day - or any overwrite of a primary-key table) have no changelog: they are recomputed. The
transformation gets those days' rows whole (as ``+I``) instead of their changes, and the run
replaces the same days of the table with what it computes for them. When an upstream cannot be
read incrementally at all - the first run, a position lost to expiration, an overwrite of an
unpartitioned table or of partitions that are not days - the run is *full*: it reads every
upstream whole and replaces the whole table.

Exactly once, as Paimon's streaming sinks: every incremental commit of a table is made by one
commit user (:func:`incremental_user`) with the next commit identifier, and carries the upstream
positions it read up to in its snapshots' properties (``incremental.<upstream>``), atomically
with the rows derived from them. Two runs that planned from the same commit race for the same
identifier: the second finds it committed and its files are dropped, so no change is applied
twice; changes it read that the winner did not are read again by the next run. Each position is
mirrored to a consumer of the upstream (consumer id: :func:`consumer_id`), so snapshot
expiration keeps the snapshots the next run reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse import ROW_KIND, Catalog, ChangelogProducerKind, Predicate, Table
from lakehouse.errors import InvalidOptionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROPERTY_PREFIX = "incremental."  # snapshot property: incremental.<upstream> -> its snapshot read up to


def incremental_user(table: str) -> str:
    """The commit user of a table's incremental commits (a Dagster commit user: snapshot
    sensors skip it)."""
    return f"dagster-incremental-{table}"


def consumer_id(table: str) -> str:
    """The consumer a downstream table is on each of its upstream tables."""
    return f"dagster-{table}"


@dataclass(frozen=True)
class Position:
    """What a materialization reads of one upstream: the changes of snapshots ``start+1 .. end``
    outside the ``replaced`` days (those any upstream replaced: the run recomputes them), whose
    rows it reads whole; or (``start`` None) the whole table as of ``end`` (0: the table had no
    snapshot)."""

    table: str
    start: int | None
    end: int
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True)
class Commit:
    """How a write commits: as ``user``, with commit ``identifier`` (None: a batch commit, never
    deduplicated) and snapshot ``properties``."""

    user: str
    identifier: int | None = None
    properties: Mapping[str, str] | None = field(default=None)


@dataclass(frozen=True)
class Increment:
    """The upstream positions of one materialization of ``table`` and the commit identifier it
    commits with."""

    table: str
    positions: Mapping[str, Position]
    identifier: int

    @property
    def full(self) -> bool:
        """Whether every upstream is read whole and the table replaced."""
        return any(p.start is None for p in self.positions.values())

    @property
    def replaced(self) -> tuple[str, ...]:
        """The days of the table the run recomputes and replaces (any upstream replaced them)."""
        return tuple(sorted({d for p in self.positions.values() for d in p.replaced}))

    def position(self, upstream: str) -> Position:
        return self.positions[upstream]

    @property
    def properties(self) -> dict[str, str]:
        """The snapshot properties recording the positions."""
        return {PROPERTY_PREFIX + name: str(p.end) for name, p in self.positions.items()}

    @property
    def commit(self) -> Commit:
        """How this increment commits exactly once, with its positions."""
        return Commit(incremental_user(self.table), self.identifier, self.properties)


def plan_increment(catalog: Catalog, name: str, upstream: Sequence[str], day_column: str | None) -> Increment:
    """What the next materialization of table ``name`` reads of each of ``upstream``: every
    upstream from its recorded position through its latest snapshot, or all of them whole when any
    one cannot be read incrementally (the table is then replaced, so all must be whole).
    ``day_column``: the partition column of days, the unit replaced days are recomputed in (None:
    a replaced partition makes the run full)."""
    sources = {u: catalog.load_table(u) for u in upstream}
    for source in sources.values():
        _check_changelog(source, name)
    table = catalog.load_table(name) if catalog.table_exists(name) else None
    last = table.latest_snapshot_of_user(incremental_user(name)) if table is not None else None
    recorded = dict(last.properties or {}) if last is not None else {}
    positions = {}
    day_partitioned = table is not None and table.partition_keys == [day_column]
    for upstream_name, source in sources.items():
        end = source.latest_snapshot_id() or 0
        start = None
        if table is not None and table.latest_snapshot_id() is not None:  # an empty table is filled whole
            start = _start(source, recorded.get(PROPERTY_PREFIX + upstream_name), consumer_id(name))
        replaced = None if start is None or start > end else _replaced_days(source, start, end, day_column)
        if replaced is None or (replaced and not day_partitioned):
            start, replaced = None, ()
        positions[upstream_name] = Position(upstream_name, start, end, replaced)
    if any(p.start is None for p in positions.values()):
        positions = {u: Position(u, None, p.end) for u, p in positions.items()}
    else:  # a day one upstream replaced is recomputed from all of them: each is read whole there
        days = tuple(sorted({d for p in positions.values() for d in p.replaced}))
        positions = {u: replace(p, replaced=days) for u, p in positions.items()}
    return Increment(name, positions, 1 if last is None else last.commit_identifier + 1)


def _check_changelog(source: Table, downstream: str) -> None:
    """Refuse a primary-key upstream without a changelog producer: its changes are upserts without
    the rows they replace (no ``-U``), so what a downstream table derives would drift."""
    if source.primary_keys and source.changelog_producer == ChangelogProducerKind.NONE:
        raise InvalidOptionError(
            f"incremental table {downstream} reads the changes of {source.name}, a primary-key table "
            f"without a changelog producer: its updates come without the rows they replace. Set "
            f"{source.name}'s changelog-producer to input, lookup or full-compaction, or make "
            f"{downstream} not incremental"
        )


def _start(source: Table, recorded: str | None, consumer: str) -> int | None:
    """The snapshot of ``source`` a table read up to: the one its last incremental commit
    recorded, else the one its consumer on ``source`` stands after (that commit expired)."""
    if recorded is not None:
        return int(recorded)
    following = source.consumer(consumer)
    return None if following is None else following - 1


def _replaced_days(source: Table, start: int, end: int, day_column: str | None) -> tuple[str, ...] | None:
    """The days ``source`` replaced in snapshots ``start+1 .. end``; None when they cannot be
    told (snapshots expired, or replaced partitions that are not days)."""
    replaced = source.replaced_partitions(start, end)
    if replaced is None:
        return None
    if not replaced:
        return ()
    if day_column is None or source.partition_keys != [day_column]:
        return None
    return tuple(sorted(str(p[day_column]) for p in replaced))


def record_consumers(catalog: Catalog, increment: Increment) -> None:
    """Mirror the positions the table now stands at to its consumers on the upstream tables, so
    expiration keeps every snapshot after them."""
    for name, p in increment.positions.items():
        catalog.load_table(name).record_consumer(consumer_id(increment.table), p.end + 1)


def spark_changes(
    spark: SparkSession,
    table: str,
    position: Position,
    warehouse: str,
    storage: Mapping[str, str],
    day_column: str | None,
) -> DataFrame:
    """``position`` of ``table`` as a DataFrame with ``_row_kind``: its changes, but the rows of the
    days it replaced - or with no ``start``, all of its rows - whole, as ``+I``, as of ``end``."""
    from lakehouse import col
    from lakehouse.spark import functions_for, read_changes

    f = functions_for(spark)
    if position.start is None:
        whole = snapshot_frame(spark, table, position.end, warehouse, storage)
        return whole.withColumn(ROW_KIND, f.lit("+I"))
    changes = read_changes(spark, table, position.start, position.end, warehouse=warehouse, options=storage,
                           overwrites=True)  # fmt: skip
    if not position.replaced:
        return changes
    assert day_column is not None  # plan_increment tells replaced days only with a day column
    days = list(position.replaced)
    whole = snapshot_frame(spark, table, position.end, warehouse, storage, where=col(day_column).isin(days))
    return changes.where(~f.col(day_column).isin(days)).unionByName(whole.withColumn(ROW_KIND, f.lit("+I")))


def snapshot_frame(
    spark: SparkSession,
    table: str,
    snapshot: int | None,
    warehouse: str,
    storage: Mapping[str, str],
    columns: Sequence[str] | None = None,
    where: Predicate | None = None,
) -> DataFrame:
    """``columns`` of ``table`` matching ``where`` as of ``snapshot`` (None: the latest; 0: before
    its first, no rows), read by :func:`lakehouse.spark.read`."""
    from lakehouse.spark import read

    frame = read(spark, table, columns=columns, where=where, warehouse=warehouse, options=storage,
                 snapshot_id=snapshot or None)  # fmt: skip
    return frame.limit(0) if snapshot == 0 else frame


def arrow_changes(table: Table, position: Position) -> pa.Table:
    """``position`` of ``table`` as Arrow with ``_row_kind`` (no replaced days: those make the
    position whole)."""
    if position.start is None:
        rows = table.read(snapshot_id=position.end) if position.end else table.arrow_schema.empty_table()
        return rows.append_column(ROW_KIND, pa.array(["+I"] * rows.num_rows, pa.string()))
    return table.read_changes(position.start, position.end, overwrites=True)
