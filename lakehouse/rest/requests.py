"""What a REST catalog request asks for, read strictly from its JSON body and query: a field of
the wrong type, a missing one or one this server does not know is an ``InvalidArgumentError``
(400) naming it, since a field it skipped might change what the request means.

Shapes and names are ``rest-catalog-open-api.yaml``'s (``CreateTableRequest``, ``Instant``...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from lakehouse.errors import InvalidArgumentError, UnsupportedFeatureError
from lakehouse.rest.grants import Rights
from lakehouse.snapshot import Snapshot
from lakehouse.types import DataField, parse_type

T = TypeVar("T")
MAX_RESULTS = "maxResults"
PAGE_TOKEN = "pageToken"


class Fields:
    """The fields of one JSON object of a request, taken one by one; used as a context manager,
    it refuses the fields nobody took."""

    def __init__(self, obj: object, what: str) -> None:
        if not isinstance(obj, dict):
            raise InvalidArgumentError(f"{what} must be a JSON object, not {_kind(obj)}")
        self.obj: dict[str, Any] = obj
        self.what = what
        self.taken: set[str] = set()

    def __enter__(self) -> Fields:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        unknown = sorted(set(self.obj) - self.taken)
        if kind is None and unknown:
            raise InvalidArgumentError(
                f"{self.what} has fields this server does not know: {unknown}; remove them"
            )

    def value(self, key: str, required: bool = True) -> Any:
        """The raw value of ``key`` (None when absent or null, which ``required`` refuses)."""
        self.taken.add(key)
        found = self.obj.get(key)
        if found is None and required:
            raise InvalidArgumentError(f"{self.what} needs the field {key!r}")
        return found

    def string(self, key: str) -> str:
        found = self.optional_string(key)
        if found is None:
            raise InvalidArgumentError(f"{self.what} needs the field {key!r}")
        return found

    def optional_string(self, key: str) -> str | None:
        return self._typed(key, str, "a string")

    def optional_integer(self, key: str) -> int | None:
        found = self._typed(key, int, "an integer")
        if isinstance(found, bool):
            raise InvalidArgumentError(f"{self.what}: field {key!r} must be an integer, not a boolean")
        return found

    def boolean(self, key: str, default: bool) -> bool:
        found = self._typed(key, bool, "a boolean")
        return default if found is None else found

    def strings(self, key: str) -> list[str]:
        """A list of strings (empty when absent or null)."""
        found = self._typed(key, list, "a list of strings") or []
        if not all(isinstance(s, str) for s in found):
            raise InvalidArgumentError(f"{self.what}: field {key!r} must be a list of strings")
        return found

    def string_map(self, key: str) -> dict[str, str]:
        """An object of string values (empty when absent or null)."""
        found = self._typed(key, dict, "an object of strings") or {}
        if not all(isinstance(v, str) for v in found.values()):
            raise InvalidArgumentError(f"{self.what}: field {key!r} must map names to strings")
        return found

    def _typed(self, key: str, kind: type[T], what: str) -> T | None:
        found = self.value(key, required=False)
        if found is not None and not isinstance(found, kind):
            raise InvalidArgumentError(f"{self.what}: field {key!r} must be {what}, not {_kind(found)}")
        return found


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


@dataclass(frozen=True)
class Call:
    """One request as its handler sees it: the names in its path (decoded), its query, its JSON
    body (None without one) and the rights of its token."""

    params: Mapping[str, str]
    query: Mapping[str, str]
    body: object
    rights: Rights

    @property
    def database(self) -> str:
        return self.params["database"]

    @property
    def identifier(self) -> str:
        """``db.t`` (``db.t$branch_b``) of the table in the path."""
        return f"{self.params['database']}.{self.params['table']}"

    def fields(self, what: str) -> Fields:
        return Fields(self.body, what)

    def page(self, pattern: str | None = None) -> Page:
        """The page a listing asks for; ``pattern``: the query parameter of its name pattern."""
        text = self.query.get(MAX_RESULTS)
        if text is not None and not (text.isdigit() and len(text) < 10):
            raise InvalidArgumentError(f"{MAX_RESULTS}={text!r} must be a non-negative integer")
        after = self.query.get(PAGE_TOKEN) or None
        matches = like_prefix(self.query.get(pattern) or None) if pattern else _everything
        return Page(int(text) if text else None, after, matches)


def _everything(name: str) -> bool:
    return True


@dataclass(frozen=True)
class Page:
    """A page of a listing sorted by name: up to ``max_results`` (all for None or 0) names that
    match, after the ``token`` (the last name of the previous page)."""

    max_results: int | None
    token: str | None
    matches: Callable[[str], bool] = field(default=_everything)

    def of(self, names: list[str], key: str) -> dict[str, Any]:
        """``{key: [...], "nextPageToken": ...}`` of the (sorted) ``names``."""
        found = [n for n in names if self.matches(n) and (self.token is None or n > self.token)]
        if self.max_results and len(found) > self.max_results:
            found = found[: self.max_results]
            return {key: found, "nextPageToken": found[-1]}
        return {key: found, "nextPageToken": None}


def like_prefix(pattern: str | None) -> Callable[[str], bool]:
    """The names a SQL LIKE pattern selects, of the prefix patterns Paimon's catalogs take
    (``abc``, ``ab%``; ``\\`` escapes; ``RESTUtil.validatePrefixSqlPattern``)."""
    if pattern is None:
        return _everything
    literal, escaped, wildcard = [], False, False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
            continue
        elif c == "%":
            wildcard = True
            continue
        if wildcard:
            raise InvalidArgumentError(
                f"name pattern {pattern!r}: only prefix patterns (text, then '%') are supported"
            )
        literal.append(c)
    prefix = "".join(literal)
    return (lambda name: name.startswith(prefix)) if wildcard else (lambda name: name == prefix)


# ---- request bodies ---------------------------------------------------------------------------


def identifier(obj: object, what: str) -> str:
    """``db.t`` of an ``Identifier`` (``{"database", "object"}``)."""
    with Fields(obj, what) as f:
        return f"{f.string('database')}.{f.string('object')}"


@dataclass(frozen=True)
class TableDefinition:
    """A new table as a ``CreateTableRequest``'s ``schema`` defines it."""

    fields: list[DataField]
    partition_keys: list[str]
    primary_keys: list[str]
    options: dict[str, str]
    comment: str | None


