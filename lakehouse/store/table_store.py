"""One table's storage: its files and metadata as every layer above the ``Table`` facade needs them.

A ``TableStore`` is a light, picklable handle (filesystem, path, name, schema, branch): schema versions,
snapshots, manifests, bucket directories, the files live in a snapshot, and the one resolver of
time travel (a snapshot by id, time or tag, seen through the schema it was written with) that
reads, system tables and Spark share. Reads, writes, commits and operations take a store; only
the facade, the catalog, system tables, Spark and Dagster know ``Table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakehouse.errors import (
    ArgumentTypeError,
    BranchNotFoundError,
    CorruptFileError,
    InvalidArgumentError,
    TableNotFoundError,
)
from lakehouse.io.fs import FileIO
from lakehouse.manifest import binary_row
from lakehouse.manifest.entries import IndexManifestEntry, ManifestEntry
from lakehouse.manifest.files import ManifestStore
from lakehouse.metastore import Metastore
from lakehouse.options import PARTITION_DEFAULT_NAME
from lakehouse.paths import BRANCH_PREFIX, MAIN_BRANCH, TablePaths, normalize_branch, partition_path
from lakehouse.schema import SchemaManager, TableSchema, with_dynamic_options
from lakehouse.snapshot import Snapshot, SnapshotManager


class TableStore:
    """The files of one Paimon table, as one of its branches sees them, under one schema version.

    ``dynamic``: options of this handle over every schema version's own (Paimon's dynamic
    options: a read's snapshot, a write's buffer size), never stored in the table."""

    def __init__(
        self,
        io: FileIO,
        path: str,
        name: str,
        schema: TableSchema,
        branch: str = MAIN_BRANCH,
        dynamic: Mapping[str, str] | None = None,
        metastore: Metastore | None = None,
    ) -> None:
        self.io = io
        self.paths = TablePaths(path, normalize_branch(branch))
        self.name = name
        self.dynamic = dict(dynamic or {})
        self.metastore = metastore  # the catalog server its commits go through, if it has one
        self.schema = self._seen(schema)
        self._schemas: dict[int, TableSchema] = {schema.id: self.schema}

    def __repr__(self) -> str:
        return f"TableStore({self.name!r}, schema_id={self.schema.id})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "io": self.io,
            "path": self.paths.root,
            "name": self.name,
            "schema": self.schema,
            "branch": self.branch,
            "dynamic": self.dynamic,
            "metastore": self.metastore,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["io"],
            state["path"],
            state["name"],
            state["schema"],
            state["branch"],
            state["dynamic"],
            state.get("metastore"),
        )

    def _seen(self, schema: TableSchema) -> TableSchema:
        """A schema version as this handle sees it: with its dynamic options."""
        return with_dynamic_options(schema, self.name, self.dynamic) if self.dynamic else schema

    def copy(self, options: Mapping[str, str]) -> TableStore:
        """This table with ``options`` as dynamic options over those it has (checked: options
        fixed at creation cannot change)."""
        dynamic = {**self.dynamic, **{k: str(v) for k, v in options.items()}}
        return TableStore(
            self.io, self.paths.root, self.name, self.schema, self.branch, dynamic, self.metastore
        )

    # ---- branches ------------------------------------------------------------------------

    @property
    def branch(self) -> str:
        """The branch this store reads and writes (``main`` by default)."""
        return self.paths.branch

    @property
    def table_name(self) -> str:
        """The table's name without its branch (``db.t`` of ``db.t$branch_b``)."""
        return self.name.split("$", 1)[0]

    def branches(self) -> list[str]:
        """The table's branches other than ``main``, sorted: its ``branch/branch-<name>``
        directories (``FileSystemBranchManager.branches``)."""
        found = [st.name for st in self.io.list_dir(self.paths.branches_dir) if st.is_dir]
        return sorted(name.removeprefix(BRANCH_PREFIX) for name in found if name.startswith(BRANCH_PREFIX))

    def on_branch(self, branch: str | None) -> TableStore:
        """The same table on ``branch`` (``main`` for None), with that branch's latest schema."""
        branch = normalize_branch(branch)
        if branch == self.branch:
            return self
        base = self.table_name
        name = base if branch == MAIN_BRANCH else f"{base}$branch_{branch}"
        paths = self.paths.on_branch(branch)
        latest = SchemaManager(self.io, paths, name).latest()
        if latest is None:
            raise BranchNotFoundError(
                f"table {base} has no branch {branch!r}; its branches are {self.branches()} "
                f"(create one with create_branch)"
            )
        return TableStore(self.io, paths.root, name, latest, branch, self.dynamic, self.metastore)

    def other_branches(self) -> list[TableStore]:
        """The table on each of its other branches, ``main`` included when this is a branch.

        A branch directory without a schema (a ``create_branch`` killed at its first file) is
        a ``CorruptFileError``: nobody can tell which files it needs (as ``OrphanFilesClean``
        refuses such branches)."""
        others = []
        for branch in [MAIN_BRANCH, *self.branches()]:
            if branch == self.branch:
                continue
            try:
                others.append(self.on_branch(branch))
            except BranchNotFoundError:
                raise CorruptFileError(
                    f"table {self.name}: branch {branch!r} has no schema file (a create_branch "
                    f"interrupted?); delete it with delete_branch({branch!r}) and create it again"
                ) from None
        return others

    # ---- metadata ------------------------------------------------------------------------

    @property
    def snapshots(self) -> SnapshotManager:
        return SnapshotManager(self.io, self.paths, self.name, self.metastore)

    @property
    def schema_manager(self) -> SchemaManager:
        return SchemaManager(self.io, self.paths, self.name)

    @property
    def identity(self) -> str:
        """What tells this table from any other, a dropped and re-created one at the same place
        included: its directory name and the creation time of its first schema (as Paimon's
        filesystem tables derive their uuid), and the branch unless ``main``: a branch's
        commit messages do not fit another branch's buckets."""
        identity = f"{self.paths.root.rstrip('/').rsplit('/', 1)[-1]}@{self.schema_by_id(0).time_millis}"
        return identity if self.branch == MAIN_BRANCH else f"{identity}$branch_{self.branch}"

    def schema_by_id(self, schema_id: int) -> TableSchema:
        """A schema version (cached: schema files never change, but for a fast-forward's)."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = self._schemas[schema_id] = self._seen(self.schema_manager.schema(schema_id))
        return found

    def adopt(self, schema: TableSchema) -> None:
        """Make ``schema`` (a newer version of this table's, as stored) the current one."""
        self.schema = self._seen(schema)
        self._schemas[schema.id] = self.schema

    def refresh(self) -> TableStore:
        """Reload the latest schema (after another process changed it)."""
        latest = self.schema_manager.latest()
        if latest is not None and latest.id != self.schema.id:
            self.adopt(latest)
        return self

    def reload(self) -> TableStore:
        """Forget the cached schema versions and load the latest: a fast-forward replaced some."""
        self._schemas = {}
        latest = self.schema_manager.latest()
        if latest is None:
            raise TableNotFoundError(f"table {self.name} has no schema files any more: it was dropped")
        self.adopt(latest)
        return self

    def with_schema(self, schema_id: int) -> TableStore:
        """This table seen through another schema version (sharing the schema cache)."""
        if schema_id == self.schema.id:
            return self
        schema = self.schema_by_id(schema_id)
        view = TableStore(self.io, self.paths.root, self.name, schema, self.branch, metastore=self.metastore)
        view.dynamic = self.dynamic  # (its schema is seen with them already)
        view._schemas = self._schemas
        return view

    def manifests(self) -> ManifestStore:
        return ManifestStore(
            self.io, self.paths, self.schema.partition_types(), self.schema.core_options, self.name
        )

    def bucket_path(self, partition: bytes, bucket: int) -> str:
        """Directory of a bucket relative to the table, e.g. ``dt=2024-01-01/bucket-3``."""
        types = self.schema.partition_types()
        values = binary_row.decode_row(binary_row.deserialize(partition)[1], types)
        default = self.schema.core_options.required(PARTITION_DEFAULT_NAME)
        path = partition_path(list(self.schema.partition_keys), types, values, default)
        return f"{path}/bucket-{bucket}" if path else f"bucket-{bucket}"

    # ---- snapshots -----------------------------------------------------------------------

    def latest_snapshot_id(self) -> int | None:
        return self.snapshots.latest_id()

    def snapshot(
        self, snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None
    ) -> Snapshot | None:
        """The snapshot a read addresses: by id, by time, by tag, or the latest (None if empty)."""
        given = [x for x in (snapshot_id, timestamp_ms, tag) if x is not None]
        if len(given) > 1:
            raise InvalidArgumentError(
                f"table {self.name}: pass at most one of snapshot_id, timestamp_ms and tag, not {given}"
            )
        for name, value in (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ArgumentTypeError(
                    f"table {self.name}: {name} must be an integer (a snapshot id, epoch millis), "
                    f"not {type(value).__name__} {value!r}"
                )
        snapshots = self.snapshots
        if snapshot_id is not None:
            return snapshots.snapshot(snapshot_id)
        if timestamp_ms is not None:
            return snapshots.earlier_or_equal_time(timestamp_ms)
        if tag is not None:
            return snapshots.tag(tag)
        return snapshots.latest()

    def travel(
        self, snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None
    ) -> tuple[Snapshot | None, TableStore]:
        """The addressed snapshot and the table as a read of it sees it: time travel reads with
        the snapshot's schema, the latest snapshot with the current one."""
        snap = self.snapshot(snapshot_id, timestamp_ms, tag)
        time_travel = (snapshot_id, timestamp_ms, tag) != (None, None, None)
        return snap, self.with_schema(snap.schema_id) if time_travel and snap is not None else self

    def live_entries(self, snapshot: Snapshot | None = None) -> list[ManifestEntry]:
        """Manifest entries of the files live in ``snapshot`` (default: latest), in manifest order."""
        snapshot = snapshot or self.snapshots.latest()
        if snapshot is None:
            return []
        manifests = self.manifests()
        return manifests.live_entries(manifests.data_manifests(snapshot))

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The files ``snapshot``'s commit added and deleted, in the order it recorded them."""
        return self.manifests().delta_entries(snapshot)

    def added_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The files ``snapshot``'s commit added (new data or compaction output)."""
        return self.manifests().added_entries(snapshot)

    def index_entries(self, snapshot: Snapshot | None = None) -> list[IndexManifestEntry]:
        """The index files (hash index, deletion vectors) live in ``snapshot`` (default: latest)."""
        snapshot = snapshot or self.snapshots.latest()
        if snapshot is None or snapshot.index_manifest is None:
            return []
        return self.manifests().read_index_manifest(snapshot.index_manifest)
