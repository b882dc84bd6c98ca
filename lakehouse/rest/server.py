"""A Paimon REST catalog server for a warehouse of this engine: ``lakehouse rest-catalog``.

Paimon's clients (pypaimon, Java's ``RESTCatalog``, this engine's ``Catalog("http://...")``) ask
it for databases and tables, commit snapshots and change schemas through it, and read and write
data and manifest files in place at the path it gives each table. It keeps nothing but what the
warehouse's files say (see :mod:`lakehouse.rest.service`), and it is the warehouse's only
committer: on a store without an atomic create, its lock within this process makes commits safe
with no lock database.

Every request carries ``Authorization: Bearer <token>``, checked against :class:`Grants`. Routing
reads the raw path and decodes each segment as Paimon's clients encode it (``+`` is a space).
Errors are Paimon's ``ErrorResponse``; an unexpected one is a 500 with a one-line message, its
trace only in the server's log. What this engine lacks (data tokens, functions, views, database
options, branch renames, partition registration...) is a 501.

Starlette and uvicorn come with the ``rest`` extra; only :func:`create_app` and :func:`serve`
need them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote_plus

from lakehouse.catalog import Catalog
from lakehouse.errors import InvalidArgumentError, LakehouseError, MissingExtraError, ServiceError
from lakehouse.io.fs import REST_SCHEMES
from lakehouse.io.lock import ProcessLock
from lakehouse.rest.grants import Grants
from lakehouse.rest.protocol import DEFAULT_PORT, LOCALHOST, Access, ErrorResponse, ResourceType, decode
from lakehouse.rest.requests import Call
from lakehouse.rest.service import CatalogService

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 << 20  # a schema or a snapshot is kilobytes
DEFAULT_NAME = "lakehouse"
_METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD"]
_BEARER = re.compile(r"Bearer\s+(\S+)\s*", re.IGNORECASE)
# which path parameter names the resource of each kind of error, for ErrorResponse.resourceName
_RESOURCE_PARAMS = {ResourceType.DATABASE: "database", ResourceType.TABLE: "table",
                    ResourceType.TAG: "tag", ResourceType.BRANCH: "branch"}  # fmt: skip

Handler = Callable[[CatalogService, Call], Any]


@dataclass(frozen=True)
class Endpoint:
    """One operation: its method, its path below ``/v1/<prefix>`` (``{name}`` segments are
    parameters) and the right it needs on the path's database (none named: the catalog, which
    every token may read; the handler checks what else it touches)."""

    method: str
    path: tuple[str, ...]
    access: Access
    handle: Handler

    def match(self, method: str, segments: list[str]) -> dict[str, str] | None:
        if method != self.method or len(segments) != len(self.path):
            return None
        params = {}
        for pattern, segment in zip(self.path, segments, strict=True):
            if pattern.startswith("{"):
                params[pattern[1:-1]] = segment
            elif pattern != segment:
                return None
        return params


def _endpoint(method: str, path: str, access: Access, handle: Handler) -> Endpoint:
    return Endpoint(method, tuple(path.split("/")), access, handle)


_TABLE = "databases/{database}/tables/{table}"
ENDPOINTS = [
    _endpoint("GET", "databases", Access.READ, CatalogService.list_databases),
    _endpoint("POST", "databases", Access.READ, CatalogService.create_database),
    _endpoint("GET", "databases/{database}", Access.READ, CatalogService.get_database),
    _endpoint("DELETE", "databases/{database}", Access.WRITE, CatalogService.drop_database),
    _endpoint("GET", "databases/{database}/tables", Access.READ, CatalogService.list_tables),
    _endpoint("POST", "databases/{database}/tables", Access.WRITE, CatalogService.create_table),
    _endpoint("POST", "tables/rename", Access.READ, CatalogService.rename_table),
    _endpoint("GET", _TABLE, Access.READ, CatalogService.get_table),
    _endpoint("POST", _TABLE, Access.WRITE, CatalogService.alter_table),
    _endpoint("DELETE", _TABLE, Access.WRITE, CatalogService.drop_table),
    _endpoint("GET", f"{_TABLE}/snapshot", Access.READ, CatalogService.snapshot),
    _endpoint("POST", f"{_TABLE}/commit", Access.WRITE, CatalogService.commit),
    _endpoint("POST", f"{_TABLE}/rollback", Access.WRITE, CatalogService.rollback),
    _endpoint("GET", f"{_TABLE}/partitions", Access.READ, CatalogService.partitions),
    _endpoint("GET", f"{_TABLE}/tags", Access.READ, CatalogService.list_tags),
    _endpoint("POST", f"{_TABLE}/tags", Access.WRITE, CatalogService.create_tag),
    _endpoint("GET", f"{_TABLE}/tags/{{tag}}", Access.READ, CatalogService.get_tag),
    _endpoint("DELETE", f"{_TABLE}/tags/{{tag}}", Access.WRITE, CatalogService.delete_tag),
    _endpoint("GET", f"{_TABLE}/branches", Access.READ, CatalogService.list_branches),
    _endpoint("POST", f"{_TABLE}/branches", Access.WRITE, CatalogService.create_branch),
    _endpoint("DELETE", f"{_TABLE}/branches/{{branch}}", Access.WRITE, CatalogService.delete_branch),
    _endpoint("POST", f"{_TABLE}/branches/{{branch}}/forward", Access.WRITE, CatalogService.forward_branch),
]


class CatalogServer:
    """Requests in, responses out: authentication, routing, bodies and errors around a
    :class:`CatalogService` (no web framework: :func:`create_app` wraps it)."""

    def __init__(self, catalog: Catalog, grants: Grants, name: str) -> None:
        if not name or "/" in name:
            raise InvalidArgumentError(f"catalog name {name!r} must be a non-empty name without '/'")
        if catalog.io.lock is None:  # a configured catalog lock reaches other processes too
            catalog.io.lock = ProcessLock()
        self.service = CatalogService(catalog, name)
        self.grants = grants

    @property
    def name(self) -> str:
        return self.service.name

    def respond(
        self, method: str, raw_path: str, query: Mapping[str, str], authorization: str | None, body: bytes
    ) -> tuple[int, Any]:
        """The status and JSON payload (None: no body) of one request; ``raw_path``: its path as
        sent, percent-encoded."""
        params: dict[str, str] = {}
        try:
            found = _BEARER.fullmatch(authorization or "")
            rights = self.grants.rights(found.group(1) if found else None)
            segments = [decode(s) for s in raw_path.strip("/").split("/")]
            if segments == ["v1", "config"] and method == "GET":
                return self.config(query)
            if segments[:1] != ["v1"] or len(segments) < 2 or segments[1] != self.name:
                base = self.service.resources.base
                return _no_such_catalog(f"this server serves {base}/..., not {raw_path}")
            for endpoint in ENDPOINTS:
                matched = endpoint.match(method, segments[2:])
                if matched is not None:
                    params = matched
                    rights.check(params.get("database"), endpoint.access)
                    payload = endpoint.handle(self.service, Call(params, query, _json(body), rights))
                    return 200, payload
            return 501, ErrorResponse(
                f"{method} {raw_path} is not implemented by this catalog server: it serves databases, "
                f"tables, snapshot commits, tags, branches and partition listings of a warehouse of "
                f"files, not data tokens, functions, views, database options or branch renames",
                501,
            ).to_json()
        except LakehouseError as e:
            error = ErrorResponse.of(e)
            if error.resource_type in _RESOURCE_PARAMS:
                error = replace(error, resource_name=params.get(_RESOURCE_PARAMS[error.resource_type]))
            return error.code, error.to_json()
        except Exception as e:  # a bug or a failing store: logged whole, answered in one line
            log.exception("%s %s failed", method, raw_path)
            return 500, ErrorResponse(
                f"the catalog server failed on {method} {raw_path} ({type(e).__name__}); its log says why",
                500,
            ).to_json()

    def config(self, query: Mapping[str, str]) -> tuple[int, Any]:
        """``GET /v1/config``: the prefix of this catalog, if it is the one asked for by name or
        location (``warehouse``; Paimon's clients encode it twice)."""
        asked = query.get("warehouse")
        catalog = self.service.catalog
        known = {self.name, catalog.warehouse, catalog.root, self.service.location(catalog.root)}
        if asked and not {asked, unquote_plus(asked)} & (known | {k.rstrip("/") for k in known}):
            return _no_such_catalog(
                f"this server serves the catalog {self.name!r} (warehouse {catalog.warehouse}), not "
                f"{asked!r}; set the client's warehouse option to {self.name!r}"
            )
        return 200, {"defaults": {"prefix": self.name}, "overrides": {}}


def _no_such_catalog(message: str) -> tuple[int, Any]:
    return 404, ErrorResponse(message, 404).to_json()


def _json(body: bytes) -> object:
    """The JSON of a request body (None for none); Paimon's clients send no Content-Type."""
    if len(body) > MAX_BODY_BYTES:
        raise InvalidArgumentError(f"the request body exceeds {MAX_BODY_BYTES} bytes")
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise InvalidArgumentError(f"the request body is not JSON ({e})") from None


def create_app(
    warehouse: str, grants: Grants, *, name: str = DEFAULT_NAME, options: Mapping[str, str] | None = None
) -> Starlette:
    """The server of ``warehouse`` (a local path or an ``s3://``, ``hdfs://`` URI; ``options``:
    the catalog's, e.g. object-store settings) as an ASGI app, serving catalog ``name``."""
    try:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route
    except ImportError as e:
        raise MissingExtraError("the REST catalog server", "rest", e) from e
    if warehouse.partition("://")[0] in REST_SCHEMES:
        raise InvalidArgumentError(
            f"warehouse {warehouse!r} is a REST catalog; a catalog server serves a warehouse of files"
        )
    server = CatalogServer(Catalog(warehouse, options=options), grants, name)

    async def endpoint(request: Request) -> Response:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                break
        raw = request.scope.get("raw_path")
        path = raw.decode("latin-1") if raw else quote(request.url.path)
        status, payload = await run_in_threadpool(
            server.respond, request.method, path, request.query_params, request.headers.get("authorization"),
            bytes(body),
        )  # fmt: skip
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        content = b"" if payload is None else json.dumps(payload).encode()
        return Response(content, status, headers, "application/json")

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)])