def table_definition(obj: object) -> TableDefinition:
    with Fields(obj, "schema") as f:
        columns = f.value("fields")
        if not isinstance(columns, list):
            raise InvalidArgumentError(f"schema: field 'fields' must be a list, not {_kind(columns)}")
        return TableDefinition(
            [data_field(c) for c in columns],
            f.strings("partitionKeys"),
            f.strings("primaryKeys"),
            f.string_map("options"),
            f.optional_string("comment"),
        )


def data_field(obj: object) -> DataField:
    """A column as Paimon's schema JSON gives it; a default value is not supported."""
    with Fields(obj, "a field of the schema") as f:
        field_id, name = f.value("id"), f.string("name")
        if not isinstance(field_id, int) or isinstance(field_id, bool):
            raise InvalidArgumentError(f"field {name!r}: its id must be an integer, not {_kind(field_id)}")
        if f.value("defaultValue", required=False) is not None:
            raise UnsupportedFeatureError(f"field {name!r}: default values of columns are not supported")
        try:
            dtype = parse_type(f.value("type"))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise InvalidArgumentError(f"field {name!r}: its type is not a Paimon type ({e})") from None
        return DataField(field_id, name, dtype, f.optional_string("description"))


def snapshot(obj: object) -> Snapshot:
    """A ``Snapshot`` to commit; every field it sets must be one this engine writes back."""
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"the snapshot must be a JSON object, not {_kind(obj)}")
    try:
        parsed = Snapshot.from_json(json.dumps(obj))
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise InvalidArgumentError(f"the snapshot is not a Paimon snapshot ({e})") from None
    kept = json.loads(parsed.to_json())
    dropped = sorted(k for k, v in obj.items() if k not in kept and v not in (None, {}, []))
    if dropped:
        raise InvalidArgumentError(f"the snapshot has fields this server does not know: {dropped}")
    return parsed


@dataclass(frozen=True)
class Instant:
    """Where a rollback goes: a snapshot or a tag (``SnapshotInstant``, ``TagInstant``)."""

    snapshot_id: int | None = None
    tag: str | None = None


def instant(obj: object) -> Instant:
    with Fields(obj, "instant") as f:
        kind = f.string("type")
        if kind == "snapshot":
            snapshot_id = f.optional_integer("snapshotId")
            if snapshot_id is None:
                raise InvalidArgumentError("a snapshot instant needs the field 'snapshotId'")
            return Instant(snapshot_id=snapshot_id)
        if kind == "tag":
            return Instant(tag=f.string("tagName"))
        raise InvalidArgumentError(f"instant type {kind!r} must be 'snapshot' or 'tag'")
