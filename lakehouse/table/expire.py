"""Snapshot expiration: drop old snapshots and every file only they still reference.

Mirrors ``ExpireSnapshotsImpl``. Which snapshots go:

- never the newest ``snapshot.num-retained.min`` (default 10);
- always those beyond the newest ``snapshot.num-retained.max`` (default unlimited);
- in between, snapshot N goes only when N+1 was committed before ``older_than_ms`` (default now
  minus ``snapshot.time-retained``, 1 h), so a snapshot stays readable for that long after it
  stopped being the latest;
- never one a consumer (``consumer-id``) still has to read, and at most ``snapshot.expire.limit``
  per call.

Files referenced by an expired snapshot but not by the first retained snapshot or a tag are
deleted: data and changelog files first, then manifests and index files, then the snapshot files
(oldest first), then the ``EARLIEST`` hint. A run killed at any point leaves a readable table and
the next run finishes the job. New files of a concurrent writer are never candidates: candidates
come from the expired snapshots' manifests only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidArgumentError
from lakehouse.table import consumers, tags
from lakehouse.table.references import Deleted, References, delete_files

if TYPE_CHECKING:
    from lakehouse.table.table import Table

RETAIN_MIN = "snapshot.num-retained.min"
RETAIN_MAX = "snapshot.num-retained.max"
TIME_RETAINED = "snapshot.time-retained"
EXPIRE_LIMIT = "snapshot.expire.limit"
CONSUMER_EXPIRATION = "consumer.expiration-time"
AFTER_COMMIT = "snapshot.expire.after-commit"  # this engine's opt-in, see Table.write


@dataclass(frozen=True)
class Expiration:
    """What one expiration did."""

    snapshots_expired: int
    earliest_snapshot_id: int | None
    deleted: Deleted = Deleted()

    @property
    def files_deleted(self) -> int:
        return self.deleted.total


def expire_snapshots(
    table: Table,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    max_deletes: int | None = None,
) -> Expiration:
    """Expire snapshots per the arguments, each defaulting to the table's option.

    ``older_than_ms`` is an epoch-millisecond timestamp (Paimon's ``older_than``).
    """
    options = table.refresh().schema.core_options

    def option(given: int | None, key: str) -> int:
        value = given if given is not None else options.get_int(key)
        if value < 1:
            raise InvalidArgumentError(f"table {table.name}: {key} must be at least 1, got {value}")
        return value

    retain_min, retain_max = option(retain_min, RETAIN_MIN), option(retain_max, RETAIN_MAX)
    max_deletes = option(max_deletes, EXPIRE_LIMIT)
    if retain_max < retain_min:
        raise InvalidArgumentError(
            f"table {table.name}: retain_max ({retain_max}) must not be less than retain_min "
            f"({retain_min}); raise {RETAIN_MAX} or lower {RETAIN_MIN}"
        )
    now_ms = int(time.time() * 1000)
    if older_than_ms is None:
        older_than_ms = now_ms - options.duration_ms(TIME_RETAINED)
    consumer_ttl = options.duration_ms(CONSUMER_EXPIRATION)
    if consumer_ttl is not None:
        consumers.expire(table, consumer_ttl, now_ms)

    snapshots = table.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if latest is None or earliest is None:
        return Expiration(0, None)
    first = max(latest - retain_max + 1, earliest)
    end = latest - retain_min + 1
    needed = consumers.min_next_snapshot(table)
    if needed is not None:
        end = min(end, needed)
    end = min(end, earliest + max_deletes)
    for sid in range(first, end):
        if snapshots.exists(sid + 1) and older_than_ms <= snapshots.snapshot(sid + 1).time_millis:
            end = sid
            break
    return expire_until(table, earliest, end)


def expire_until(table: Table, earliest: int, end: int) -> Expiration:
    """Expire snapshots ``earliest .. end-1``; snapshot ``end`` must exist and is kept."""
    snapshots = table.snapshots
    if end <= earliest:
        if snapshots.read_hint("EARLIEST") != earliest:
            snapshots.write_hint("EARLIEST", earliest)
        return Expiration(0, earliest)
    boundary = snapshots.snapshot(end)
    expired = [snapshots.snapshot(sid) for sid in range(earliest, end) if snapshots.exists(sid)]
    refs = References(table)
    protected = refs.of(boundary)
    for tagged in protecting_tags(tags.tagged_snapshots(table), earliest, end):
        protected.update(refs.of(tagged, changelog=False))
    deleted = delete_files(table.io, refs.of_removed(expired).minus(protected))
    for snap in expired:
        snapshots.delete(snap.id)
    snapshots.write_hint("EARLIEST", end)
    return Expiration(len(expired), end, deleted)


def protecting_tags(tagged: list, earliest: int, end: int) -> list:
    """The tagged snapshots (ascending) that can share files with snapshots ``earliest..end-1``
    but not with snapshot ``end``: those in between, and the newest one before ``earliest``
    (an older tag shares nothing with the range that this one does not share too)."""
    before = [s for s in tagged if s.id < earliest]
    return before[-1:] + [s for s in tagged if earliest <= s.id < end]
