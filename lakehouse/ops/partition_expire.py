"""Partition expiration: drop whole partitions once they are older than ``partition.expiration-time``.

Mirrors Paimon's ``NormalPartitionExpire`` with its two strategies
(``partition.expiration-strategy``):

- ``values-time`` (default): a partition's time comes from its values
  (:mod:`lakehouse.partition_time`); it expires when that time is before now minus the expiration
  time. A partition whose values do not parse, or that a null value makes timeless, never
  expires (Paimon logs it; ``update-time`` is the way out);
- ``update-time``: it expires when its newest file was created before now minus the expiration
  time (``PartitionUpdateTimeExpireStrategy``).

"Now" is the local wall clock, as Java's ``LocalDateTime.now()``. The expired partitions are
sorted by their values joined with commas and at most ``partition.expiration-max-num`` go per
run; they are dropped as one OVERWRITE snapshot that deletes all their files and adds none
(``FileStoreCommitImpl.dropPartitions``). The files stay on disk until the snapshots that still
list them expire. A run that fails commits nothing.

After a commit of a writer that is not ``write-only``, expiration runs when
``partition.expiration-time`` is set and a check is due:
Paimon's committer keeps the time of its last check in memory and checks again once
``partition.expiration-check-interval`` has passed (every commit when it is zero, or with
``end-input.check-partition-expire``, since every commit here is a batch commit). This process
remembers its last check per table; its first commit of a table checks (Paimon starts a
committer's clock at a random point of the last interval so that short jobs still check).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from lakehouse.commit.table_commit import TableCommit
from lakehouse.errors import ArgumentTypeError, InvalidArgumentError
from lakehouse.manifest.entries import ManifestEntry
from lakehouse.options import (
    END_INPUT_CHECK_PARTITION_EXPIRE,
    PARTITION_DEFAULT_NAME,
    PARTITION_EXPIRATION_CHECK_INTERVAL,
    PARTITION_EXPIRATION_MAX_NUM,
    PARTITION_EXPIRATION_STRATEGY,
    PARTITION_EXPIRATION_TIME,
    PARTITION_TIMESTAMP_FORMATTER,
    PARTITION_TIMESTAMP_PATTERN,
    WRITE_ONLY,
    CoreOptions,
    PartitionExpireStrategyKind,
    check_values,
    parse_choice,
)
from lakehouse.partition_time import DateTimePattern, PartitionTimeExtractor
from lakehouse.paths import partition_string
from lakehouse.snapshot import BATCH_COMMIT_IDENTIFIER
from lakehouse.store.partitions import partition_values

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class PartitionExpiration:
    """What one partition expiration did (with ``dry_run``: would do)."""

    snapshot_id: int | None  # the OVERWRITE snapshot; None when nothing expired, or a dry run
    partitions: tuple[dict[str, str], ...]  # the expired partitions as Paimon names them, in order
    files: int  # data files the partitions held
    rows: int  # rows in those files
    dry_run: bool = False

    @property
    def partitions_expired(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class PartitionExpireSettings:
    """A table's partition-expiration options, parsed once."""

    expiration_ms: int | None  # partition.expiration-time; None: expiration is off
    check_interval_ms: int
    strategy: PartitionExpireStrategyKind
    extractor: PartitionTimeExtractor
    max_num: int
    check_every_commit: bool  # end-input.check-partition-expire
    after_commit: bool  # not write-only: commits expire partitions

    @classmethod
    def of(cls, table: TableStore, overrides: Mapping[str, str] | None = None) -> PartitionExpireSettings:
        """The settings of ``table``, with ``overrides`` (option -> value) taking precedence."""
        check_values(overrides or {}, table.name)
        options = CoreOptions({**table.schema.options, **(overrides or {})})
        return cls(
            expiration_ms=options.duration_ms(PARTITION_EXPIRATION_TIME),
            check_interval_ms=options.required_duration_ms(PARTITION_EXPIRATION_CHECK_INTERVAL),
            strategy=parse_choice(
                options.required(PARTITION_EXPIRATION_STRATEGY),
                PARTITION_EXPIRATION_STRATEGY,
                PartitionExpireStrategyKind,
            ),
            extractor=PartitionTimeExtractor(
                options.get(PARTITION_TIMESTAMP_PATTERN),
                DateTimePattern.of(options.get(PARTITION_TIMESTAMP_FORMATTER)),
            ),
            max_num=options.get_int(PARTITION_EXPIRATION_MAX_NUM),
            check_every_commit=options.get_bool(END_INPUT_CHECK_PARTITION_EXPIRE),
            after_commit=not options.get_bool(WRITE_ONLY),
        )


