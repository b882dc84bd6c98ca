"""The time of a partition: Paimon's ``PartitionTimeExtractor`` and the Java ``DateTimeFormatter``
patterns partition values are written in.

A partition's timestamp text is its first value, or ``partition.timestamp-pattern`` with each
``$key`` replaced by that key's value (longest key first); values are their Java ``toString()``
of Paimon's internal values (a DATE is its epoch day count, which no pattern reads: as in Paimon,
such partitions expire by ``update-time`` only).
Without ``partition.timestamp-formatter`` the text is read as ``y-M-d[ H:m:s[.S]]`` leniently, as
Paimon's default formatters do (``2024-13-01`` is ``2025-01-01``); a formatter is a Java pattern
resolved the way ``DateTimeFormatter.ofPattern`` resolves (SMART: fields range-checked, a day past
the end of its month clamped to it). A text that does not parse has no time: Paimon logs it and
never expires its partition. Times are local wall-clock microseconds (``LocalDateTime``), parsed
for all partitions at once: one regular expression, then numpy arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import InvalidOptionError, UnsupportedFeatureError

MICROS_PER_DAY = 86_400_000_000
_MAX_YEAR = 200_000  # within numpy's datetime64[us] range; Java's LocalDate stops at 999999999 anyway
# every letter DateTimeFormatter.ofPattern accepts; the others are errors there too
_JAVA_LETTERS = frozenset("GuyDMLdQqYwWEecFahKkHmsSAnNVzOXxZpgB")
_NUMERIC = {"M": "month", "L": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}
_SUPPORTED = "y u M L d H m s S, quoted 'text' and other literal characters"


@dataclass(frozen=True)
class DateTimePattern:
    """A compiled timestamp format: a regular expression with one named group per field."""

    text: str | None  # the Java pattern; None: Paimon's default formatters
    regex: str
    lenient: bool = False
    year_of_era: bool = False  # 'y' (must be at least 1 when resolved SMART), not 'u'
    dated: bool = True  # has a year, a month and a day: without them Java resolves no date

    @classmethod
    def of(cls, pattern: str | None, key: str = "partition.timestamp-formatter") -> DateTimePattern:
        """Compile a Java ``DateTimeFormatter`` pattern (None: Paimon's default formatters)."""
        return DEFAULT_PATTERN if pattern is None else _compile(pattern, key)

    def parse(self, texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Local wall-clock microseconds of each text, and whether it parsed at all."""
        n = len(texts)
        if n == 0 or not self.dated:
            return np.zeros(n, np.int64), np.zeros(n, bool)
        found = pc.extract_regex(texts.cast(pa.string()), f"^{self.regex}$")
        ok = _numpy(found.is_valid())
        names = [found.type.field(i).name for i in range(found.type.num_fields)]
        groups = {name: _digits(pc.struct_field(found, name), ok, name == "fraction") for name in names}
        return _resolve(groups, ok, self.lenient, self.year_of_era)


def _numpy(flags: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(flags, False).to_numpy(zero_copy_only=False), dtype=bool)


def _digits(column: pa.Array, ok: np.ndarray, fraction: bool) -> tuple[np.ndarray, np.ndarray]:
    """A group's numbers (0 where absent; a fraction in nanoseconds) and where it was present (an
    optional group that did not take part matched the empty string)."""
    present = _numpy(pc.greater(pc.utf8_length(column), 0)) & ok
    text = pc.if_else(pa.array(present), column, "0")
    if fraction:
        text = pc.utf8_rpad(text, width=9, padding="0")
    # more than 18 digits would overflow: such a value is -1, which no field accepts
    short = _numpy(pc.less_equal(pc.utf8_length(text), 18))
    values = pc.cast(pc.if_else(pa.array(short), text, "0"), pa.int64()).to_numpy(zero_copy_only=False)
    return np.where(short, values, -1), present


def _resolve(
    groups: dict[str, tuple[np.ndarray, np.ndarray]], ok: np.ndarray, lenient: bool, year_of_era: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The fields of each match as a ``LocalDateTime`` (or only a ``LocalDate``: midnight)."""
    n = len(ok)
    zero, absent = np.zeros(n, np.int64), np.zeros(n, bool)

    def field(name: str) -> tuple[np.ndarray, np.ndarray]:
        return groups.get(name, (zero, absent))

    if "year2" in groups:  # 'yy': ReducedPrinterParser with base 2000
        groups["year"] = (groups["year2"][0] + 2000, groups["year2"][1])
    (year, has_year), (month, has_month), (day, has_day) = field("year"), field("month"), field("day")
    ok = ok & has_year & has_month & has_day & (year >= 0) & (year < _MAX_YEAR)
    if year_of_era:
        ok &= year >= 1
    year = np.where(ok, year, 1970)
    if not lenient:
        ok &= (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)
        month, day = np.where(ok, month, 1), np.where(ok, day, 1)
    months = (year - 1970) * 12 + (month - 1)  # lenient: month 13 is January of the next year
    first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    if not lenient:  # SMART: the 31st of a 30-day month is its 30th
        length = (months + 1).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64) - first
        day = np.minimum(day, length)
    days = first + day - 1

    (hour, has_hour), (minute, has_minute) = field("hour"), field("minute")
    (second, has_second), (nanos, has_nanos) = field("second"), field("fraction")
    # Parsed.resolveTimeLenient: an hour makes a time, with minutes and seconds defaulted to zero,
    # unless a smaller unit is given without the one above it; without a time the date is midnight
    timed = has_hour & ~((~has_minute & (has_second | has_nanos)) | (has_minute & ~has_second & has_nanos))
    if not lenient:
        in_range = (
            (hour <= 23) & (minute <= 59) & (second <= 59) & (hour >= 0) & (minute >= 0) & (second >= 0)
        )
        end_of_day = (hour == 24) & (minute == 0) & (second == 0) & (nanos == 0)  # SMART's 24:00
        ok &= ~timed | in_range | end_of_day
    micros = days * MICROS_PER_DAY + np.where(
        timed, hour * 3_600_000_000 + minute * 60_000_000 + second * 1_000_000 + nanos // 1000, 0
    )
    return np.where(ok, micros, 0), ok


