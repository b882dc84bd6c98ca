"""Table options: Apache Paimon's names and defaults (``org.apache.paimon.CoreOptions``), typed.

Options are stored as strings in the schema file; :class:`CoreOptions` reads them with Paimon's
parsing rules for memory sizes (``"128 mb"``) and durations (``"1 h"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import StrEnum

from lakehouse.errors import InvalidOptionError

_MEMORY_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip
_DURATION_UNITS_MS = {
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
}  # fmt: skip


class MergeEngineKind(StrEnum):
    """``merge-engine``: how the versions of one primary key become one row."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


class ChangelogProducerKind(StrEnum):
    """``changelog-producer``: which files a primary-key table's changelog comes from."""

    NONE = "none"
    INPUT = "input"
    FULL_COMPACTION = "full-compaction"
    LOOKUP = "lookup"


_AMOUNT = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")

# Names used by the engine, with Paimon's defaults (None: no default).
BUCKET = "bucket"
BUCKET_KEY = "bucket-key"
FILE_FORMAT = "file.format"
FILE_COMPRESSION = "file.compression"
ZSTD_LEVEL = "file.compression.zstd-level"
TARGET_FILE_SIZE = "target-file-size"
MANIFEST_TARGET_FILE_SIZE = "manifest.target-file-size"
MANIFEST_MERGE_MIN_COUNT = "manifest.merge-min-count"
MANIFEST_FULL_COMPACTION_SIZE = "manifest.full-compaction-threshold-size"
MANIFEST_COMPRESSION = "manifest.compression"
STATS_MODE = "metadata.stats-mode"
STATS_DENSE_STORE = "metadata.stats-dense-store"
PARTITION_DEFAULT_NAME = "partition.default-name"
DATA_FILE_PREFIX = "data-file.prefix"
THIN_MODE = "data-file.thin-mode"
COMMIT_MAX_RETRIES = "commit.max-retries"
COMMIT_TIMEOUT = "commit.timeout"
COMMIT_MIN_RETRY_WAIT = "commit.min-retry-wait"
COMMIT_MAX_RETRY_WAIT = "commit.max-retry-wait"
COMMIT_USER_PREFIX = "commit.user-prefix"
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
MERGE_ENGINE = "merge-engine"
CHANGELOG_PRODUCER = "changelog-producer"
SEQUENCE_FIELD = "sequence.field"
SPLIT_TARGET_SIZE = "source.split.target-size"
SPLIT_OPEN_FILE_COST = "source.split.open-file-cost"
PRIMARY_KEY_NULLABLE = "primary-key.nullable"

DEFAULTS: dict[str, str] = {
    BUCKET: "-1",
    FILE_FORMAT: "parquet",
    FILE_COMPRESSION: "zstd",
    ZSTD_LEVEL: "1",
    MANIFEST_TARGET_FILE_SIZE: "8 mb",
    MANIFEST_MERGE_MIN_COUNT: "30",
    MANIFEST_FULL_COMPACTION_SIZE: "16 mb",
    MANIFEST_COMPRESSION: "zstd",
    STATS_MODE: "truncate(16)",
    STATS_DENSE_STORE: "true",
    PARTITION_DEFAULT_NAME: "__DEFAULT_PARTITION__",
    DATA_FILE_PREFIX: "data-",
    THIN_MODE: "false",
    COMMIT_MAX_RETRIES: "10",
    COMMIT_MIN_RETRY_WAIT: "10 ms",
    COMMIT_MAX_RETRY_WAIT: "10 s",
    DYNAMIC_PARTITION_OVERWRITE: "true",
    MERGE_ENGINE: MergeEngineKind.DEDUPLICATE.value,
    SPLIT_TARGET_SIZE: "128 mb",
    SPLIT_OPEN_FILE_COST: "4 mb",
    PRIMARY_KEY_NULLABLE: "false",
    "file-index.read.enabled": "true",
    "num-sorted-run.compaction-trigger": "5",
    "compaction.max-size-amplification-percent": "200",
    "compaction.size-ratio": "1",
    "write-only": "false",
    "deletion-vectors.enabled": "false",
    "snapshot.num-retained.min": "10",
    "snapshot.num-retained.max": str(2**31 - 1),
    "snapshot.time-retained": "1 h",
    "snapshot.expire.limit": "50",
    CHANGELOG_PRODUCER: ChangelogProducerKind.NONE.value,
    "changelog-file.prefix": "changelog-",
    "changelog-producer.row-deduplicate": "false",
}


