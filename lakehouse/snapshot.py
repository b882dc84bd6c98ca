"""Snapshots: the ``snapshot/snapshot-N`` JSON files, the EARLIEST/LATEST hints, time travel.

A commit becomes visible exactly when its snapshot file is created (create-if-absent, so two
committers racing for snapshot N cannot both win). Hints are only hints: a reader trusts LATEST
when ``snapshot-(LATEST+1)`` does not exist and falls back to listing the directory otherwise
(``org.apache.paimon.utils.HintFileUtils``).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Protocol

from lakehouse import json_pretty
from lakehouse.errors import CorruptFileError, SnapshotNotFoundError
from lakehouse.io.fs import FileIO
from lakehouse.paths import TAG_PREFIX, TablePaths, checked_name

SNAPSHOT_VERSION = 3
BATCH_COMMIT_IDENTIFIER = 2**63 - 1  # BatchWriteBuilder.COMMIT_IDENTIFIER
WRITER_VERSION = "python-lakehouse-0.1.0"


class CommitKind(StrEnum):
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


# (attribute, JSON key, omitted when None, JSON type) in the order Java writes them.
_FIELDS = (
    ("version", "version", False, int),
    ("uuid", "uuid", True, str),
    ("id", "id", False, int),
    ("schema_id", "schemaId", False, int),
    ("base_manifest_list", "baseManifestList", False, str),
    ("base_manifest_list_size", "baseManifestListSize", True, int),
    ("delta_manifest_list", "deltaManifestList", False, str),
    ("delta_manifest_list_size", "deltaManifestListSize", True, int),
    ("changelog_manifest_list", "changelogManifestList", True, str),
    ("changelog_manifest_list_size", "changelogManifestListSize", True, int),
    ("index_manifest", "indexManifest", True, str),
    ("commit_user", "commitUser", False, str),
    ("writer_version", "writerVersion", True, str),
    ("commit_identifier", "commitIdentifier", False, int),
    ("commit_kind", "commitKind", False, str),
    ("time_millis", "timeMillis", False, int),
    ("total_record_count", "totalRecordCount", False, int),
    ("delta_record_count", "deltaRecordCount", False, int),
    ("changelog_record_count", "changelogRecordCount", True, int),
    ("watermark", "watermark", True, int),
    ("statistics", "statistics", True, str),
    ("properties", "properties", True, dict),
    ("next_row_id", "nextRowId", True, int),
    ("operation", "operation", True, str),
)
_NEEDED = ("id", "schemaId", "baseManifestList", "deltaManifestList", "commitKind")  # readers need these
_LONG = (-(2**63), 2**63)


def _json_value(key: str, value: Any, kind: type) -> Any:
    """A field's JSON value if it has the field's type (a Java long for numbers), else ValueError."""
    if value is None:
        if key in _NEEDED:
            raise ValueError(f"field {key} is missing")
        return None
    if kind is int:
        fits = isinstance(value, int) and not isinstance(value, bool) and _LONG[0] <= value < _LONG[1]
    else:
        fits = isinstance(value, kind)
    if not fits:
        raise ValueError(f"field {key} is {value!r}, not a {kind.__name__}")
    return value


@dataclass(frozen=True)
class Snapshot:
    """One committed version of a table (``org.apache.paimon.Snapshot``, version 3)."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int
    delta_record_count: int
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = 0
    operation: str | None = None
    writer_version: str | None = WRITER_VERSION
    uuid: str | None = field(default_factory=lambda: str(uuid.uuid4()))
    version: int = SNAPSHOT_VERSION

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        for attr, key, optional, _ in _FIELDS:
            value = getattr(self, attr)
            if value is None and optional:
                continue
            out[key] = value.value if isinstance(value, Enum) else value
        return json_pretty.dumps(out)

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        """The snapshot a JSON text describes; ValueError when it is not a snapshot's JSON."""
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("the JSON is not an object")
        kwargs = {
            attr: _json_value(key, obj.get(key), kind)
            for attr, key, _, kind in _FIELDS
            if key in obj or key in _NEEDED
        }
        kwargs["commit_kind"] = CommitKind(obj["commitKind"])
        kwargs.setdefault("uuid", None)
        kwargs.setdefault("writer_version", None)
        kwargs.setdefault("next_row_id", None)
        return cls(**kwargs)


class SnapshotCommit(Protocol):
    """Where snapshots are published instead of the table's files: a catalog server (see
    :mod:`lakehouse.metastore`)."""

    def commit_snapshot(self, table: str, snapshot: Snapshot) -> bool:
        """Publish ``snapshot`` as the table's next; False if another commit took its id."""
        ...