def _compile(pattern: str, key: str) -> DateTimePattern:
    """Translate a Java pattern the way ``DateTimeFormatterBuilder.appendPattern`` reads it."""
    parts: list[str] = []
    seen: set[str] = set()
    year_of_era = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            group, regex = _field(c, j - i, pattern, key)
            if group in seen or (group.startswith("year") and {"year", "year2"} & seen):
                raise UnsupportedFeatureError(
                    f"{key}={pattern!r} gives the {group.removesuffix('2')} twice; this engine reads each "
                    f"field once - write it once"
                )
            seen.add(group)
            year_of_era |= c == "y"
            parts.append(f"(?P<{group}>{regex})")
            i = j
        elif c == "'":
            literal, i = _quoted(pattern, i, key)
            parts.append(_escape(literal))
        elif c in "[]":
            raise UnsupportedFeatureError(
                f"{key}={pattern!r}: optional sections [...] are not supported; use {_SUPPORTED}"
            )
        elif c in "{}#":
            raise InvalidOptionError(f"{key}={pattern!r}: {c!r} is reserved in Java date-time patterns")
        else:
            parts.append(_escape(c))
            i += 1
    dated = bool({"year", "year2"} & seen) and {"month", "day"} <= seen
    return DateTimePattern(pattern, "".join(parts), lenient=False, year_of_era=year_of_era, dated=dated)


