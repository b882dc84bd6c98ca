"""What client and server of Paimon's REST catalog agree on (``rest-catalog-open-api.yaml``):
resource paths, how names are encoded in them, and error responses, each kind of which is one
exception class of :mod:`lakehouse.errors` on both ends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn
from urllib.parse import quote_plus, unquote_plus

from lakehouse import errors

API_ROOT = "/v1"
CONFIG_PATH = f"{API_ROOT}/config"
AUTHORIZATION = "Authorization"
BEARER = "Bearer "
LOCALHOST = "127.0.0.1"
DEFAULT_PORT = 8181


class ResourceType(StrEnum):
    """What an error response is about (``ErrorResponse.resourceType``)."""

    DATABASE = "DATABASE"
    TABLE = "TABLE"
    COLUMN = "COLUMN"
    SNAPSHOT = "SNAPSHOT"
    TAG = "TAG"
    BRANCH = "BRANCH"
    PARTITION = "PARTITION"


class Access(StrEnum):
    """The right a request needs on a database: ``write`` includes ``read``."""

    READ = "read"
    WRITE = "write"


def encode(name: str) -> str:
    """A name as one path segment (Java's ``URLEncoder``: space as ``+``, ``/`` as ``%2F``)."""
    return quote_plus(name, safe="*")


def decode(segment: str) -> str:
    return unquote_plus(segment)


@dataclass(frozen=True)
class Resources:
    """The paths of a catalog's resources below its prefix (``/v1/<prefix>``)."""

    prefix: str

    @property
    def base(self) -> str:
        return f"{API_ROOT}/{encode(self.prefix)}" if self.prefix else API_ROOT

    def databases(self) -> str:
        return f"{self.base}/databases"

    def database(self, database: str) -> str:
        return f"{self.databases()}/{encode(database)}"

    def tables(self, database: str) -> str:
        return f"{self.database(database)}/tables"

    def table(self, database: str, table: str) -> str:
        return f"{self.tables(database)}/{encode(table)}"

    def rename_table(self) -> str:
        return f"{self.base}/tables/rename"

    def under_table(self, database: str, table: str, *parts: str) -> str:
        """``.../tables/<t>/<part>/...`` (``commit``, ``snapshot``, ``tags``, ``tags/<name>``...):
        each part a name, encoded."""
        return "/".join([self.table(database, table), *(encode(p) for p in parts)])


# ---- errors ----------------------------------------------------------------------------------

# Each error class's status code and resource type. Order matters: subclasses before bases.
_STATUS: list[tuple[type[errors.LakehouseError], int, ResourceType | None]] = [
    (errors.NotAuthorizedError, 401, None),
    (errors.ForbiddenError, 403, None),
    (errors.DatabaseNotFoundError, 404, ResourceType.DATABASE),
    (errors.BranchNotFoundError, 404, ResourceType.BRANCH),
    (errors.TableNotFoundError, 404, ResourceType.TABLE),
    (errors.TagNotFoundError, 404, ResourceType.TAG),
    (errors.SnapshotNotFoundError, 404, ResourceType.SNAPSHOT),
    (errors.DatabaseExistsError, 409, ResourceType.DATABASE),
    (errors.TableExistsError, 409, ResourceType.TABLE),
    (errors.TagExistsError, 409, ResourceType.TAG),
    (errors.BranchExistsError, 409, ResourceType.BRANCH),
    (errors.CommitConflictError, 409, None),
    (errors.UnsupportedFeatureError, 501, None),
    (errors.ServiceError, 500, None),
]
_BAD_REQUEST = 400  # every other LakehouseError: the request cannot be acted on as it is


@dataclass(frozen=True)
class ErrorResponse:
    """Paimon's ``ErrorResponse``: the message, what it is about, and the status code again."""

    message: str
    code: int
    resource_type: ResourceType | None = None
    resource_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "resourceType": None if self.resource_type is None else self.resource_type.value,
            "resourceName": self.resource_name,
            "code": self.code,
        }

    @classmethod
    def of(cls, error: errors.LakehouseError, resource_name: str | None = None) -> ErrorResponse:
        """The response a server sends for ``error``."""
        for kind, code, resource in _STATUS:
            if isinstance(error, kind):
                return cls(str(error), code, resource, resource_name if resource else None)
        return cls(str(error), _BAD_REQUEST)

    @classmethod
    def parse(cls, status: int, body: bytes) -> ErrorResponse:
        """The error a server answered with ``status`` (its body's ``code`` first, as Paimon's
        clients read it; a body that is no error response becomes the message)."""
        try:
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ValueError
            code = int(data.get("code") or status)
            kind = data.get("resourceType")
            resource = (
                ResourceType(kind) if isinstance(kind, str) and kind in ResourceType.__members__ else None
            )
            return cls(str(data.get("message") or body.decode(errors="replace")), code, resource,
                       data.get("resourceName"))  # fmt: skip
        except ValueError:
            return cls(body.decode(errors="replace").strip() or f"HTTP {status}", status)

    def raise_for(self, what: str) -> NoReturn:
        """Raise the exception this response stands for; ``what``: the request, for the message."""
        message = f"{what}: {self.message}"
        for kind, code, resource in _STATUS:
            if code == self.code and (resource is None or resource == self.resource_type):
                raise kind(message)
        if self.code == 404:
            raise errors.TableNotFoundError(message)
        if 400 <= self.code < 500:
            raise errors.InvalidArgumentError(message)
        raise errors.ServiceError(message)
