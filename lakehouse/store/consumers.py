"""Consumers: named readers whose progress (``consumer/consumer-<id>``) protects snapshots.

A consumer file holds ``{"nextSnapshot": N}``: the next snapshot the consumer will read. Snapshot
expiration keeps every snapshot from the smallest such N on (``ConsumerManager``), and consumers
not updated for ``consumer.expiration-time`` are dropped so they stop holding snapshots back.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from lakehouse.errors import CorruptFileError
from lakehouse.io.fs import join
from lakehouse.paths import checked_name

if TYPE_CHECKING:
    from lakehouse.store.table_store import TableStore

PREFIX = "consumer-"


def consumer_dir(table: TableStore) -> str:
    return table.paths.consumer_dir


def _path(table: TableStore, consumer_id: str) -> str:
    return join(consumer_dir(table), PREFIX + checked_name("consumer id", consumer_id, table.name))


def consumers(table: TableStore) -> dict[str, int]:
    """Consumer id -> next snapshot id, sorted by id."""
    out = {}
    for st in table.io.list_dir(consumer_dir(table)):
        if st.name.startswith(PREFIX) and not st.is_dir:
            next_snapshot = _read(table, st.path)
            if next_snapshot is not None:
                out[st.name[len(PREFIX) :]] = next_snapshot
    return dict(sorted(out.items()))


def _read(table: TableStore, path: str) -> int | None:
    try:
        data = table.io.read_bytes(path)
    except FileNotFoundError:
        return None  # dropped concurrently
    try:
        value = json.loads(data)["nextSnapshot"]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
            raise ValueError(f"nextSnapshot is {value!r}, not a snapshot id")
        return value
    except (ValueError, KeyError, TypeError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CorruptFileError(
            f"table {table.name}: consumer file {path} is corrupt ({e}); delete it or reset the consumer"
        ) from None


def next_snapshot(table: TableStore, consumer_id: str) -> int | None:
    """The next snapshot ``consumer_id`` will read (None: unknown consumer)."""
    return _read(table, _path(table, consumer_id))


def record(table: TableStore, consumer_id: str, next_snapshot_id: int) -> None:
    """Record that ``consumer_id`` will read ``next_snapshot_id`` next."""
    path = _path(table, consumer_id)
    table.io.write_bytes(path, json.dumps({"nextSnapshot": int(next_snapshot_id)}).encode())


def delete(table: TableStore, consumer_id: str) -> None:
    table.io.delete(_path(table, consumer_id))


def min_next_snapshot(table: TableStore) -> int | None:
    """The oldest snapshot any consumer still needs (None: no consumers)."""
    return min(consumers(table).values(), default=None)


def expire(table: TableStore, max_age_ms: int, now_ms: int | None = None) -> list[str]:
    """Drop consumers whose file was last written more than ``max_age_ms`` ago; returns their ids."""
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - max_age_ms
    dropped = []
    for st in table.io.list_dir(consumer_dir(table)):
        if st.name.startswith(PREFIX) and st.mtime_ms < cutoff:
            table.io.delete(st.path)
            dropped.append(st.name[len(PREFIX) :])
    return dropped
