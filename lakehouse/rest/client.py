"""This engine as a client of a Paimon REST catalog server: the catalog's requests (databases,
tables, schema changes) and the :class:`RestMetastore` its tables commit snapshots through.

Options are Paimon's: ``uri`` (or an ``http://`` warehouse), ``warehouse`` (the server's catalog
name), ``token`` with ``token.provider=bear`` (the default here), ``prefix`` over the server's,
``header.<Name>`` for extra headers. Data and manifest files are read and written in place, at the
path the server gives each table; object-store settings come from the same options.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from lakehouse.errors import InvalidOptionError, ServiceError, TableNotFoundError, UnsupportedFeatureError
from lakehouse.io.fs import REST_SCHEMES
from lakehouse.options import HEADER_PREFIX, TOKEN, TOKEN_PROVIDER
from lakehouse.options import REST_PREFIX as PREFIX
from lakehouse.rest.protocol import AUTHORIZATION, BEARER, CONFIG_PATH, ErrorResponse, Resources
from lakehouse.schema import TableSchema
from lakehouse.schema_change import SchemaChange, change_to_json
from lakehouse.snapshot import Snapshot

URI = "uri"
WAREHOUSE = "warehouse"
METASTORE = "metastore"
REST = "rest"
TIMEOUT_S = 180  # a request's connect and read timeout, as Paimon's clients
UNREACHABLE_RETRY_S = 60  # how long a commit keeps trying a server it cannot reach (a restart)
PAGE = 1000


def is_rest(warehouse: str, options: Mapping[str, str]) -> bool:
    """Whether a catalog of ``warehouse`` and ``options`` is a REST catalog's client."""
    return options.get(METASTORE) == REST or urlsplit(warehouse).scheme in REST_SCHEMES


class Unreachable(ServiceError):
    """The server could not be reached: no answer, which a request may retry (a restart)."""


