"""A catalog's databases and tables as a Paimon REST catalog server keeps them: what
:class:`lakehouse.Catalog` does when its warehouse is an ``http://`` URL (or ``metastore=rest``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakehouse.errors import DatabaseNotFoundError, TableNotFoundError
from lakehouse.io.fs import FileIO
from lakehouse.paths import MAIN_BRANCH, TablePaths
from lakehouse.rest.client import Endpoint, RestMetastore, connect, schema_request
from lakehouse.rest.protocol import Resources
from lakehouse.schema import SchemaManager, TableSchema
from lakehouse.table.table import Table


class RestCatalog:
    """The requests behind each catalog operation; names arrive checked by the catalog."""

    def __init__(self, warehouse: str, options: Mapping[str, str]) -> None:
        self.endpoint: Endpoint
        self.endpoint, self.options = connect(warehouse, options)

    @property
    def _paths(self) -> Resources:
        return self.endpoint.resources

    def list_databases(self) -> list[str]:
        return sorted(self.endpoint.pages(self._paths.databases(), "databases"))

    def database_exists(self, database: str) -> bool:
        try:
            self.endpoint.request("GET", self._paths.database(database))
            return True
        except DatabaseNotFoundError:
            return False

    def create_database(self, database: str) -> None:
        self.endpoint.request("POST", self._paths.databases(), {"name": database, "options": {}})

    def drop_database(self, database: str) -> None:
        self.endpoint.request("DELETE", self._paths.database(database))

    def list_tables(self, database: str) -> list[str]:
        return sorted(self.endpoint.pages(self._paths.tables(database), "tables"))

    def table_exists(self, identifier: str) -> bool:
        try:
            self._describe(identifier)
            return True
        except TableNotFoundError:
            return False

    def create_table(self, identifier: str, schema: TableSchema) -> None:
        database = identifier.split(".", 1)[0]
        self.endpoint.request("POST", self._paths.tables(database), schema_request(identifier, schema))

    def load_table(self, identifier: str, branch: str) -> Table:
        """The table at the path the server gives, under the schema it names, committing through
        the server; on ``branch`` (its own latest schema)."""
        answer = self._describe(identifier)
        io, root = FileIO.for_uri(answer["path"], self.options)
        schema = SchemaManager(io, TablePaths(root), identifier).schema(int(answer["schemaId"]))
        metastore = RestMetastore(self.endpoint, identifier.split(".", 1)[0], str(answer["id"]))
        table = Table(io, root, identifier, schema, metastore=metastore)
        return table if branch == MAIN_BRANCH else table.on_branch(branch)

    def drop_table(self, identifier: str) -> None:
        database, name = identifier.split(".", 1)
        self.endpoint.request("DELETE", self._paths.table(database, name))

    def rename_table(self, source: str, destination: str) -> None:
        (sdb, sname), (ddb, dname) = source.split(".", 1), destination.split(".", 1)
        body = {
            "source": {"database": sdb, "object": sname},
            "destination": {"database": ddb, "object": dname},
        }
        self.endpoint.request("POST", self._paths.rename_table(), body)

    def _describe(self, identifier: str) -> dict[str, Any]:
        database, name = identifier.split(".", 1)
        answer: dict[str, Any] = self.endpoint.request("GET", self._paths.table(database, name))
        return answer


def _identifier(identifier: str) -> dict[str, str]:
    """``db.t`` as Paimon's ``Identifier`` JSON."""
    database, name = identifier.split(".", 1)
    return {"database": database, "object": name}
