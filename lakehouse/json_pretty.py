"""JSON text laid out like Jackson's DefaultPrettyPrinter, as Paimon writes schema and snapshot files.

Objects put one ``"key" : value`` per line indented by two spaces per level, arrays stay on one
line (``[ "a", "b" ]``, objects inside them open on the same line), empty containers are ``{ }``
and ``[ ]``, and there is no trailing newline. Readers do not care; humans diffing files do.
"""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    return _write(value, 0)


def _write(value: Any, level: int) -> str:
    if isinstance(value, dict):
        if not value:
            return "{ }"
        inner = "  " * (level + 1)
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)} : {_write(v, level + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(_write(v, level) for v in value) + " ]"
    return json.dumps(value, ensure_ascii=False)