def _amount(text: str, units: dict[str, int], key: str, what: str, example: str) -> int:
    """``<integer><optional spaces><unit>`` as Paimon's MemorySize and TimeUtils parse it."""
    m = _AMOUNT.match(text)
    unit = m[2].lower() if m else None
    if not m or unit not in units:
        raise InvalidOptionError(f"{key}={text!r} is not a {what}; write e.g. {example}")
    return int(m[1]) * units[unit]


def parse_memory_size(text: str, key: str = "option") -> int:
    """Bytes of a Paimon MemorySize string (``"128 mb"``, ``"500 B"``, ``"64kb"``)."""
    return _amount(text, _MEMORY_UNITS, key, "memory size", "'128 mb' or '64 kb'")


def parse_duration_ms(text: str, key: str = "option") -> int:
    """Milliseconds of a Paimon duration string (``"1 h"``, ``"10 s"``; no unit = ms)."""
    return _amount(text, _DURATION_UNITS_MS, key, "duration", "'1 h', '30 min' or '10 s'")


def parse_bool(text: str, key: str = "option") -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise InvalidOptionError(f"{key}={text!r} must be 'true' or 'false'")
    return low == "true"


def parse_int(text: str, key: str = "option", minimum: int | None = None) -> int:
    """A whole number, at least ``minimum`` when given."""
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidOptionError(f"{key}={text!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"{key}={text!r} must be at least {minimum}")
    return value


PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")  # Paimon's, but lzo


def parse_codec(text: str, key: str, codecs: tuple[str, ...]) -> str:
    codec = text.strip().lower()
    if codec not in codecs:
        raise InvalidOptionError(
            f"{key}={text!r} is not a compression this engine writes; use one of {', '.join(codecs)}"
        )
    return codec


def parse_file_prefix(text: str, key: str) -> str:
    """A file name prefix (``data-file.prefix``): part of a name, never a path that leaves the bucket."""
    if not text or any(c in text for c in "/\\\0") or text.startswith("."):
        raise InvalidOptionError(
            f"{key}={text!r} must be the start of a file name, without '/', '\\' or a leading '.'"
        )
    return text


def parse_choice(text: str, key: str, kind: type[StrEnum]) -> StrEnum:
    """A member of ``kind`` by its value, case and surrounding spaces ignored."""
    try:
        return kind(text.strip().lower())
    except ValueError:
        choices = ", ".join(k.value for k in kind)
        raise InvalidOptionError(f"unknown {key} {text!r}; use one of {choices}") from None


def _counts(minimum: int, *keys: str) -> dict[str, Callable[[str, str], object]]:
    return {k: lambda text, key, m=minimum: parse_int(text, key, m) for k in keys}


def _kind(parse: Callable[[str, str], object], *keys: str) -> dict[str, Callable[[str, str], object]]:
    return dict.fromkeys(keys, parse)


# How the values of the options Paimon types are checked when a table is created or altered, so
# that a value no writer or maintenance job could use is refused at once, not days later.
VALUE_CHECKS: dict[str, Callable[[str, str], object]] = {
    **_counts(1, "snapshot.num-retained.min", "snapshot.num-retained.max", "snapshot.expire.limit",
              "changelog.num-retained.min", "changelog.num-retained.max", "tag.num-retained-max",
              "num-sorted-run.compaction-trigger", "num-sorted-run.stop-trigger", "num-levels",
              "full-compaction.delta-commits", "dynamic-bucket.target-row-num",
              "dynamic-bucket.initial-buckets", "dynamic-bucket.assigner-parallelism",
              "manifest.merge-min-count"),
    **_counts(0, "commit.max-retries", "compaction.max-size-amplification-percent", "compaction.size-ratio"),
    **_counts(-1, BUCKET),
    **_counts(-131072, ZSTD_LEVEL),
    **_kind(parse_duration_ms, "snapshot.time-retained", "changelog.time-retained", COMMIT_TIMEOUT,
            COMMIT_MIN_RETRY_WAIT, COMMIT_MAX_RETRY_WAIT, "consumer.expiration-time",
            "partition.expiration-time", "partition.expiration-check-interval", "tag.creation-delay",
            "tag.default-time-retained", "tag.creation-period-duration", "cross-partition-upsert.index-ttl",
            "write.heartbeat-interval", "write.heartbeat-timeout"),
    **_kind(parse_memory_size, TARGET_FILE_SIZE, "write-buffer-size", MANIFEST_TARGET_FILE_SIZE,
            MANIFEST_FULL_COMPACTION_SIZE, SPLIT_TARGET_SIZE, SPLIT_OPEN_FILE_COST,
            "file-index.in-manifest-threshold", "page-size"),
    **_kind(parse_bool, "write-only", "deletion-vectors.enabled", "deletion-vectors.bitmap64", THIN_MODE,
            DYNAMIC_PARTITION_OVERWRITE, PRIMARY_KEY_NULLABLE, "changelog-producer.row-deduplicate",
            "snapshot.expire.after-commit", "tag.automatic-completion", STATS_DENSE_STORE,
            "file-index.read.enabled", "partial-update.remove-record-on-delete",
            "aggregation.remove-record-on-delete", "ignore-delete", "write-buffer-spillable",
            "row-tracking.enabled", "data-evolution.enabled"),
    **_kind(lambda text, key: parse_codec(text, key, PARQUET_CODECS), FILE_COMPRESSION,
            "changelog-file.compression"),
    **_kind(parse_file_prefix, DATA_FILE_PREFIX, "changelog-file.prefix"),
    MERGE_ENGINE: lambda text, key: parse_choice(text, key, MergeEngineKind),
    CHANGELOG_PRODUCER: lambda text, key: parse_choice(text, key, ChangelogProducerKind),
}  # fmt: skip


def check_values(options: Mapping[str, str], table: str) -> None:
    """Refuse an option whose value Paimon would not parse, naming the table and the option."""
    for key, value in options.items():
        check = VALUE_CHECKS.get(key)
        if check is None:
            continue
        try:
            check(value, key)
        except InvalidOptionError as e:
            raise InvalidOptionError(f"table {table}: {e}; fix the option and try again") from None


class CoreOptions:
    """Typed, read-only view of a table's options with Paimon's defaults."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.raw = dict(options)

    def get(self, key: str) -> str | None:
        return self.raw.get(key, DEFAULTS.get(key))

    def get_int(self, key: str) -> int:
        value = self.get(key)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"{key}={value!r} must be an integer") from None

    def get_bool(self, key: str) -> bool:
        return parse_bool(self.get(key) or "false", key)

    def memory(self, key: str) -> int:
        return parse_memory_size(self.get(key), key)

    def duration_ms(self, key: str) -> int | None:
        value = self.get(key)
        return None if value is None else parse_duration_ms(value, key)

    def names(self, key: str) -> list[str]:
        """A comma-separated list of column names ([] when unset)."""
        value = self.get(key)
        return [p.strip() for p in value.split(",") if p.strip()] if value else []

    @property
    def num_levels(self) -> int:
        """``num-levels``: by default one more than the sorted-run compaction trigger."""
        if self.get("num-levels") is not None:
            return self.get_int("num-levels")
        return self.get_int("num-sorted-run.compaction-trigger") + 1

    @property
    def stop_trigger(self) -> int:
        """``num-sorted-run.stop-trigger``: sorted runs at which writing waits for compaction."""
        if self.get("num-sorted-run.stop-trigger") is not None:
            return self.get_int("num-sorted-run.stop-trigger")
        return self.get_int("num-sorted-run.compaction-trigger") + 3

    @property
    def merge_engine(self) -> MergeEngineKind:
        return parse_choice(self.get(MERGE_ENGINE), MERGE_ENGINE, MergeEngineKind)

    @property
    def changelog_producer(self) -> ChangelogProducerKind:
        return parse_choice(self.get(CHANGELOG_PRODUCER), CHANGELOG_PRODUCER, ChangelogProducerKind)

    @property
    def bucket(self) -> int:
        return self.get_int(BUCKET)

    def target_file_size(self, has_primary_key: bool) -> int:
        if self.get(TARGET_FILE_SIZE) is not None:
            return self.memory(TARGET_FILE_SIZE)
        return (128 if has_primary_key else 256) << 20  # CoreOptions.targetFileSize