def expire_partitions(
    table: TableStore,
    expiration_time: str | timedelta | None = None,
    *,
    strategy: str | None = None,
    timestamp_formatter: str | None = None,
    timestamp_pattern: str | None = None,
    max_expires: int | None = None,
    dry_run: bool = False,
    commit_user: str | None = None,
    now: datetime | None = None,
) -> PartitionExpiration:
    """Expire ``table``'s old partitions now, whatever the check interval (Paimon's
    ``expire_partitions`` procedure). Each argument overrides its table option:
    ``expiration_time`` (``"7 d"`` or a timedelta) ``partition.expiration-time``, ``strategy``
    ``partition.expiration-strategy``, ``timestamp_formatter`` / ``timestamp_pattern`` their
    ``partition.timestamp-*`` options, ``max_expires`` ``partition.expiration-max-num``. ``now``:
    the local wall-clock time to measure ages from (default: now). ``dry_run`` changes nothing."""
    overrides = _overrides(
        table.name, expiration_time, strategy, timestamp_formatter, timestamp_pattern, max_expires
    )
    settings = PartitionExpireSettings.of(table.refresh(), overrides)
    if not table.schema.partition_keys:
        raise InvalidArgumentError(
            f"table {table.name} has no partition keys; expire_partitions drops whole partitions of a "
            f"partitioned table - use expire_snapshots or a delete instead"
        )
    if settings.expiration_ms is None:
        raise InvalidArgumentError(
            f"table {table.name}: no expiration time; pass expiration_time (e.g. '7 d') or set the "
            f"table option {PARTITION_EXPIRATION_TIME}"
        )
    cutoff = (now or datetime.now()) - timedelta(milliseconds=settings.expiration_ms)
    return _expire(table, settings, cutoff, dry_run, commit_user)


def _overrides(
    table: str,
    expiration_time: str | timedelta | None,
    strategy: str | None,
    formatter: str | None,
    pattern: str | None,
    max_expires: int | None,
) -> dict[str, str]:
    """The options the arguments of :func:`expire_partitions` set (``fillInPartitionOptions``)."""
    if isinstance(expiration_time, timedelta):
        expiration_time = f"{expiration_time // timedelta(milliseconds=1)} ms"
    given = {
        PARTITION_EXPIRATION_TIME: expiration_time,
        PARTITION_EXPIRATION_STRATEGY: strategy,
        PARTITION_TIMESTAMP_FORMATTER: formatter,
        PARTITION_TIMESTAMP_PATTERN: pattern,
    }
    for key, value in given.items():
        if value is not None and not isinstance(value, str):
            raise ArgumentTypeError(
                f"expire_partitions of table {table}: {key} must be a string, not {type(value).__name__} "
                f"{value!r}"
            )
    if max_expires is not None:
        if isinstance(max_expires, bool) or not isinstance(max_expires, int):
            raise ArgumentTypeError(
                f"expire_partitions of table {table}: max_expires must be an integer, not {max_expires!r}"
            )
        given[PARTITION_EXPIRATION_MAX_NUM] = str(max_expires)
    return {k: v for k, v in given.items() if v is not None}


def _expire(
    table: TableStore,
    settings: PartitionExpireSettings,
    cutoff: datetime,
    dry_run: bool,
    commit_user: str | None,
    identifier: int = BATCH_COMMIT_IDENTIFIER,
) -> PartitionExpiration:
    """Select the expired partitions of the latest snapshot and drop them (unless ``dry_run``) in a
    snapshot of ``commit_user`` with commit ``identifier``; a partition expires when its time is
    before ``cutoff`` (now minus the expiration time)."""
    latest = table.snapshots.latest()
    groups = _by_partition(table.live_entries(latest) if latest is not None else [])
    expired = _select_expired(table, settings, groups, cutoff)
    specs = tuple(spec for _, spec in expired)
    files = sum(groups[p].files for p, _ in expired)
    rows = sum(groups[p].rows for p, _ in expired)
    if dry_run or not expired:
        return PartitionExpiration(None, specs, files, rows, dry_run)
    snapshot_id = TableCommit(table, commit_user).drop_partitions([p for p, _ in expired], identifier)
    log.info("table %s: expired partitions %s in snapshot %d", table.name, specs, snapshot_id)
    return PartitionExpiration(snapshot_id, specs, files, rows)


