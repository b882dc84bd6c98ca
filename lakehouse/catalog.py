"""The filesystem catalog: databases are ``<warehouse>/<db>.db`` directories, tables live inside.

A table exists when its ``schema/schema-0`` exists; creating it is a create-if-absent of that
file, so two processes creating the same table cannot both succeed (``FileSystemCatalog``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse.errors import (
    DatabaseExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidArgumentError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from lakehouse.iceberg.metadata import delete_iceberg_metadata, try_sync_iceberg
from lakehouse.io.fs import FileIO, join, storage_options
from lakehouse.paths import MAIN_BRANCH, TablePaths, normalize_branch
from lakehouse.rest.catalog import RestCatalog
from lakehouse.rest.client import is_rest
from lakehouse.schema import SchemaManager, TableSchema, define_schema, new_schema
from lakehouse.system import BRANCH_PREFIX, SYSTEM_DATABASE, SystemTable, is_system_name, split_identifier
from lakehouse.table.table import Table
from lakehouse.table.validation import check_mechanisms
from lakehouse.types import DataField

DB_SUFFIX = ".db"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
MAX_NAME = 200  # a directory name of every filesystem, with room for suffixes
BRANCH_OPTION = "branch"  # CoreOptions.BRANCH: the branch a table is opened on


class Catalog:
    """Databases and tables of one warehouse: a local path or a ``file://``, ``s3://``, ``hdfs://``
    URI, or the ``http://`` URL of a Paimon REST catalog server (its options: ``token``, the
    server's ``warehouse`` name; see :mod:`lakehouse.rest.client`)."""

    io: FileIO  # a filesystem catalog's warehouse
    root: str

    def __init__(self, warehouse: str, *, options: Mapping[str, str] | None = None) -> None:
        self.warehouse = warehouse
        self.options = dict(options or {})
        self._rest = RestCatalog(warehouse, self.options) if is_rest(warehouse, self.options) else None
        if self._rest is None:
            self.io, self.root = FileIO.for_uri(warehouse, self.options)

    def __repr__(self) -> str:
        return f"Catalog({self.warehouse!r})"

    # ---- databases -----------------------------------------------------------------------

    def _db_path(self, database: str) -> str:
        _check_name(database, "database")
        return join(self.root, database + DB_SUFFIX)

    def list_databases(self) -> list[str]:
        if self._rest is not None:
            return self._rest.list_databases()
        return sorted(
            st.name[: -len(DB_SUFFIX)]
            for st in self.io.list_dir(self.root)
            if st.is_dir and st.name.endswith(DB_SUFFIX)
        )

    def database_exists(self, database: str) -> bool:
        if self._rest is not None:
            _check_name(database, "database")
            return self._rest.database_exists(database)
        return self.io.dir_exists(self._db_path(database))

    def create_database(self, database: str, *, ignore_if_exists: bool = False) -> None:
        if database == SYSTEM_DATABASE:
            raise InvalidArgumentError(
                f"database name {database!r} is reserved for the catalog's system tables "
                f"({SYSTEM_DATABASE}.all_table_options, ...); choose another name"
            )
        if self.database_exists(database):
            if ignore_if_exists:
                return
            raise DatabaseExistsError(
                f"database {database!r} already exists in {self.warehouse}; pass ignore_if_exists=True to "
                f"keep it"
            )
        if self._rest is not None:
            self._rest.create_database(database)
        else:
            self.io.mkdirs(self._db_path(database))

    def drop_database(
        self, database: str, *, ignore_if_not_exists: bool = False, cascade: bool = False
    ) -> None:
        if not self.database_exists(database):
            if ignore_if_not_exists:
                return
            raise DatabaseNotFoundError(f"database {database!r} does not exist in {self.warehouse}")
        tables = self.list_tables(database)
        if tables and not cascade:
            raise DatabaseNotEmptyError(
                f"database {database!r} still holds tables {tables}; drop them or pass cascade=True"
            )
        if self._rest is not None:
            self._rest.drop_database(database)
        else:
            self.io.delete_dir(self._db_path(database))

    # ---- tables --------------------------------------------------------------------------

    def _names(self, identifier: str) -> tuple[str, str]:
        """The database and table ``identifier`` names, both checked."""
        database, table = _split(identifier)
        _check_name(database, "database")
        _check_name(table, "table")
        return database, table

    def _table_path(self, identifier: str) -> tuple[str, str, str]:
        """Database, table and directory of a table of a filesystem catalog."""
        database, table = self._names(identifier)
        return database, table, join(self._db_path(database), table)

    def list_tables(self, database: str) -> list[str]:
        if not self.database_exists(database):
            raise DatabaseNotFoundError(f"database {database!r} does not exist in {self.warehouse}")
        if self._rest is not None:
            return self._rest.list_tables(database)
        db = self._db_path(database)
        return sorted(
            st.name
            for st in self.io.list_dir(db)
            if st.is_dir and self.io.exists(TablePaths(st.path).schema(0))
        )

    def table_exists(self, identifier: str) -> bool:
        if self._rest is not None:
            self._names(identifier)
            return self._rest.table_exists(identifier)
        _, _, path = self._table_path(identifier)
        return bool(SchemaManager(self.io, TablePaths(path), identifier).schema_ids())

    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        *,
        primary_keys: list[str] | None = None,
        partition_keys: list[str] | None = None,
        options: Mapping[str, Any] | None = None,
        ignore_if_exists: bool = False,
        comment: str | None = None,
    ) -> Table:
        """Create a Paimon table from an Arrow schema (``nullable=False`` -> NOT NULL)."""
        return self._create(
            identifier,
            ignore_if_exists,
            lambda: define_table(
                identifier,
                schema,
                primary_keys=primary_keys,
                partition_keys=partition_keys,
                options=options,
                comment=comment,
            ),
        )

    def create_table_from_fields(
        self,
        identifier: str,
        fields: Sequence[DataField],
        *,
        primary_keys: list[str] | None = None,
        partition_keys: list[str] | None = None,
        options: Mapping[str, Any] | None = None,
        ignore_if_exists: bool = False,
        comment: str | None = None,
    ) -> Table:
        """Create a Paimon table from its columns as Paimon's schema JSON gives them (a REST catalog
        client's ``CreateTableRequest``), their field ids kept; validated as :meth:`create_table`
        validates."""
        return self._create(
            identifier,
            ignore_if_exists,
            lambda: check_mechanisms(
                define_schema(
                    identifier, fields, list(primary_keys or []), list(partition_keys or []), options or {},
                    comment,
                ),
                identifier,
            ),
        )  # fmt: skip

    def _create(self, identifier: str, ignore_if_exists: bool, define: Callable[[], TableSchema]) -> Table:
        """Create the table whose schema ``define()`` builds and validates (once nothing is in the way)."""
        database, _ = self._names(identifier)
        if not self.database_exists(database):
            raise DatabaseNotFoundError(
                f"database {database!r} does not exist in {self.warehouse}; create it with "
                f"catalog.create_database({database!r})"
            )
        if self.table_exists(identifier):
            if ignore_if_exists:
                return self.load_table(identifier)
            raise TableExistsError(
                f"table {identifier} already exists in {self.warehouse}; open it with catalog.get_table, or "
                f"pass ignore_if_exists=True"
            )
        table_schema = define()
        try:
            if self._rest is not None:
                self._rest.create_table(identifier, table_schema)
                return self.load_table(identifier)
            _, _, path = self._table_path(identifier)
            SchemaManager(self.io, TablePaths(path), identifier).create(table_schema)
        except TableExistsError:
            if ignore_if_exists:
                return self.load_table(identifier)
            raise
        return Table(self.io, path, identifier, table_schema)

    def get_table(
        self, identifier: str, *, options: Mapping[str, str] | None = None, branch: str | None = None
    ) -> Table | SystemTable:
        """A table (:meth:`load_table`), or a system table (``db.t$snapshots``,
        ``sys.all_table_options``, ...; see :mod:`lakehouse.system`) whose ``options`` may pick a
        snapshot (``scan.snapshot-id``).

        The table (or its system table) on a branch: ``db.t$branch_<b>`` (``db.t$branch_<b>$snapshots``),
        ``branch="b"`` or the option ``branch`` (Paimon's); ``main`` is the table itself."""
        if is_system_name(identifier):
            from lakehouse.system import load

            if "$" not in identifier:
                return load(self, identifier, options)
            base, named, system = split_identifier(identifier)
            branch = _one_branch(identifier, named, branch, (options or {}).get(BRANCH_OPTION))
            on_branch = base if branch == MAIN_BRANCH else f"{base}${BRANCH_PREFIX}{branch}"
            return load(self, f"{on_branch}${system}", options)
        return self.load_table(identifier, options=options, branch=branch)

    def load_table(
        self, identifier: str, *, options: Mapping[str, str] | None = None, branch: str | None = None
    ) -> Table:
        """The table ``identifier`` names (``db.t``, or ``db.t$branch_<b>`` on a branch), not a system
        table; ``options``: dynamic options of the handle (see :meth:`Table.copy`), among them
        Paimon's ``branch``."""
        if is_system_name(identifier):
            raise InvalidArgumentError(
                f"{identifier} is a system table, read-only: open it with catalog.get_table({identifier!r})"
            )
        base, named, _ = (
            split_identifier(identifier) if isinstance(identifier, str) else (identifier, None, None)
        )
        dynamic = _dynamic(options, self.warehouse)
        branch = _one_branch(identifier, named, branch, (options or {}).get(BRANCH_OPTION))
        if self._rest is not None:
            self._names(base)
            table = self._rest.load_table(base, branch)
            return table.copy(dynamic) if dynamic else table
        database, _, path = self._table_path(base)
        latest = SchemaManager(self.io, TablePaths(path), base).latest()
        if latest is None:
            if not self.database_exists(database):
                hint = f"there is no database {database!r} either; databases are {self.list_databases()}"
            else:
                hint = f"tables of {database} are {self.list_tables(database)}"
            raise TableNotFoundError(
                f"table {base} does not exist in {self.warehouse}; check the name ({hint}) or create "
                f"it with catalog.create_table"
            )
        table = Table(self.io, path, base, latest).on_branch(branch)
        return table.copy(dynamic) if dynamic else table

    def drop_table(self, identifier: str, *, ignore_if_not_exists: bool = False) -> None:
        if not self.table_exists(identifier):
            if ignore_if_not_exists:
                return
            raise TableNotFoundError(f"table {identifier} does not exist in {self.warehouse}")
        if self._rest is not None:
            self._rest.drop_table(identifier)
            return
        _, _, path = self._table_path(identifier)
        delete_iceberg_metadata(self.load_table(identifier).store)
        self.io.delete_dir(path)

    def rename_table(self, source: str, destination: str, *, ignore_if_not_exists: bool = False) -> None:
        """Rename table ``source`` to ``destination`` (``db.t``, in the same database or another):
        its directory moves, with its branches, tags and files (``FileSystemCatalog.renameTable``).
        Handles opened under the old name lose the table. Iceberg metadata, which names files by
        absolute path, is written anew for the new location.

        Local filesystems and HDFS rename a directory at once; object stores have no such rename,
        so there it is refused rather than made of copies a crash could leave half done."""
        if self._rest is not None:
            self._names(source)
            self._names(destination)
            if ignore_if_not_exists and not self.table_exists(source):
                return
            self._rest.rename_table(source, destination)
            return
        _, _, source_path = self._table_path(source)
        database, _, target_path = self._table_path(destination)
        if not (self.io.is_local or self.io.is_hdfs):
            raise UnsupportedFeatureError(
                f"cannot rename table {source} to {destination}: {self.warehouse} is on an object store, "
                f"which cannot rename a directory; create {destination}, copy the rows "
                f"(catalog.load_table({source!r}).read()) and drop {source}"
            )
        if not self.table_exists(source):
            if ignore_if_not_exists:
                return
            raise TableNotFoundError(f"table {source} does not exist in {self.warehouse}; nothing to rename")
        if not self.database_exists(database):
            raise DatabaseNotFoundError(
                f"cannot rename table {source} to {destination}: database {database!r} does not exist in "
                f"{self.warehouse}; create it first"
            )
        if self.io.dir_exists(target_path):  # a table, or what a dropped one left
            raise TableExistsError(
                f"cannot rename table {source} to {destination}: {target_path} already exists; choose "
                f"another name or drop {destination} first"
            )
        delete_iceberg_metadata(self.load_table(source).store)
        self.io.fs.move(source_path, target_path)
        # the Iceberg metadata names files by absolute path: describe them where they are now
        try_sync_iceberg(self.load_table(destination).store, f"renaming {source} to {destination}")