@dataclass(frozen=True)
class Endpoint:
    """A server and how to talk to it: picklable, so tables carry it into Spark tasks."""

    uri: str
    token: str
    prefix: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def resources(self) -> Resources:
        return Resources(self.prefix)

    def request(
        self, method: str, path: str, body: Any = None, query: Mapping[str, str] | None = None
    ) -> Any:
        """The JSON a request answers (None for an empty body); the typed error it answers with,
        else ``ServiceError`` when the server cannot be reached."""
        target = path + ("?" + urlencode(query) if query else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = {AUTHORIZATION: BEARER + self.token, "Accept": "application/json", **dict(self.headers)}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {path} on {self.uri}"
        status, data = _exchange(self.uri, method, target, payload, headers, what)
        if status >= 400:
            ErrorResponse.parse(status, data).raise_for(what)
        return json.loads(data) if data.strip() else None

    def pages(self, path: str, key: str, query: Mapping[str, str] | None = None) -> Iterator[Any]:
        """Every item of a paged listing (``nextPageToken``)."""
        token = None
        while True:
            page = {"maxResults": str(PAGE), **(query or {}), **({"pageToken": token} if token else {})}
            answer = self.request("GET", path, query=page)
            yield from answer.get(key) or []
            token = answer.get("nextPageToken")
            if not token:
                return


def connect(warehouse: str, options: Mapping[str, str]) -> tuple[Endpoint, dict[str, Any]]:
    """The endpoint a catalog's options name, after asking the server for its configuration
    (``GET /v1/config``); also the merged options (server defaults < the client's < overrides)."""
    uri = options.get(URI) or warehouse
    if urlsplit(uri).scheme not in REST_SCHEMES:
        raise InvalidOptionError(f"REST catalog: uri {uri!r} must be an http:// or https:// URL", URI)
    provider = options.get(TOKEN_PROVIDER, "bear")
    if provider != "bear":
        raise UnsupportedFeatureError(
            f"REST catalog at {uri}: {TOKEN_PROVIDER}={provider!r} is not supported; use bear with the "
            f"option {TOKEN}"
        )
    token = options.get(TOKEN)
    if not token:
        raise InvalidOptionError(
            f"REST catalog at {uri}: no {TOKEN!r} option; pass the bearer token the server's operator "
            f"gave you, e.g. Catalog({uri!r}, options={{'token': ...}})",
            TOKEN,
        )
    bare = Endpoint(uri.rstrip("/"), token)
    # the server's catalog: Paimon's warehouse option, or the warehouse a catalog names beside a uri
    name = options.get(WAREHOUSE) or (warehouse if warehouse != uri else "")
    try:
        config = bare.request("GET", CONFIG_PATH, query={WAREHOUSE: name} if name else None)
    except TableNotFoundError as e:  # a 404: the server serves another catalog
        raise InvalidOptionError(f"REST catalog at {uri}: {e}", WAREHOUSE) from None
    if not isinstance(config, dict) or not isinstance(config.get("defaults"), dict):
        raise ServiceError(f"REST catalog at {uri}: its configuration is no Paimon config response: {config}")
    merged = {**config["defaults"], **options, **(config.get("overrides") or {})}
    headers = tuple(
        (k.removeprefix(HEADER_PREFIX), str(v)) for k, v in merged.items() if k.startswith(HEADER_PREFIX)
    )
    return Endpoint(bare.uri, token, str(merged.get(PREFIX) or ""), headers), merged


@dataclass(frozen=True)
class RestMetastore:
    """Where one table's snapshots and schema changes go: its server, and the table's id there
    (a dropped and re-created table is another, whose commits this one must not make)."""

    endpoint: Endpoint
    database: str
    table_id: str

    def commit_snapshot(self, table: str, snapshot: Snapshot) -> bool:
        """``POST .../commit``; a server that cannot be reached is retried for a while (a commit
        whose answer was lost may have landed: the caller checks the snapshot file)."""
        path = self.endpoint.resources.under_table(self.database, _object(table), "commit")
        body = {
            "tableId": self.table_id,
            "snapshot": json.loads(snapshot.to_json()),
            "statistics": [],
            "baseSnapshotUuid": None,
        }
        deadline = time.monotonic() + UNREACHABLE_RETRY_S
        while True:
            try:
                answer = self.endpoint.request("POST", path, body)
                return bool(answer and answer.get("success"))
            except Unreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def alter_table(self, table: str, changes: Sequence[SchemaChange]) -> None:
        path = self.endpoint.resources.table(self.database, _object(table))
        self.endpoint.request("POST", path, {"changes": [change_to_json(c) for c in changes]})


def _object(table: str) -> str:
    """The object name of ``db.t`` (``t``, ``t$branch_b``) as the server's paths name it."""
    return table.split(".", 1)[1]


def schema_request(identifier: str, schema: TableSchema) -> dict[str, Any]:
    """The body of ``POST .../tables``: a new table's schema as Paimon's clients send it."""
    database, name = identifier.split(".", 1)
    return {
        "identifier": {"database": database, "object": name},
        "schema": {
            "fields": [f.to_json() for f in schema.fields],
            "partitionKeys": list(schema.partition_keys),
            "primaryKeys": list(schema.primary_keys),
            "options": dict(schema.options),
            "comment": schema.comment,
        },
    }


# ---- HTTP ------------------------------------------------------------------------------------


@dataclass
class _Connections(threading.local):
    """Each thread's open connections, by server (HTTP/1.1 keep-alive)."""

    open: dict[str, http.client.HTTPConnection] = field(default_factory=dict)


_CONNECTIONS = _Connections()


def _exchange(
    uri: str, method: str, target: str, payload: bytes | None, headers: dict[str, str], what: str
) -> tuple[int, bytes]:
    """Send one request on this thread's connection to ``uri`` (a fresh one when the kept one was
    closed under it); ``ServiceError`` when the server cannot be reached."""
    for attempt in range(2):
        connection = _CONNECTIONS.open.get(uri)
        fresh = connection is None
        if connection is None:
            parts = urlsplit(uri)
            kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            connection = _CONNECTIONS.open[uri] = kind(parts.netloc, timeout=TIMEOUT_S)
        try:
            connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as e:
            connection.close()
            del _CONNECTIONS.open[uri]
            if fresh or attempt:
                raise Unreachable(f"{what}: the server cannot be reached ({e}); is it running?") from None
    raise AssertionError("unreachable")