def serve(app: Starlette, *, host: str = LOCALHOST, port: int = DEFAULT_PORT) -> None:
    """Serve ``app`` until interrupted (uvicorn)."""
    _uvicorn(app, host, port, "info").run()


class Serving:
    """``app`` served by uvicorn in a thread of this process while the ``with`` block runs (for a
    command run beside it, or a test)."""

    def __init__(
        self, app: Starlette, *, host: str = LOCALHOST, port: int = DEFAULT_PORT, log_level: str = "info"
    ) -> None:
        self.server = _uvicorn(app, host, port, log_level)
        self.thread = threading.Thread(target=self.server.run, name="rest-catalog", daemon=True)
        self.url = f"http://{host}:{port}"

    def __enter__(self) -> Serving:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ServiceError(f"the REST catalog server did not start at {self.url}; see its log above")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def _uvicorn(app: Starlette, host: str, port: int, log_level: str) -> uvicorn.Server:
    try:
        import uvicorn
    except ImportError as e:
        raise MissingExtraError("the REST catalog server", "rest", e) from e
    if host not in (LOCALHOST, "localhost", "::1"):
        print(
            f"warning: serving plain HTTP on {host}: bearer tokens cross the network in clear; put a TLS "
            f"proxy in front of this server",
            file=sys.stderr,
        )
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level))