def define_table(
    identifier: str,
    schema: pa.Schema,
    *,
    primary_keys: list[str] | None = None,
    partition_keys: list[str] | None = None,
    options: Mapping[str, Any] | None = None,
    comment: str | None = None,
) -> TableSchema:
    """The Paimon schema :meth:`Catalog.create_table` creates for these arguments, validated as it
    validates them (a bad definition raises before anything is written); writes nothing."""
    defined = new_schema(
        identifier, schema, list(primary_keys or []), list(partition_keys or []), options or {}, comment
    )
    return check_mechanisms(defined, identifier)


def table_at(path: str, *, options: Mapping[str, str] | None = None, branch: str | None = None) -> Table:
    """The table stored at ``path`` (a local path or URI), read without a catalog, on ``branch``
    (default ``main``); ``options``: how to reach its store (as a catalog's), and the dynamic
    options of the handle (see :meth:`Table.copy`).

    Its name is ``<database>.<table>`` when it sits in a catalog's database directory.
    """
    io, root = FileIO.for_uri(path, options)
    parent, _, leaf = root.rstrip("/").rpartition("/")
    database = parent.rpartition("/")[2]
    name = f"{database[: -len(DB_SUFFIX)]}.{leaf}" if database.endswith(DB_SUFFIX) else leaf
    latest = SchemaManager(io, TablePaths(root), name).latest()
    if latest is None:
        raise TableNotFoundError(f"no Paimon table at {path} (it has no schema files); check the path")
    dynamic = _dynamic(options, path)
    branch = _one_branch(path, branch, (options or {}).get(BRANCH_OPTION))
    table = Table(io, root, name, latest).on_branch(branch)
    return table.copy(dynamic) if dynamic else table


