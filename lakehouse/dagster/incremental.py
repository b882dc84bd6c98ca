"""Incremental materializations: a table fed by what its upstream tables changed since it last read them.

A spec with ``incremental=True`` is materialized from the changes of each upstream table after
the snapshot its previous materialization read up to - the *position* - through the upstream's
latest snapshot, as a changelog with row kinds (:meth:`~lakehouse.dagster.spec.Inputs.changes`):
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

import json
from collections.abc import Mapping
from dataclasses import dataclass

from lakehouse import Catalog, Table
from lakehouse.errors import InvalidOptionError
from lakehouse.options import ChangelogProducerKind
from lakehouse.read.changes import replaced_partitions
from lakehouse.store import consumers
from lakehouse.store.partitions import partition_values

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
    outside the ``replaced`` days, whose rows it reads whole; or (``start`` None) the whole table
    as of ``end`` (0: the table had no snapshot)."""

    table: str
    start: int | None
    end: int
    replaced: tuple[str, ...] = ()


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

    def write_options(self) -> dict[str, str]:
        """The Spark write options that commit this increment exactly once, with its positions."""
        from lakehouse.spark.writer import COMMIT_IDENTIFIER, COMMIT_PROPERTIES, COMMIT_USER

        properties = {PROPERTY_PREFIX + name: str(p.end) for name, p in self.positions.items()}
        return {
            COMMIT_USER: incremental_user(self.table),
            COMMIT_IDENTIFIER: str(self.identifier),
            COMMIT_PROPERTIES: json.dumps(properties),
        }


def plan_increment(catalog: Catalog, table: Table, upstream: tuple[str, ...], day_column: str) -> Increment:
    """What the next materialization of ``table`` reads of each of ``upstream``: every upstream
    from its recorded position through its latest snapshot, or all of them whole when any one
    cannot be read incrementally (the table is then replaced, so all must be whole).
    ``day_column``: the partition column of days, the unit replaced days are recomputed in."""
    last = table.store.snapshots.latest_of_user(incremental_user(table.name))
    recorded = dict(last.properties or {}) if last is not None else {}
    positions = {}
    for name in upstream:
        source = catalog.get_table(name)
        _check_changelog(source, table.name)
        end = source.latest_snapshot_id() or 0
        start = None
        if table.latest_snapshot_id() is not None:  # an empty table is filled whole
            start = _start(source, recorded.get(PROPERTY_PREFIX + name), consumer_id(table.name))
        replaced = None if start is None or start > end else _replaced_days(source, start, end, day_column)
        if replaced is None or (replaced and table.partition_keys != [day_column]):
            start, replaced = None, ()
        positions[name] = Position(name, start, end, replaced)
    if any(p.start is None for p in positions.values()):
        positions = {name: Position(name, None, p.end) for name, p in positions.items()}
    return Increment(table.name, positions, 1 if last is None else last.commit_identifier + 1)


def _check_changelog(source: Table, downstream: str) -> None:
    """Refuse a primary-key upstream without a changelog producer: its changes are upserts without
    the rows they replace (no ``-U``), so what a downstream table derives would drift."""
    if source.primary_keys and source.schema.core_options.changelog_producer == ChangelogProducerKind.NONE:
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
    following = consumers.next_snapshot(source.store, consumer)
    return None if following is None else following - 1


def _replaced_days(source: Table, start: int, end: int, day_column: str) -> tuple[str, ...] | None:
    """The days ``source`` replaced in snapshots ``start+1 .. end``; None when they cannot be
    told (snapshots expired, or replaced partitions that are not days)."""
    replaced = replaced_partitions(source.store, start, end)
    if replaced is None or (replaced and source.partition_keys != [day_column]):
        return None
    return tuple(sorted(str(partition_values(source.schema, p)[day_column]) for p in replaced))


def record_consumers(catalog: Catalog, increment: Increment) -> None:
    """Mirror the positions the table now stands at to its consumers on the upstream tables, so
    expiration keeps every snapshot after them."""
    for name, p in increment.positions.items():
        consumers.record(catalog.get_table(name).store, consumer_id(increment.table), p.end + 1)
