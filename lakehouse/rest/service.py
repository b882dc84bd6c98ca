"""What a REST catalog server does, over a filesystem catalog: each operation reads the warehouse's
files and answers in Paimon's JSON (``rest-catalog-open-api.yaml``: every key present, nulls
explicit, as Paimon's clients require). Nothing is kept but caches of what files say, so a
restarted server, or the filesystem catalog beside it, sees exactly what this one saw.

The server is the warehouse's only committer: a table's commits, rollbacks, fast-forwards,
drops and renames take the table's lock in this process, and a commit lands only on the latest
snapshot its client saw (``RESTCatalogServer``'s ``commitSnapshot``).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lakehouse.catalog import DB_SUFFIX, Catalog
from lakehouse.errors import (
    CommitConflictError,
    DatabaseNotFoundError,
    InvalidArgumentError,
    InvalidOptionError,
    SnapshotNotFoundError,
    TableNotFoundError,
    TagExistsError,
    TagNotFoundError,
    UnsupportedFeatureError,
)
from lakehouse.io.fs import join
from lakehouse.io.lock import ProcessLock
from lakehouse.manifest.entries import FileKind
from lakehouse.options import PARTITION_DEFAULT_NAME
from lakehouse.paths import MAIN_BRANCH, checked_name, partition_path, partition_string
from lakehouse.rest import requests
from lakehouse.rest.protocol import Access, Resources
from lakehouse.rest.requests import Call
from lakehouse.schema import TableSchema
from lakehouse.schema_change import SetOption, change_from_json
from lakehouse.snapshot import Snapshot
from lakehouse.store.partitions import partition_values
from lakehouse.system.files import group_files
from lakehouse.table.table import Table

STATS_CACHED = 1024  # snapshots whose file statistics are kept
PATH_OPTION = "path"  # CoreOptions.PATH
EXTERNAL_PATHS = "external-path"  # in data-file.external-paths and its kin
_NO_AUDIT = {"owner": None, "createdAt": None, "createdBy": None, "updatedAt": None, "updatedBy": None}


@dataclass(frozen=True)
class FileStats:
    """What the live data files of a snapshot (or one partition of it) add up to."""

    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    total_buckets: int

    def to_json(self) -> dict[str, int]:
        return {
            "recordCount": self.record_count,
            "fileSizeInBytes": self.file_size_in_bytes,
            "fileCount": self.file_count,
            "lastFileCreationTime": self.last_file_creation_time,
        }


def check_locations(options: Mapping[str, str], table: str) -> None:
    """Refuse options that place a table's files elsewhere than the server puts them (``path``,
    ``data-file.external-paths``...): clients write where they say, outside their grants."""
    placing = sorted(k for k in options if k == PATH_OPTION or EXTERNAL_PATHS in k)
    if placing:
        raise InvalidOptionError(
            f"table {table}: options {placing} would place its files outside the warehouse directory "
            f"the catalog server gives it; remove them",
            placing[0],
        )


def snapshot_json(snapshot: Snapshot) -> Any:
    return json.loads(snapshot.to_json())


class CatalogService:
    """The operations of Paimon's REST catalog on one warehouse, served under ``name``."""

    def __init__(self, catalog: Catalog, name: str) -> None:
        self.catalog = catalog
        self.name = name
        self.resources = Resources(name)
        self._tables = ProcessLock()
        self._stats: OrderedDict[tuple[Any, ...], dict[bytes, FileStats]] = OrderedDict()
        self._stats_guard = threading.Lock()

    def location(self, path: str) -> str:
        """The URI clients reach ``path`` of the warehouse at (``file://``, ``s3://``, ``hdfs://``)."""
        found = self.catalog.io.uri(path)
        if found is not None:
            return found
        parts = urlsplit(self.catalog.warehouse)
        return f"{parts.scheme}://{parts.netloc}{path}" if parts.scheme else path

    # ---- databases -------------------------------------------------------------------------

    def list_databases(self, call: Call) -> dict[str, Any]:
        readable = call.rights.readable(self.catalog.list_databases())
        return call.page("databaseNamePattern").of(readable, "databases")

    def create_database(self, call: Call) -> None:
        with call.fields("CreateDatabaseRequest") as f:
            name, options = f.string("name"), f.string_map("options")
        call.rights.check(name, Access.WRITE)
        if options:
            raise UnsupportedFeatureError(
                f"database {name!r}: databases of this catalog keep no options ({sorted(options)}); "
                f"create it without"
            )
        self.catalog.create_database(name)

    def get_database(self, call: Call) -> dict[str, Any]:
        if not self.catalog.database_exists(call.database):
            raise DatabaseNotFoundError(f"database {call.database!r} does not exist in catalog {self.name}")
        path = join(self.catalog.root, call.database + DB_SUFFIX)
        return {
            "id": call.database,
            "name": call.database,
            "location": self.location(path),
            "options": {},
            **_NO_AUDIT,
        }

    def drop_database(self, call: Call) -> None:
        """Drop the database with its tables (Paimon's clients check that it is empty first)."""
        self.catalog.drop_database(call.database, cascade=True)

    # ---- tables ----------------------------------------------------------------------------

    def list_tables(self, call: Call) -> dict[str, Any]:
        tables = self.catalog.list_tables(call.database)
        if call.query.get("tableType") not in (None, "", "table"):
            tables = []  # every table here is a Paimon table
        return call.page("tableNamePattern").of(tables, "tables")

    def create_table(self, call: Call) -> None:
        with call.fields("CreateTableRequest") as f:
            identifier = requests.identifier(f.value("identifier"), "identifier")
            definition = requests.table_definition(f.value("schema"))
        if identifier.split(".", 1)[0] != call.database:
            raise InvalidArgumentError(
                f"table {identifier} is created under database {call.database!r}; name that database"
            )
        check_locations(definition.options, identifier)
        self.catalog.create_table_from_fields(
            identifier,
            definition.fields,
            primary_keys=definition.primary_keys,
            partition_keys=definition.partition_keys,
            options=definition.options,
            comment=definition.comment,
        )

    def load(self, call: Call) -> Table:
        """The table of the path (on its branch)."""
        return self.catalog.load_table(call.identifier)

    def get_table(self, call: Call) -> dict[str, Any]:
        table = self.load(call)
        schema = table.schema
        return {
            "id": table_id(table),
            "database": call.database,
            "name": call.params["table"],
            "path": self.location(table.paths.root),  # the table's, whichever branch is asked
            "isExternal": False,
            "schemaId": schema.id,
            "schema": _schema_json(schema),
            "owner": None,
            "createdAt": table.schema_by_id(0).time_millis,
            "createdBy": None,
            "updatedAt": schema.time_millis,
            "updatedBy": None,
        }

    def drop_table(self, call: Call) -> None:
        with self._holding(call.identifier):
            self.catalog.drop_table(call.identifier)

    def rename_table(self, call: Call) -> None:
        with call.fields("RenameTableRequest") as f:
            source = requests.identifier(f.value("source"), "source")
            destination = requests.identifier(f.value("destination"), "destination")
        for name in (source, destination):
            call.rights.check(name.split(".", 1)[0], Access.WRITE)
        with self._holding(source, destination):
            self.catalog.rename_table(source, destination)

    def alter_table(self, call: Call) -> None:
        with call.fields("AlterTableRequest") as f:
            changes = f.value("changes")
        if not isinstance(changes, list):
            raise InvalidArgumentError("AlterTableRequest: field 'changes' must be a list of schema changes")
        parsed = [change_from_json(c) for c in changes]
        check_locations({c.key: c.value for c in parsed if isinstance(c, SetOption)}, call.identifier)
        table = self.load(call)
        if parsed:
            table.alter(parsed)

    # ---- snapshots -------------------------------------------------------------------------

    def snapshot(self, call: Call) -> dict[str, Any]:
        table = self.load(call)
        latest = table.snapshots.latest()
        if latest is None:
            raise SnapshotNotFoundError(f"table {call.identifier} has no snapshot yet")
        stats = self._totals(table, latest)
        return {"snapshot": {"snapshot": snapshot_json(latest), **stats.to_json()}}

    def commit(self, call: Call) -> dict[str, bool]:
        """Publish the snapshot if it is the next one after the latest its client saw; a
        ``success: false`` sends the client back to re-plan on the new latest."""
        with call.fields("CommitTableRequest") as f:
            expected_id = f.string("tableId")
            new = requests.snapshot(f.value("snapshot"))
            if not isinstance(f.value("statistics", required=False) or [], list):
                raise InvalidArgumentError("CommitTableRequest: field 'statistics' must be a list")
            base = f.optional_string("baseSnapshotUuid")
        with self._holding(call.identifier):
            table = self.load(call)
            if table_id(table) != expected_id:
                raise TableNotFoundError(
                    f"table {call.identifier} was dropped and created again since the client loaded it "
                    f"(id {expected_id!r}, now {table_id(table)!r}); load it again"
                )
            _check_files(table, new)
            latest = table.snapshots.latest()
            if new.id != (latest.id if latest is not None else 0) + 1:
                return {"success": False}
            if base is not None and latest is not None and latest.uuid not in (None, base):
                return {"success": False}
            return {"success": table.snapshots.try_commit(new)}

    def rollback(self, call: Call) -> None:
        with call.fields("RollbackTableRequest") as f:
            target = requests.instant(f.value("instant"))
            expected = f.optional_integer("fromSnapshot")
        with self._holding(call.identifier):
            table = self.load(call)
            if expected is not None and table.latest_snapshot_id() != expected:
                raise CommitConflictError(
                    f"table {call.identifier}: its latest snapshot is {table.latest_snapshot_id()}, not "
                    f"{expected}; nothing was rolled back"
                )
            if target.tag is not None:
                _tag(table, target.tag)
            table.rollback_to(snapshot_id=target.snapshot_id, tag=target.tag)

    def partitions(self, call: Call) -> dict[str, Any]:
        table = self.load(call)
        page = call.page("partitionNamePattern")
        latest = table.snapshots.latest()
        if latest is None or not table.partition_keys:
            return page.of([], "partitions")
        schema = table.schema
        default = schema.core_options.required(PARTITION_DEFAULT_NAME)
        keys, types = list(schema.partition_keys), schema.partition_types()
        by_name = {}
        for partition, stats in self._stats_of(table, latest).items():
            values = partition_values(schema, partition)
            name = partition_path(keys, types, list(values.values()), default)
            spec = {k: _spec_value(partition_string(t, v), default)
                    for (k, v), t in zip(values.items(), types, strict=True)}  # fmt: skip
            by_name[name] = {
                "spec": spec,
                **stats.to_json(),
                "totalBuckets": stats.total_buckets,
                "done": False,
                **_NO_AUDIT,
                "options": None,
            }
        listed = page.of(sorted(by_name), "partitions")
        return {**listed, "partitions": [by_name[n] for n in listed["partitions"]]}

    # ---- tags ------------------------------------------------------------------------------

    def list_tags(self, call: Call) -> dict[str, Any]:
        names = self.load(call).snapshots.tag_names()
        prefix = call.query.get("tagNamePrefix") or ""
        return call.page().of([n for n in names if n.startswith(prefix)], "tags")

    def create_tag(self, call: Call) -> None:
        with call.fields("CreateTagRequest") as f:
            name = f.string("tagName")
            snapshot_id = f.optional_integer("snapshotId")
            retained = f.optional_string("timeRetained")
            ignore_if_exists = f.boolean("ignoreIfExists", False)
        if retained is not None:
            raise UnsupportedFeatureError(
                f"tag {name!r}: tags here are kept until deleted; create it without timeRetained"
            )
        try:
            self.load(call).create_tag(name, snapshot_id=snapshot_id)
        except TagExistsError:
            if not ignore_if_exists:
                raise

    def get_tag(self, call: Call) -> dict[str, Any]:
        name = call.params["tag"]
        tagged = _tag(self.load(call), name)
        return {"tagName": name, "snapshot": snapshot_json(tagged), "tagCreateTime": None,
                "tagTimeRetained": None}  # fmt: skip

    def delete_tag(self, call: Call) -> None:
        table = self.load(call)
        _tag(table, call.params["tag"])
        table.delete_tag(call.params["tag"])

    # ---- branches --------------------------------------------------------------------------

    def list_branches(self, call: Call) -> dict[str, Any]:
        return {"branches": self.load(call).branches()}

    def create_branch(self, call: Call) -> None:
        with call.fields("CreateBranchRequest") as f:
            name, tag = f.string("branch"), f.optional_string("fromTag")
        table = self.load(call)
        if tag is not None:
            _tag(table, tag)
        table.create_branch(name, tag=tag)

    def delete_branch(self, call: Call) -> None:
        self.load(call).delete_branch(call.params["branch"])

    def forward_branch(self, call: Call) -> None:
        """Make the table (its main branch) the branch of the path (``fastForward``)."""
        name = call.params["branch"]
        with call.fields("ForwardBranchRequest") as f:
            if f.optional_string("branch") not in (None, name):
                raise InvalidArgumentError(f"ForwardBranchRequest names another branch than {name!r}")
        with self._holding(call.identifier):
            self.load(call).fast_forward(name)

    # ---- helpers ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _holding(self, *identifiers: str) -> Iterator[None]:
        """Hold the locks of these tables (by directory, in one order: no deadlock)."""
        with contextlib.ExitStack() as stack:
            for identifier in sorted({i.split("$", 1)[0] for i in identifiers}):
                stack.enter_context(self._tables.hold(identifier))
            yield

    def _stats_of(self, table: Table, snapshot: Snapshot) -> dict[bytes, FileStats]:
        """The file statistics of each partition of ``snapshot`` (cached: its parent's and its
        delta give them where the parent's are cached, else every live file)."""
        key = _stats_key(table, snapshot)
        with self._stats_guard:
            found = self._stats.get(key)
            if found is not None:
                self._stats.move_to_end(key)
                return found
        found = self._from_parent(table, snapshot)
        if found is None:
            groups = group_files(table.live_entries(snapshot), lambda e: e.partition)
            found = {p: FileStats(n, size, count, last or 0, buckets)
                     for p, (n, size, count, last, buckets) in groups.items()}  # fmt: skip
        with self._stats_guard:
            self._stats[key] = found
            while len(self._stats) > STATS_CACHED:
                self._stats.popitem(last=False)
        return found

    def _from_parent(self, table: Table, snapshot: Snapshot) -> dict[bytes, FileStats] | None:
        """The statistics of ``snapshot`` as its parent's (``id - 1``) plus what it adds and less
        what it removes; None where the parent's are not cached, or where a removed file was the
        newest of its partition (which file is newest now, only a full count tells)."""
        try:
            parent = table.snapshots.snapshot(snapshot.id - 1)
        except SnapshotNotFoundError:
            return None
        with self._stats_guard:
            base = self._stats.get(_stats_key(table, parent))
        if base is None:
            return None
        sums = {p: [s.record_count, s.file_size_in_bytes, s.file_count, s.last_file_creation_time,
                    s.total_buckets] for p, s in base.items()}  # fmt: skip
        delta = sorted(table.delta_entries(snapshot), key=lambda e: e.kind != FileKind.ADD)  # adds first
        for entry in delta:
            created = entry.file.creation_time or 0
            group = sums.setdefault(entry.partition, [0, 0, 0, 0, entry.total_buckets])
            if entry.kind == FileKind.ADD:
                group[0] += entry.file.row_count
                group[1] += entry.file.file_size
                group[2] += 1
                group[3] = max(group[3], created)
            elif created >= group[3]:
                return None
            else:
                group[0] -= entry.file.row_count
                group[1] -= entry.file.file_size
                group[2] -= 1
        return {p: FileStats(*g) for p, g in sums.items() if g[2] > 0}

    def _totals(self, table: Table, snapshot: Snapshot) -> FileStats:
        parts = self._stats_of(table, snapshot).values()
        return FileStats(
            sum(s.record_count for s in parts),
            sum(s.file_size_in_bytes for s in parts),
            sum(s.file_count for s in parts),
            max((s.last_file_creation_time for s in parts), default=0),
            max((s.total_buckets for s in parts), default=0),
        )


