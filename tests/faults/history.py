"""The truth for the crash tests: table kinds, a seeded sequence of operations on a table, and the
rows the table must read after each prefix of that sequence.

Every row carries the number of the operation that last wrote it (``op``), so a snapshot names
the prefix it belongs to. Operations are plain data (picklable), run by :meth:`Op.run` against the
engine and by :meth:`Op.apply` against the model; a retried operation writes the same rows again.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakehouse.table.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("p", pa.string(), nullable=False),
        pa.field("op", pa.int32()),
        pa.field("v", pa.string()),
    ]
)
COLUMNS = SCHEMA.names
FUTURE = 2**62  # an older_than_ms every snapshot is older than
KEYS = 30  # primary-key tables upsert and delete keys 0..KEYS-1
Row = tuple[int, str, int, str]
State = tuple[Row, ...]  # sorted rows

# Index rewrites switch between these; every one sets the same keys, so each replaces the last.
# Bloom filters are sized for a few rows (Paimon's default is a million items: 600 kB a file).
INDEX_VARIANTS: tuple[dict[str, str], ...] = (
    {
        "file-index.bloom-filter.columns": "id",
        "file-index.bloom-filter.id.items": "50",
        "file-index.bitmap.columns": "v",
        "file-index.in-manifest-threshold": "1 B",
    },
    {
        "file-index.bloom-filter.columns": "id",
        "file-index.bloom-filter.id.items": "200",
        "file-index.bitmap.columns": "op",
        "file-index.in-manifest-threshold": "500 B",
    },
)


@dataclass(frozen=True)
class Kind:
    """A kind of table the crash tests cover."""

    name: str
    primary_keys: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    pypaimon_reads: bool = True  # whether pypaimon, the oracle, reads this kind of table

    @property
    def keyed(self) -> bool:
        return bool(self.primary_keys)

    def create(self, catalog, identifier: str = "db.t", extra: Mapping[str, str] | None = None) -> Table:
        """The table ``identifier`` of this kind, with ``extra`` options."""
        keys = list(self.primary_keys)
        options = {**self.options, **(extra or {})}
        return catalog.create_table(
            identifier, SCHEMA, primary_keys=keys, partition_keys=["p"], options=options
        )


KINDS = {
    "append": Kind("append"),
    "pk": Kind("pk", ("id", "p"), {"bucket": "2"}),
    "pk_dv": Kind("pk_dv", ("id", "p"), {"bucket": "2", "deletion-vectors.enabled": "true"}),
    "indexed": Kind("indexed", (), {"bucket": "2", "bucket-key": "id", **INDEX_VARIANTS[0]}),
    "iceberg": Kind("iceberg", (), {"metadata.iceberg.storage": "table-location"}),
    # pypaimon reads no 64-bit deletion vectors: pyiceberg is the oracle of this kind
    "iceberg_dv": Kind(
        "iceberg_dv",
        ("id", "p"),
        {
            "bucket": "2",
            "metadata.iceberg.storage": "table-location",
            "metadata.iceberg.format-version": "3",
            "deletion-vectors.enabled": "true",
            "deletion-vectors.bitmap64": "true",
        },
        pypaimon_reads=False,
    ),
    # beyond what the tests cover, for the benchmark: hash-index files, changelog files
    "dynamic": Kind("dynamic", ("id", "p"), {"dynamic-bucket.target-row-num": "5"}),
    "changelog": Kind("changelog", ("id", "p"), {"bucket": "2", "changelog-producer": "lookup"}),
}

DATA = ("append", "overwrite", "upsert", "delete")


@dataclass(frozen=True)
class Op:
    """One operation of a history: ``number`` is its position, ``action`` what it does."""

    number: int
    action: str  # append overwrite upsert delete | compact index expire tag untag
    ids: tuple[int, ...] = ()  # rows of a data operation (their partition follows from the id)
    arg: Any = None  # full (compact), variant (index), retain_min (expire), tag name, partition

    @property
    def category(self) -> str:
        """The operation as the kill summary counts it (data operations split by phase)."""
        return "write" if self.action in DATA else self.action

    def rows(self) -> list[Row]:
        return [(i, partition_of(i), self.number, f"v{self.number % 3}") for i in self.ids]

    def apply(self, state: dict[Any, Row]) -> dict[Any, Row]:
        """The model state after this operation (keys: primary key, or the whole row)."""
        out = dict(state)
        if self.action == "overwrite":
            out = {k: r for k, r in out.items() if r[1] != self.arg}
        if self.action in ("append", "overwrite", "upsert"):
            out.update((_key(r, self.action == "upsert"), r) for r in self.rows())
        if self.action == "delete":
            for i in self.ids:
                out.pop((i, partition_of(i)), None)
        return out

    def run(self, table: Table) -> None:
        """Perform the operation on the engine; a retry after a kill completes it."""
        if self.action in ("append", "upsert"):
            table.write(arrow(self.rows()))
        elif self.action == "overwrite":
            table.write(arrow(self.rows()), overwrite={"p": self.arg})
        elif self.action == "delete":
            rows = arrow(self.rows())
            table.write(rows.append_column("_row_kind", pa.array(["-D"] * rows.num_rows)))
        elif self.action == "compact":
            table.compact(full=self.arg)
        elif self.action == "index":
            table.set_options(INDEX_VARIANTS[self.arg])
            table.rewrite_file_index()
        elif self.action == "expire":
            table.expire_snapshots(retain_min=self.arg, older_than_ms=FUTURE)
        elif self.action == "tag" and self.arg not in table.tags():
            table.create_tag(self.arg)
        elif self.action == "untag" and self.arg in table.tags():
            table.delete_tag(self.arg)


def partition_of(row_id: int) -> str:
    return f"p{row_id % 2}"


def _key(row: Row, keyed: bool) -> Any:
    return (row[0], row[1]) if keyed else row


def arrow(rows: Iterable[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows], schema=SCHEMA)


def canonical(table: pa.Table) -> State:
    """A read's rows, sorted, for comparison with the model."""
    return tuple(sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True)))


