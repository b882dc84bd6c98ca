"""Schema changes as records (Paimon's ``SchemaChange``): what ``Table.alter`` applies in one new
schema version, and what a REST catalog client sends its server, in Paimon's JSON
(``{"action": "setOption", "key": ..., "value": ...}``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakehouse import schema as schemas
from lakehouse.errors import InvalidArgumentError, UnsupportedFeatureError
from lakehouse.schema import TableSchema
from lakehouse.types import DataType, parse_type


@dataclass(frozen=True)
class SetOption:
    key: str
    value: str


@dataclass(frozen=True)
class RemoveOption:
    key: str


@dataclass(frozen=True)
class AddColumn:
    """A new nullable column, last."""

    name: str
    data_type: DataType
    comment: str | None = None


@dataclass(frozen=True)
class RenameColumn:
    name: str
    new_name: str


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class UpdateColumnType:
    """A column's type widened (its nullability kept)."""

    name: str
    data_type: DataType


SchemaChange = SetOption | RemoveOption | AddColumn | RenameColumn | DropColumn | UpdateColumnType


def apply_changes(
    schema: TableSchema, table: str, changes: Sequence[SchemaChange], has_data: bool
) -> TableSchema:
    """``schema`` with ``changes`` applied in order (not yet a new version: see
    :func:`lakehouse.schema.next_version`); ``has_data``: whether the table holds data, which
    fixes some options."""
    for change in changes:
        match change:
            case SetOption(key, value):
                schema = schemas.set_options(schema, table, {key: value}, has_data)
            case RemoveOption(key):
                schema = schemas.remove_options(schema, table, [key], has_data)
            case AddColumn(name, data_type, comment):
                schema = schemas.add_column(schema, table, name, data_type, comment)
            case RenameColumn(name, new_name):
                schema = schemas.rename_column(schema, table, name, new_name)
            case DropColumn(name):
                schema = schemas.drop_column(schema, table, name)
            case UpdateColumnType(name, data_type):
                schema = schemas.alter_column_type(schema, table, name, data_type)
    return schema


# ---- Paimon's JSON ---------------------------------------------------------------------------


def change_to_json(change: SchemaChange) -> dict[str, Any]:
    """The change as Paimon's REST API spells it."""
    match change:
        case SetOption(key, value):
            return {"action": "setOption", "key": key, "value": value}
        case RemoveOption(key):
            return {"action": "removeOption", "key": key}
        case AddColumn(name, data_type, comment):
            return {"action": "addColumn", "fieldNames": [name], "dataType": data_type.to_json(),
                    "comment": comment, "move": None}  # fmt: skip
        case RenameColumn(name, new_name):
            return {"action": "renameColumn", "fieldNames": [name], "newName": new_name}
        case DropColumn(name):
            return {"action": "dropColumn", "fieldNames": [name]}
        case UpdateColumnType(name, data_type):
            return {"action": "updateColumnType", "fieldNames": [name], "newDataType": data_type.to_json(),
                    "keepNullability": True}  # fmt: skip
    raise AssertionError(change)


def change_from_json(obj: Mapping[str, Any]) -> SchemaChange:
    """The change a JSON object of Paimon's REST API describes; ``InvalidArgumentError`` for a
    malformed one, ``UnsupportedFeatureError`` for one this engine does not make."""
    if not isinstance(obj, Mapping):
        raise InvalidArgumentError(f"a schema change must be a JSON object, not {obj!r}")
    action = obj.get("action")
    parse = _PARSERS.get(action) if isinstance(action, str) else None
    if parse is None:
        raise UnsupportedFeatureError(
            f"schema change {action!r} is not supported; supported are {sorted(_PARSERS)}"
        )
    try:
        return parse(obj)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"schema change {action!r} is malformed ({e!r}): {dict(obj)}") from None


def _string(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


def _column(obj: Mapping[str, Any]) -> str:
    """The one top-level column a change names (``fieldNames``)."""
    names = obj["fieldNames"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise TypeError("fieldNames must be a non-empty list of strings")
    if len(names) > 1:
        raise UnsupportedFeatureError(f"changes to nested columns ({'.'.join(names)}) are not supported")
    return names[0]


def _add_column(obj: Mapping[str, Any]) -> AddColumn:
    if obj.get("move") is not None:
        raise UnsupportedFeatureError("adding a column at a position (move) is not supported; add it last")
    comment = obj.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise TypeError("comment must be a string")
    return AddColumn(_column(obj), parse_type(obj["dataType"]), comment)


def _update_column_type(obj: Mapping[str, Any]) -> UpdateColumnType:
    if obj.get("keepNullability") is False:
        raise UnsupportedFeatureError("changing a column's nullability is not supported (keepNullability)")
    return UpdateColumnType(_column(obj), parse_type(obj["newDataType"]))


_PARSERS: dict[str, Callable[[Mapping[str, Any]], SchemaChange]] = {
    "setOption": lambda o: SetOption(_string(o, "key"), _string(o, "value")),
    "removeOption": lambda o: RemoveOption(_string(o, "key")),
    "addColumn": _add_column,
    "renameColumn": lambda o: RenameColumn(_column(o), _string(o, "newName")),
    "dropColumn": lambda o: DropColumn(_column(o)),
    "updateColumnType": _update_column_type,
}
