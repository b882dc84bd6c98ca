"""Automatic tags (``tag.automatic-creation``), as Paimon's ``TagAutoCreation``, run after commits.

Each snapshot has a time: its commit time (``process-time``, in ``sink.process-time-zone``,
default the local zone) or its watermark (``watermark``, in ``sink.watermark-time-zone``,
default UTC; snapshots without one are skipped). Walking the snapshots after the one the newest
automatic tag pins, a snapshot whose time minus ``tag.creation-delay`` reaches the end of the
period after the last tagged one is tagged with the name of the period before its own, so each
completed period gets one tag of the first snapshot after it; the first snapshot ever examined
is tagged at once. Periods are ``tag.creation-period`` (``daily``, ``hourly``, ``two-hours``) or
``tag.creation-period-duration``; names follow ``tag.period-formatter``. Tags whose name parses
as a period are automatic; beyond ``tag.num-retained-max`` of them the oldest are deleted, with
the files only they kept. ``tag.automatic-completion`` names a late snapshot's tag after the
period expected next instead of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lakehouse.errors import InvalidOptionError, TagExistsError, UnsupportedFeatureError
from lakehouse.options import (
    TAG_AUTOMATIC_COMPLETION,
    TAG_AUTOMATIC_CREATION,
    TAG_CREATION_DELAY,
    TAG_CREATION_PERIOD,
    TAG_CREATION_PERIOD_DURATION,
    TAG_NUM_RETAINED_MAX,
    TAG_PERIOD_FORMATTER,
    CoreOptions,
)
from lakehouse.snapshot import Snapshot
from lakehouse.store import tags

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

MODES = ("none", "process-time", "watermark", "batch")
PERIODS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1), "two-hours": timedelta(hours=2)}
FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")
_NO_WATERMARK = -(2**63)  # Long.MIN_VALUE
_EPOCH = datetime(1970, 1, 1)
_OFFSET = re.compile(r"^(?:GMT|UTC|UT)?([+-])(\d{1,2})(?::?(\d{2}))?$")
# strftime patterns and the digit layouts Paimon's strict formatters accept
_DAY, _DAY_PLAIN = ("%Y-%m-%d", r"\d{4}-\d{2}-\d{2}"), ("%Y%m%d", r"\d{8}")
_HOUR = {
    "with_dashes": ("%Y-%m-%d %H", r"\d{4}-\d{2}-\d{2} \d{2}"),
    "without_dashes": ("%Y%m%d %H", r"\d{8} \d{2}"),
    "without_dashes_and_spaces": ("%Y%m%d%H", r"\d{10}"),
}
_MINUTE = ("%Y%m%d%H%M", r"\d{12}")


@dataclass(frozen=True)
class TagPeriod:
    """The tag period and its names (``TagPeriodHandler``)."""

    length: timedelta
    pattern: str  # strftime pattern of names
    digits: re.Pattern
    daily: bool  # daily names are matched on their first word only

    def name(self, start: datetime) -> str:
        return start.strftime(self.pattern)

    def start(self, name: str) -> datetime | None:
        """The period a tag name stands for; None: not an automatic tag's name."""
        text = name.split(" ")[0] if self.daily else name
        if not self.digits.fullmatch(text):
            return None
        try:
            return datetime.strptime(text, self.pattern)
        except ValueError:
            return None

    def previous(self, time: datetime) -> datetime:
        """The start of the period before the one ``time`` falls in."""
        step = self.length // timedelta(milliseconds=1)
        millis = (time - _EPOCH) // timedelta(milliseconds=1)
        return _EPOCH + timedelta(milliseconds=millis // step * step) - self.length


@dataclass(frozen=True)
class AutoTags:
    """A table's automatic tag settings (None from :meth:`of` when switched off)."""

    watermark: bool
    zone: tzinfo | None  # None: the local zone
    period: TagPeriod
    delay: timedelta
    retained_max: int | None
    completion: bool

    @classmethod
    def of(cls, options: CoreOptions, table: str) -> AutoTags | None:
        """The settings, or None for ``tag.automatic-creation=none``; bad values are refused."""
        mode = (options.get(TAG_AUTOMATIC_CREATION) or "none").strip().lower()
        if mode == "none":
            return None
        if mode not in MODES:
            raise InvalidOptionError(
                f"table {table}: unknown tag.automatic-creation {mode!r}; use one of {MODES}"
            )
        if mode == "batch":
            raise UnsupportedFeatureError(
                f"table {table}: tag.automatic-creation=batch tags the end of a Flink batch job, which "
                f"this engine does not run; use process-time or watermark, or create tags explicitly"
            )
        period = _period(options, table)
        delay = timedelta(milliseconds=options.duration_ms(TAG_CREATION_DELAY) or 0)
        if delay >= period.length:
            raise InvalidOptionError(
                f"table {table}: tag.creation-delay must be shorter than the tag period ({period.length})"
            )
        retained = options.get(TAG_NUM_RETAINED_MAX)
        if retained is not None and options.get_int(TAG_NUM_RETAINED_MAX) < 1:
            raise InvalidOptionError(f"table {table}: tag.num-retained-max must be at least 1")
        watermark = mode == "watermark"
        zone_key = "sink.watermark-time-zone" if watermark else "sink.process-time-zone"
        zone = _zone(options.get(zone_key) or ("UTC" if watermark else None), zone_key, table)
        return cls(
            watermark,
            zone,
            period,
            delay,
            None if retained is None else options.get_int(TAG_NUM_RETAINED_MAX),
            options.get_bool(TAG_AUTOMATIC_COMPLETION),
        )

    def time(self, snapshot: Snapshot) -> datetime | None:
        """The local date-time a snapshot stands at (None: it has no watermark)."""
        millis = snapshot.time_millis
        if self.watermark:
            watermark = snapshot.watermark
            if watermark is None or watermark == _NO_WATERMARK:
                return None
            millis = watermark
        instant = _EPOCH.replace(tzinfo=UTC) + timedelta(milliseconds=millis)
        return instant.astimezone(self.zone).replace(tzinfo=None)


def create_auto_tags(table: TableStore) -> list[str]:
    """Tag the snapshots committed since the newest automatic tag as the settings say; returns
    the names of the tags created."""
    settings = AutoTags.of(table.schema.core_options, table.name)
    if settings is None:
        return []
    period = settings.period
    starts = [(period.start(t.name), t) for t in tags.list_tags(table)]
    automatic = [(start, t) for start, t in starts if start is not None]
    snapshots = table.snapshots
    next_tag: datetime | None = None
    next_snapshot = snapshots.earliest_id() or 1
    if automatic:
        start, newest = max(automatic, key=lambda a: a[0])
        next_snapshot, next_tag = newest.snapshot.id + 1, start + period.length
    created = []
    latest = snapshots.latest_id()
    while latest is not None and next_snapshot <= latest:
        if not snapshots.exists(next_snapshot):  # expired meanwhile: resume at the earliest
            earliest = snapshots.earliest_id()
            if earliest is None or earliest <= next_snapshot:
                break
            next_snapshot = earliest
            continue
        snap = snapshots.snapshot(next_snapshot)
        time = settings.time(snap)
        if time is not None and (next_tag is None or time - settings.delay >= next_tag + period.length):
            start = next_tag if settings.completion and next_tag is not None else period.previous(time)
            name = period.name(start)
            try:
                tags.create_tag(table, name, snap.id)
                created.append(name)
            except TagExistsError:
                pass
            next_tag = start + period.length
            if settings.retained_max is not None:
                _delete_beyond(table, period, settings.retained_max)
        next_snapshot += 1
    return created


def _delete_beyond(table: TableStore, period: TagPeriod, retained: int) -> None:
    """Delete the oldest automatic tags beyond ``retained`` (``tag.num-retained-max``)."""
    automatic = [t for t in tags.list_tags(table) if period.start(t.name) is not None]
    for t in automatic[: max(0, len(automatic) - retained)]:
        tags.delete_tag(table, t.name)


def _period(options: CoreOptions, table: str) -> TagPeriod:
    formatter = (options.get(TAG_PERIOD_FORMATTER) or "with_dashes").strip().lower()
    if formatter not in FORMATTERS:
        raise InvalidOptionError(
            f"table {table}: unknown tag.period-formatter {formatter!r}; use one of {FORMATTERS}"
        )
    duration = options.duration_ms(TAG_CREATION_PERIOD_DURATION)
    if duration is not None:
        if duration <= 0:
            raise InvalidOptionError(f"table {table}: tag.creation-period-duration must be positive")
        return _tag_period(timedelta(milliseconds=duration), _MINUTE, False)
    name = (options.get(TAG_CREATION_PERIOD) or "daily").strip().lower()
    if name not in PERIODS:
        raise InvalidOptionError(
            f"table {table}: unknown tag.creation-period {name!r}; use one of {sorted(PERIODS)}"
        )
    if name == "daily":
        return _tag_period(PERIODS[name], _DAY if formatter == "with_dashes" else _DAY_PLAIN, True)
    return _tag_period(PERIODS[name], _HOUR[formatter if name == "hourly" else "with_dashes"], False)


def _tag_period(length: timedelta, layout: tuple[str, str], daily: bool) -> TagPeriod:
    pattern, digits = layout
    return TagPeriod(length, pattern, re.compile(digits), daily)


def _zone(name: str | None, key: str, table: str) -> tzinfo | None:
    """A Java ``ZoneId``: a region (``Asia/Shanghai``), ``UTC``, or an offset (``GMT+08:00``)."""
    if name is None:
        return None
    offset = _OFFSET.match(name.strip())
    if offset:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes or 0))
        return timezone(-delta if sign == "-" else delta)
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidOptionError(
            f"table {table}: {key}={name!r} is not a time zone; use e.g. 'UTC', 'Asia/Shanghai' or "
            f"'GMT+08:00'"
        ) from None