def plan_ops(kind: Kind, count: int, seed: int) -> list[Op]:
    """A seeded history of ``count`` operations for a table of ``kind``."""
    rng = random.Random(seed)
    weights = {"data": 10, "compact": 3 if kind.keyed else 0, "index": 2, "expire": 3, "tag": 2}
    state: dict[Any, Row] = {}
    ops: list[Op] = []
    tags: list[str] = []
    variant = 0
    for n in range(count):
        choice = rng.choices(list(weights), list(weights.values()))[0] if n >= 2 else "data"
        if choice == "data":
            op = _data_op(kind, n, rng, state)
        elif choice == "compact":
            op = Op(n, "compact", arg=rng.random() < 0.8)  # full: writers leave universal little to do
        elif choice == "index":
            variant = 1 - variant
            op = Op(n, "index", arg=variant)
        elif choice == "expire":
            op = Op(n, "expire", arg=rng.randint(1, 3))
        elif tags and rng.random() < 0.4:
            op = Op(n, "untag", arg=tags.pop(0))
        else:
            tags.append(f"t{n}")
            op = Op(n, "tag", arg=tags[-1])
        ops.append(op)
        state = op.apply(state)
    return ops


def _data_op(kind: Kind, n: int, rng: random.Random, state: dict[Any, Row]) -> Op:
    if not kind.keyed:
        if rng.random() < 0.15:
            partition = rng.randint(0, 1)
            return Op(n, "overwrite", tuple(n * 100 + 2 * j + partition for j in range(3)), f"p{partition}")
        return Op(n, "append", tuple(n * 100 + j for j in range(rng.randint(2, 8))))
    present = sorted(k[0] for k in state)
    if present and rng.random() < 0.3:
        return Op(n, "delete", tuple(rng.sample(present, min(len(present), rng.randint(1, 3)))))
    return Op(n, "upsert", tuple(sorted(rng.sample(range(KEYS), rng.randint(2, 8)))))


def states(kind: Kind, ops: list[Op]) -> list[State]:
    """``states[k]``: the rows after the first ``k`` operations."""
    state: dict[Any, Row] = {}
    out = [()]
    for op in ops:
        state = op.apply(state)
        out.append(tuple(sorted(state.values())))
    return out