@dataclass
class _Partition:
    """What expiration needs of one partition's live files."""

    files: int = 0
    rows: int = 0
    newest: int | None = None  # creation time of its newest file, local wall-clock millis


def _by_partition(entries: list[ManifestEntry]) -> dict[bytes, _Partition]:
    groups: dict[bytes, _Partition] = {}
    for e in entries:
        g = groups.setdefault(e.partition, _Partition())
        g.files += 1
        g.rows += e.file.row_count
        if e.file.creation_time is not None:
            g.newest = max(g.newest or e.file.creation_time, e.file.creation_time)
    return groups


def _select_expired(
    table: TableStore, settings: PartitionExpireSettings, groups: Mapping[bytes, _Partition], cutoff: datetime
) -> list[tuple[bytes, dict[str, str]]]:
    """The partitions that expire with their specs (values as strings, nulls as the default
    partition name), ordered by those values joined with commas, at most ``max_num`` of them
    (``NormalPartitionExpire.doExpire``)."""
    partitions = list(groups)
    keys = list(table.schema.partition_keys)
    types = table.schema.partition_types()
    # Java toString() of each value, None for null
    strings = [
        [
            partition_string(t, v)
            for t, v in zip(types, partition_values(table.schema, p).values(), strict=True)
        ]
        for p in partitions
    ]
    if settings.strategy == PartitionExpireStrategyKind.UPDATE_TIME:
        cutoff_ms = (cutoff - _EPOCH) // timedelta(milliseconds=1)
        # a partition of files without a creation time never expires
        newest = np.array([cutoff_ms if g.newest is None else g.newest for g in groups.values()], np.int64)
        expired = cutoff_ms > newest
    else:
        micros, timed = settings.extractor.extract(keys, strings)
        expired = timed & (micros < (cutoff - _EPOCH) // timedelta(microseconds=1))
        untimed = [dict(zip(keys, s, strict=True)) for s, t in zip(strings, timed, strict=True) if not t]
        if untimed:
            log.warning(
                "table %s: %d partitions have no time in their values (e.g. %s) and never expire; check "
                "%s and %s, drop them by hand, or set %s=%s",
                table.name,
                len(untimed),
                untimed[:3],
                PARTITION_TIMESTAMP_FORMATTER,
                PARTITION_TIMESTAMP_PATTERN,
                PARTITION_EXPIRATION_STRATEGY,
                PartitionExpireStrategyKind.UPDATE_TIME.value,
            )
    default = table.schema.core_options.required(PARTITION_DEFAULT_NAME)
    chosen = [
        ([default if v is None else v for v in s], p)
        for s, p, e in zip(strings, partitions, expired, strict=True)
        if e
    ]
    chosen.sort(key=lambda c: ",".join(c[0]))
    return [(p, dict(zip(keys, values, strict=True))) for values, p in chosen[: settings.max_num]]


# ---- after a commit --------------------------------------------------------------------------

_last_checks: dict[str, float] = {}  # table identity -> time.monotonic() of this process's last check
_checks_lock = threading.Lock()


def expire_partitions_after_commit(
    table: TableStore, commit_user: str | None = None, identifier: int = BATCH_COMMIT_IDENTIFIER
) -> PartitionExpiration | None:
    """Expire partitions after a commit when ``partition.expiration-time`` is set and a check is
    due (see the module doc); None when no check ran. The drop carries the commit's user and
    ``identifier`` (as Paimon's ``PartitionExpire.expire``), so that a streaming writer's next
    identifier is not taken as committed. Never raises - the commit has happened: a failure is
    logged and the next commit checks again."""
    try:
        settings = PartitionExpireSettings.of(table)
        if settings.expiration_ms is None or not settings.after_commit or not table.schema.partition_keys:
            return None
        started = time.monotonic()
        with _checks_lock:
            last = _last_checks.get(table.identity)
        due = (
            settings.check_every_commit
            or settings.check_interval_ms == 0
            or last is None
            or (started - last) * 1000 > settings.check_interval_ms
        )
        if not due:
            return None
        cutoff = datetime.now() - timedelta(milliseconds=settings.expiration_ms)
        done = _expire(table, settings, cutoff, False, commit_user, identifier)
        with _checks_lock:
            _last_checks[table.identity] = started
        return done
    except Exception:
        log.warning(
            "table %s: partition expiration after a commit failed (the commit stands; the next commit "
            "checks again)",
            table.name,
            exc_info=True,
        )
        return None
