"""A REST catalog server app run by uvicorn in a thread of the test process, on a free loopback
port, and a small client of it over the standard library's HTTP (what goes on the wire is what
Paimon's clients send and receive)."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from lakehouse.rest.server import Serving
from lakehouse.spark.loopback import LOOPBACK, free_port


class LiveServer(Serving):
    """``app`` served on a free loopback port while the ``with`` block runs."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        super().__init__(app, host=LOOPBACK, port=self.port, log_level="warning")

    @property
    def uri(self) -> str:
        return self.url


@dataclass(frozen=True)
class Reply:
    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


class Client:
    """Requests to the server on a loopback ``port``, with default headers (``Authorization``)."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        self.headers = headers

    def request(self, method, path, *, json=None, content=None, params=None, headers=None) -> Reply:
        body = content if json is None else _dumps(json)
        target = path + ("?" + urlencode(params) if params else "")
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=60)
        try:
            connection.request(method, target, body=body, headers={**self.headers, **(headers or {})})
            response = connection.getresponse()
            return Reply(response.status, response.read())
        finally:
            connection.close()

    def get(self, path, **kwargs) -> Reply:
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs) -> Reply:
        return self.request("POST", path, **kwargs)

    def delete(self, path, **kwargs) -> Reply:
        return self.request("DELETE", path, **kwargs)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()
