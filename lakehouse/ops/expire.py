"""Snapshot expiration: drop old snapshots and every file only they still reference.

Mirrors ``ExpireSnapshotsImpl``. Which snapshots go:

- never the newest ``snapshot.num-retained.min`` (default 10);
- always those beyond the newest ``snapshot.num-retained.max`` (default unlimited);
- in between, snapshot N goes only when N+1 was committed before ``older_than_ms`` (default now
  minus ``snapshot.time-retained``, 1 h), so a snapshot stays readable for that long after it
  stopped being the latest;
- never one a consumer (``consumer-id``) still has to read, and at most ``snapshot.expire.limit``
  per call.

Files referenced by an expired snapshot but not by the first retained snapshot, a tag or another
branch's snapshots and tags are deleted. Invariant: a file is deleted only once nothing still
listed names it. The expired snapshot files go first (oldest first), then the ``EARLIEST`` hint
moves, then the manifest lists, manifests, changelog, index and data files (Paimon deletes the
files first, so that a kill can leave a listed snapshot that no longer reads). A run killed at
any point leaves every listed snapshot whole; what it had not deleted yet is unreferenced, and
``remove_orphan_files`` removes it (the next run plans from the snapshots still listed). New
files of a concurrent writer are never candidates: candidates come from the expired snapshots'
manifests only.

The work comes in three units, so that other processes can delete the files:
:func:`plan_expiration` (which snapshots and files go), :func:`retire_snapshots` (the snapshot
files, the hint, the metadata files), then ``delete_files`` over ``plan.files.content()`` (in any
number of pieces); :meth:`ExpirationPlan.report` sums them up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidArgumentError
from lakehouse.iceberg.metadata import sync_iceberg
from lakehouse.options import (
    CONSUMER_EXPIRATION_TIME,
    SNAPSHOT_EXPIRE_LIMIT,
    SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_NUM_RETAINED_MIN,
    SNAPSHOT_TIME_RETAINED,
)
from lakehouse.snapshot import Snapshot
from lakehouse.store import consumers, tags
from lakehouse.store.references import Deleted, FileRefs, References, delete_files, other_branches_files

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore


@dataclass(frozen=True)
class Expiration:
    """What one expiration did."""

    snapshots_expired: int
    earliest_snapshot_id: int | None
    deleted: Deleted = Deleted()

    @property
    def files_deleted(self) -> int:
        return self.deleted.total


@dataclass(frozen=True)
class ExpirationPlan:
    """Snapshots ``earliest .. end-1`` expire (those of ``snapshot_ids`` still exist), with the
    files only they reference; ``earliest`` and ``end`` are None when the table has no snapshot."""

    earliest: int | None
    end: int | None
    snapshot_ids: tuple[int, ...] = ()
    files: FileRefs = field(default_factory=FileRefs)

    def report(self, deleted: Deleted) -> Expiration:
        """What the expiration did, once ``deleted`` are gone."""
        return Expiration(len(self.snapshot_ids), self.end, deleted)


def expire_snapshots(
    table: TableStore,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    max_deletes: int | None = None,
) -> Expiration:
    """Expire snapshots per the arguments, each defaulting to the table's option.

    ``older_than_ms`` is an epoch-millisecond timestamp (Paimon's ``older_than``).
    """
    plan = plan_expiration(table, retain_min, retain_max, older_than_ms, max_deletes)
    retired = retire_snapshots(table, plan)
    return plan.report(retired + delete_files(table.io, plan.files.content()))


def plan_expiration(
    table: TableStore,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    max_deletes: int | None = None,
) -> ExpirationPlan:
    """Which snapshots :func:`expire_snapshots` expires and which files go with them (deletes
    nothing but expired consumers)."""
    options = table.refresh().schema.core_options

    def option(given: int | None, key: str) -> int:
        value = given if given is not None else options.get_int(key)
        if value < 1:
            raise InvalidArgumentError(f"table {table.name}: {key} must be at least 1, got {value}")
        return value

    retain_min, retain_max = (
        option(retain_min, SNAPSHOT_NUM_RETAINED_MIN),
        option(retain_max, SNAPSHOT_NUM_RETAINED_MAX),
    )
    max_deletes = option(max_deletes, SNAPSHOT_EXPIRE_LIMIT)
    if retain_max < retain_min:
        raise InvalidArgumentError(
            f"table {table.name}: retain_max ({retain_max}) must not be less than retain_min "
            f"({retain_min}); raise {SNAPSHOT_NUM_RETAINED_MAX} or lower {SNAPSHOT_NUM_RETAINED_MIN}"
        )
    now_ms = int(time.time() * 1000)
    if older_than_ms is None:
        older_than_ms = now_ms - options.required_duration_ms(SNAPSHOT_TIME_RETAINED)
    consumer_ttl = options.duration_ms(CONSUMER_EXPIRATION_TIME)
    if consumer_ttl is not None:
        consumers.expire(table, consumer_ttl, now_ms)

    snapshots = table.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    if latest is None or earliest is None:
        return ExpirationPlan(None, None)
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
    return plan_expiration_until(table, earliest, end)


def plan_expiration_until(table: TableStore, earliest: int, end: int) -> ExpirationPlan:
    """Expire snapshots ``earliest .. end-1``; snapshot ``end`` must exist and is kept."""
    if end <= earliest:
        return ExpirationPlan(earliest, earliest)
    snapshots = table.snapshots
    boundary = snapshots.snapshot(end)
    expired = [snapshots.snapshot(sid) for sid in range(earliest, end) if snapshots.exists(sid)]
    refs = References(table)
    protected = refs.of(boundary)
    for tagged in protecting_tags(tags.tagged_snapshots(table), earliest, end):
        protected.update(refs.of(tagged, changelog=False))
    protected.update(other_branches_files(table))
    files = refs.of_removed(expired).minus(protected)
    return ExpirationPlan(earliest, end, tuple(s.id for s in expired), files)


def retire_snapshots(table: TableStore, plan: ExpirationPlan) -> Deleted:
    """The first deletions of an expiration: its snapshot files oldest first, then the
    ``EARLIEST`` hint, then its metadata files. Its content files are unreferenced from then on:
    delete them next (``plan.files.content()``, in any process)."""
    if plan.earliest is None or plan.end is None:
        return Deleted()
    snapshots = table.snapshots
    for sid in plan.snapshot_ids:
        snapshots.delete(sid)
    if plan.end > plan.earliest or snapshots.read_hint("EARLIEST") != plan.end:
        snapshots.write_hint("EARLIEST", plan.end)
    sync_iceberg(table)  # Iceberg's history without the expired snapshots, before their files go
    return delete_files(table.io, plan.files.metadata())


def protecting_tags(tagged: list[Snapshot], earliest: int, end: int) -> list[Snapshot]:
    """The tagged snapshots (ascending) that can share files with snapshots ``earliest..end-1``
    but not with snapshot ``end``: those in between, and the newest one before ``earliest``
    (an older tag shares nothing with the range that this one does not share too)."""
    before = [s for s in tagged if s.id < earliest]
    return before[-1:] + [s for s in tagged if earliest <= s.id < end]