def _dynamic(options: Mapping[str, str] | None, warehouse: str) -> dict[str, str]:
    """The dynamic options among the options a table is opened with: not the branch, not how to
    reach its store."""
    storage = storage_options(options or {}, warehouse)
    return {k: v for k, v in (options or {}).items() if k != BRANCH_OPTION and k not in storage}


def _one_branch(identifier: str, *given: str | None) -> str:
    """The branch an identifier, a ``branch=`` argument and a ``branch`` option name together
    (``main`` if none); naming two different ones is an error."""
    named = {normalize_branch(b) for b in given if b is not None}
    if len(named) > 1:
        raise InvalidArgumentError(
            f"table {identifier}: branches {sorted(named)} named at once; name one, in the identifier "
            f"(db.t$branch_<name>), the branch argument or the {BRANCH_OPTION!r} option"
        )
    return named.pop() if named else MAIN_BRANCH


def _split(identifier: str) -> tuple[str, str]:
    parts = identifier.split(".") if isinstance(identifier, str) else []
    if len(parts) != 2 or not all(parts):
        raise InvalidArgumentError(
            f"table identifier {identifier!r} must look like 'database.table' (letters, digits, '_' and '-')"
        )
    return parts[0], parts[1]


def _check_name(name: str, kind: str) -> None:
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise InvalidArgumentError(
            f"{kind} name {name!r} may only hold letters, digits, '_' and '-', at most {MAX_NAME} of them; "
            f"choose another name"
        )