class SnapshotManager:
    """Finds, reads and atomically commits the snapshots of one table."""

    def __init__(
        self, io: FileIO, paths: TablePaths, table: str, metastore: SnapshotCommit | None = None
    ) -> None:
        self.io = io
        self.paths = paths
        self.table = table
        self.metastore = metastore  # where commits go instead of the files, if the catalog has one

    # ---- ids -------------------------------------------------------------------------------

    def snapshot_ids(self) -> list[int]:
        return self.io.list_numbered(self.paths.snapshot_dir, "snapshot-")

    def latest_id(self) -> int | None:
        hint = self.read_hint("LATEST")
        if (
            hint is not None
            and hint > 0
            and self.io.exists(self.paths.snapshot(hint))
            and not self.io.exists(self.paths.snapshot(hint + 1))
        ):
            return hint
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self.read_hint("EARLIEST")
        if hint is not None and self.io.exists(self.paths.snapshot(hint)):
            return hint
        ids = self.snapshot_ids()
        return ids[0] if ids else None

    def exists(self, snapshot_id: int) -> bool:
        return self.io.exists(self.paths.snapshot(snapshot_id))

    def read_hint(self, name: str) -> int | None:
        """The ``EARLIEST`` or ``LATEST`` hint (None when absent or unreadable)."""
        try:
            text = self.io.read_bytes(f"{self.paths.snapshot_dir}/{name}").decode("ascii")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() and len(text) < 19 else None  # a Java long

    # ---- reading ---------------------------------------------------------------------------

    def snapshot(self, snapshot_id: int) -> Snapshot:
        path = self.paths.snapshot(snapshot_id)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            ids = self.snapshot_ids()
            have = f"snapshots {ids[0]}..{ids[-1]}" if ids else "no snapshots"
            raise SnapshotNotFoundError(
                f"table {self.table} has no snapshot {snapshot_id} ({have}); pick an existing one"
            ) from None
        return self.parse(data, path)

    def parse(self, data: bytes, path: str, what: str = "snapshot") -> Snapshot:
        """The snapshot in the bytes of a snapshot or tag file at ``path``."""
        try:
            return Snapshot.from_json(data.decode("utf-8"))
        except (ValueError, KeyError, TypeError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            advice = "roll back to an earlier snapshot" if what == "snapshot" else "delete the tag file"
            raise CorruptFileError(
                f"table {self.table}: {what} file {path} is corrupt or truncated ({e}); "
                f"restore it from a backup or {advice}"
            ) from None

    def latest(self) -> Snapshot | None:
        sid = self.latest_id()
        return None if sid is None else self.snapshot(sid)

    def latest_of_user(self, user: str) -> Snapshot | None:
        """The newest snapshot ``user`` committed (``SnapshotManager.latestSnapshotOfUser``):
        searched from the latest back, up to the first snapshot that is gone (expired)."""
        for sid in range(self.latest_id() or 0, 0, -1):
            try:
                snapshot = self.snapshot(sid)
            except SnapshotNotFoundError:
                return None
            if snapshot.commit_user == user:
                return snapshot
        return None

    def earlier_or_equal_time(self, timestamp_ms: int) -> Snapshot:
        """The newest snapshot committed at or before ``timestamp_ms``."""
        found = self.newest_at_or_before(timestamp_ms)
        if found is None:
            earliest = self.earliest_id()
            if earliest is None:
                raise SnapshotNotFoundError(
                    f"table {self.table} has no snapshot at or before timestamp {timestamp_ms}: it has no "
                    f"snapshot at all; write to it first"
                )
            raise SnapshotNotFoundError(
                f"table {self.table} has no snapshot at or before timestamp {timestamp_ms}: its earliest "
                f"snapshot {earliest} was committed at {self.snapshot(earliest).time_millis}; pick a later "
                f"time (older snapshots expired or never existed)"
            )
        return self.snapshot(found)

    def newest_at_or_before(self, timestamp_ms: int) -> int | None:
        """The id of the newest snapshot committed at or before ``timestamp_ms`` (binary search;
        None when no retained snapshot is that old)."""
        earliest, latest = self.earliest_id(), self.latest_id()
        if earliest is None or latest is None or self.snapshot(earliest).time_millis > timestamp_ms:
            return None
        lo, hi, found = earliest, latest, earliest
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.snapshot(mid).time_millis <= timestamp_ms:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    def tag(self, name: str) -> Snapshot:
        """The snapshot a tag (``tag/tag-<name>``) pins."""
        path = self.paths.tag(checked_name("tag name", name, self.table))
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(
                f"table {self.table} has no tag {name!r}; its tags are {self.tag_names()}"
            ) from None
        return self.parse(data, path, "tag")

    def tag_names(self) -> list[str]:
        """The names of the tags, sorted."""
        found = self.io.list_dir(self.paths.tag_dir)
        return sorted(st.name.removeprefix(TAG_PREFIX) for st in found if st.name.startswith(TAG_PREFIX))

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it pins, ordered by snapshot id, then name."""
        found = {}
        for name in self.tag_names():
            try:
                found[name] = self.tag(name)
            except SnapshotNotFoundError:
                continue  # deleted while listing
        return dict(sorted(found.items(), key=lambda item: (item[1].id, item[0])))

    # ---- writing ---------------------------------------------------------------------------

    def try_commit(self, snapshot: Snapshot) -> bool:
        """Create ``snapshot-N`` (through the metastore, if the table has one); False if another
        committer already took N."""
        if self.metastore is not None:
            return self.metastore.commit_snapshot(self.table, snapshot) or self._landed(snapshot)
        if not self.io.try_create(self.paths.snapshot(snapshot.id), snapshot.to_json().encode()):
            return False
        self.write_hint("LATEST", snapshot.id)
        return True

    def _landed(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot-N`` is ``snapshot``: a commit the metastore refused may be an earlier
        try of the same, whose answer was lost."""
        try:
            return self.snapshot(snapshot.id).uuid == snapshot.uuid
        except SnapshotNotFoundError:
            return False

    def delete(self, snapshot_id: int) -> None:
        """Remove ``snapshot-N`` (expiration, rollback); absent is fine."""
        self.io.delete(self.paths.snapshot(snapshot_id))

    def write_hint(self, name: str, snapshot_id: int) -> None:
        """Best effort: a stale or missing hint only sends readers to a directory listing."""
        with contextlib.suppress(OSError):
            self.io.write_bytes(f"{self.paths.snapshot_dir}/{name}", str(snapshot_id).encode("ascii"))