def _field(letter: str, count: int, pattern: str, key: str) -> tuple[str, str]:
    """The group name and regular expression of ``count`` pattern letters (``parseField``)."""
    too_many = InvalidOptionError(f"{key}={pattern!r}: too many pattern letters {letter * count!r}")
    if letter in "yu":
        return ("year2", r"\d{2}") if count == 2 else ("year", rf"\d{{{count},19}}")
    if letter in _NUMERIC and not (letter in "ML" and count > 2):
        if count > 2:
            raise too_many
        return _NUMERIC[letter], r"\d{1,19}" if count == 1 else r"\d{2}"
    if letter == "S":
        if count > 9:
            raise too_many
        return "fraction", rf"\d{{{count}}}"
    if letter not in _JAVA_LETTERS:
        raise InvalidOptionError(
            f"{key}={pattern!r}: unknown pattern letter {letter!r}; quote literal text as 'text'"
        )
    raise UnsupportedFeatureError(
        f"{key}={pattern!r}: pattern letters {letter * count!r} are valid Java but not supported by this "
        f"engine; use {_SUPPORTED}"
    )


def _quoted(pattern: str, start: int, key: str) -> tuple[str, int]:
    """The literal of a quoted section starting at ``start`` (``''`` is one quote), and its end."""
    out: list[str] = []
    j = start + 1
    if pattern[j : j + 1] == "'":
        return "'", j + 1
    while j < len(pattern):
        if pattern[j] == "'":
            if pattern[j + 1 : j + 2] != "'":
                return "".join(out), j + 1
            j += 1
        out.append(pattern[j])
        j += 1
    raise InvalidOptionError(f"{key}={pattern!r}: a quote ' is not closed; write '' for a quote character")


def _escape(literal: str) -> str:
    """A literal for RE2 (Arrow's regex engine): letters and digits as they are, others by code."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in literal)


# PartitionTimeExtractor.TIMESTAMP_FORMATTER (DATE_FORMATTER is its prefix), LENIENT
DEFAULT_PATTERN = DateTimePattern(
    None,
    r"(?P<year>\d{1,10})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?: (?P<hour>\d{1,2}):(?P<minute>\d{1,2}):(?P<second>\d{1,2})(?:\.(?P<fraction>\d{1,9}))?)?",
    lenient=True,
)


@dataclass(frozen=True)
class PartitionTimeExtractor:
    """Partition values to local times (``PartitionTimeExtractor``)."""

    pattern: str | None  # partition.timestamp-pattern, e.g. "$dt $hour:00:00"; None: the first value
    formatter: DateTimePattern

    def texts(self, keys: list[str], values: list[list[str | None]]) -> pa.Array:
        """The timestamp text of each partition (null where a value it needs is null), one
        substitution per partition."""
        if self.pattern is None:
            return pa.array([v[0] for v in values], pa.string())
        pieces = _pattern_pieces(self.pattern, keys)
        out: list[str | None] = []
        for row in values:
            parts = [row[p] if isinstance(p, int) else p for p in pieces]
            present = [p for p in parts if p is not None]
            out.append("".join(present) if len(present) == len(parts) else None)
        return pa.array(out, pa.string())

    def extract(self, keys: list[str], values: list[list[str | None]]) -> tuple[np.ndarray, np.ndarray]:
        """Local wall-clock microseconds of each partition, and whether it has a time at all."""
        return self.formatter.parse(self.texts(keys, values))


def _pattern_pieces(pattern: str, keys: list[str]) -> list[str | int]:
    """``pattern`` as literal text and key positions: ``$key`` names the longest key it starts
    with (so ``$dt`` is not read inside ``$dt1``); any other ``$`` is text."""
    longest_first = sorted(range(len(keys)), key=lambda i: -len(keys[i]))
    pieces: list[str | int] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "$":
            match = next((k for k in longest_first if pattern.startswith(keys[k], i + 1)), None)
            if match is not None:
                pieces.append(match)
                i += 1 + len(keys[match])
                continue
        pieces.append(pattern[i])
        i += 1
    return pieces
