"""S3 and S3-compatible object stores: the connection settings, parsed once, and the atomic
create-if-absent commits rely on.

A warehouse ``s3://bucket/prefix`` takes its endpoint, region and credentials from catalog options
(Apache Paimon's names, ``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.region``,
``s3.path.style.access``; pypaimon's ``fs.s3.*`` spellings are accepted too), else from the
standard ``AWS_*`` environment variables. Files are read, written and listed through
``pyarrow.fs.S3FileSystem``; whole metadata files are read and written in single requests
through ``obstore``, and new snapshot, schema and tag files are created with a conditional
``PUT`` (``If-None-Match: *``) through ``obstore``: the store itself refuses the second of two
writers of one name (``412 Precondition Failed``), so no lock is needed. AWS S3, MinIO, Cloudflare
R2 and most S3-compatible stores honour it; for a store that does not, set
``s3.conditional-writes=false`` and give the catalog a lock (:mod:`lakehouse.io.lock`).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow.fs as pafs

from lakehouse.errors import InvalidOptionError, MissingExtraError
from lakehouse.options import S3_SECRET_KEY, parse_bool

S3_ENDPOINT = "s3.endpoint"
S3_ACCESS_KEY = "s3.access-key"
S3_SESSION_TOKEN = "s3.session-token"
S3_REGION = "s3.region"
S3_PATH_STYLE = "s3.path.style.access"
S3_CONDITIONAL_WRITES = "s3.conditional-writes"

# option -> (pypaimon's spelling, environment variable)
_SOURCES = {
    S3_ENDPOINT: ("fs.s3.endpoint", "AWS_ENDPOINT_URL"),
    S3_ACCESS_KEY: ("fs.s3.accessKeyId", "AWS_ACCESS_KEY_ID"),
    S3_SECRET_KEY: ("fs.s3.accessKeySecret", "AWS_SECRET_ACCESS_KEY"),
    S3_SESSION_TOKEN: ("fs.s3.securityToken", "AWS_SESSION_TOKEN"),
    S3_REGION: ("fs.s3.region", "AWS_REGION"),
}
DEFAULT_REGION = "us-east-1"
CONFLICT_RETRIES = 10


@dataclass(frozen=True)
class S3Settings:
    """Where an S3-compatible store is and how to sign requests to it."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    region: str = DEFAULT_REGION
    path_style: bool = False
    conditional_writes: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> S3Settings:
        """The settings of catalog ``options``, each missing one from the environment."""

        def value(key: str) -> str | None:
            alias, env = _SOURCES[key]
            return options.get(key) or options.get(alias) or os.environ.get(env) or None

        if bool(value(S3_ACCESS_KEY)) != bool(value(S3_SECRET_KEY)):
            raise InvalidOptionError(
                f"set both {S3_ACCESS_KEY} and {S3_SECRET_KEY} (or AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY), or neither to use the machine's AWS credentials"
            )
        endpoint = value(S3_ENDPOINT)
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint
        region = value(S3_REGION) or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        return cls(
            endpoint,
            value(S3_ACCESS_KEY),
            value(S3_SECRET_KEY),
            value(S3_SESSION_TOKEN),
            region,
            parse_bool(options.get(S3_PATH_STYLE, "true" if endpoint else "false"), S3_PATH_STYLE),
            parse_bool(options.get(S3_CONDITIONAL_WRITES, "true"), S3_CONDITIONAL_WRITES),
        )

    def to_options(self) -> dict[str, str]:
        """These settings as catalog options (what a Spark job carries to its tasks, which may run
        where this process's environment is not)."""
        values = {
            S3_ENDPOINT: self.endpoint,
            S3_ACCESS_KEY: self.access_key,
            S3_SECRET_KEY: self.secret_key,
            S3_SESSION_TOKEN: self.session_token,
            S3_REGION: self.region,
            S3_PATH_STYLE: str(self.path_style).lower(),
            S3_CONDITIONAL_WRITES: str(self.conditional_writes).lower(),
        }
        return {k: v for k, v in values.items() if v is not None}

    def filesystem(self) -> pafs.S3FileSystem:
        """pyarrow's S3 filesystem on these settings (what data and metadata go through)."""
        scheme = self.endpoint.split("://", 1)[0] if self.endpoint else "https"
        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            session_token=self.session_token,
            region=self.region,
            endpoint_override=self.endpoint.split("://", 1)[1] if self.endpoint else None,
            scheme=scheme,
            force_virtual_addressing=not self.path_style,
        )


def _obstore() -> ModuleType:
    """The ``obstore`` package (the ``s3`` extra), imported when an S3 warehouse is first opened."""
    try:
        module = importlib.import_module("obstore")
        importlib.import_module("obstore.exceptions")
        importlib.import_module("obstore.store")
    except ImportError as e:
        raise MissingExtraError("a warehouse on an S3-compatible store (s3://)", "s3", e) from e
    return module


class Bucket:
    """Whole objects of one bucket in single requests (one GET, one PUT: small metadata files do
    not need pyarrow's multipart streams), and creation with ``If-None-Match: *``: exactly one of
    several writers of a name succeeds, whatever the timing (the store decides)."""

    def __init__(self, bucket: str, settings: S3Settings) -> None:
        self.bucket = bucket
        self.settings = settings
        self._obstore = _obstore()
        self._store: Any = None  # built on first use, in the process that uses it

    def __getstate__(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.bucket, self.settings = state["bucket"], state["settings"]
        self._obstore, self._store = _obstore(), None

    def _client(self) -> Any:
        if self._store is None:
            s = self.settings
            config = {"region": s.region, "virtual_hosted_style_request": not s.path_style}
            if s.endpoint:
                config["endpoint"] = s.endpoint
            if s.access_key:
                config.update(access_key_id=s.access_key, secret_access_key=s.secret_key)
            if s.session_token:
                config["session_token"] = s.session_token
            http = bool(s.endpoint and s.endpoint.startswith("http://"))
            store = self._obstore.store.S3Store
            self._store = store(self.bucket, client_options={"allow_http": http}, **config)
        return self._store

    def get(self, key: str) -> bytes:
        """The object at ``key``; ``FileNotFoundError`` when there is none."""
        try:
            return bytes(self._obstore.get(self._client(), key).bytes())
        except self._obstore.exceptions.NotFoundError:
            raise FileNotFoundError(f"{self.bucket}/{key}") from None

    def exists(self, key: str) -> bool:
        """Whether an object is at ``key`` (one HEAD request)."""
        try:
            self._obstore.head(self._client(), key)
        except (self._obstore.exceptions.NotFoundError, FileNotFoundError):
            return False
        return True

    def put(self, key: str, data: bytes) -> None:
        """Write (or replace) the object at ``key``."""
        self._obstore.put(self._client(), key, data)

    def create(self, key: str, data: bytes) -> bool:
        """Put ``data`` at ``key`` unless an object is there; True if this call created it.

        S3 answers ``409 Conflict`` to a conditional write racing another one still in flight:
        the put is tried again until the store says who won."""
        attempt = 0
        while True:
            try:
                self._obstore.put(self._client(), key, data, mode="create")
                return True
            except self._obstore.exceptions.AlreadyExistsError:
                return False
            except self._obstore.exceptions.GenericError as e:
                attempt += 1
                if "409" not in str(e) or attempt > CONFLICT_RETRIES:
                    raise
                time.sleep(0.05 * attempt)