def _stats_key(table: Table, snapshot: Snapshot) -> tuple[Any, ...]:
    """What tells a snapshot of a table from any other, a rolled-back one of the same id included."""
    return (table.paths.root, table.branch, snapshot.id, snapshot.time_millis, snapshot.uuid)


def table_id(table: Table) -> str:
    """A table's ``id``: its identity on the main branch, the same for each of its branches
    (a commit's path names the branch)."""
    return (table if table.branch == MAIN_BRANCH else table.on_branch(MAIN_BRANCH)).identity


def _schema_json(schema: TableSchema) -> dict[str, Any]:
    """A table's schema as ``GetTableResponse`` gives it (Paimon's ``Schema``)."""
    return {
        "fields": [f.to_json() for f in schema.fields],
        "partitionKeys": list(schema.partition_keys),
        "primaryKeys": list(schema.primary_keys),
        "options": dict(schema.options),
        "comment": schema.comment,
    }


def _spec_value(text: str | None, default: str) -> str:
    """A partition value as a spec holds it: the default partition name for null or blank."""
    return default if text is None or not text.strip() else text


def _tag(table: Table, name: str) -> Snapshot:
    """The snapshot of tag ``name``; ``TagNotFoundError`` (404 TAG) if the table has none."""
    try:
        return table.snapshots.tag(name)
    except SnapshotNotFoundError as e:
        raise TagNotFoundError(str(e)) from None


def _check_files(table: Table, snapshot: Snapshot) -> None:
    """Refuse a snapshot that would break the table: of a schema it lacks, or naming manifest
    files that are missing or elsewhere (a manifest list is a file name of ``manifest/``)."""
    if snapshot.schema_id not in table.schema_manager.schema_ids():
        raise InvalidArgumentError(
            f"table {table.name}: the snapshot has schema {snapshot.schema_id}, which the table lacks"
        )
    lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list,
             snapshot.index_manifest]  # fmt: skip
    for name in filter(None, lists):
        path = table.paths.manifest(checked_name("manifest file", name, table.name))
        if not table.io.exists(path):
            raise InvalidArgumentError(
                f"table {table.name}: the snapshot names {path}, which does not exist; write the "
                f"manifests first"
            )
