"""Damage to file indexes behind a valid container header (zeroed spans, flipped bits), and
whether ``verify_file_indexes`` reports every damage that could change a filtered read's result.

Index contents carry no checksum (nor do Paimon's), so that check is what catches such damage.
``tests/faults/test_index_corruption.py`` runs a few trials, ``bench/faults.py`` many.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakehouse import Catalog, col
from lakehouse.errors import LakehouseError
from lakehouse.fileindex import format as container
from lakehouse.predicate import bind, to_expression

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("user_id", pa.int32()),
        ("status", pa.string()),
        ("price", pa.int64()),
    ]
)
OPTIONS = {
    "file-index.bloom-filter.columns": "user_id",
    "file-index.bloom-filter.user_id.items": "60",
    "file-index.bitmap.columns": "status",
    "file-index.bsi.columns": "price",
    "file-index.in-manifest-threshold": "1 b",  # every index in a file of its own, as on disk
}
HEADERS = {"bloom-filter": 4, "bitmap": 1, "bsi": 1}  # bytes kept: hash count, version bytes
COLUMNS = {"bloom-filter": "user_id", "bitmap": "status", "bsi": "price"}
STATUSES = ["NEW", "PAID", "SHIPPED", "CANCELLED", None]


def batch(rng: np.random.Generator, start: int, n: int = 60) -> pa.Table:
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "user_id": rng.integers(0, 40, n).astype(np.int32),
            "status": [STATUSES[i] for i in rng.integers(0, 5, n)],
            "price": rng.integers(-500, 500, n),
        },
        SCHEMA,
    )


def queries(data: pa.Table) -> list:
    """Filters on every indexed column: values present and absent, ranges, nulls."""
    users = sorted(set(data.column("user_id").to_pylist()))
    prices = data.column("price").to_pylist()
    out = [col("user_id") == u for u in users[:6]] + [col("user_id") == 77, col("user_id").isin([3, 41])]
    out += [col("status") == s for s in STATUSES[:4]] + [col("status").is_null(), col("status") == "LOST"]
    out += [col("price") < p for p in (min(prices), -100, 0, 250)] + [
        col("price") >= 400,
        col("price") == prices[0],
    ]
    return out


def truth(data: pa.Table, q) -> list[int]:
    """The ids a filter selects, evaluated by Arrow over all rows."""
    expression = to_expression(bind(q, {f.name: f.type for f in SCHEMA}, "truth"))
    return sorted(data.filter(expression).column("id").to_pylist())


def answers(t, qs) -> list:
    out = []
    for q in qs:
        try:
            out.append(sorted(t.read(filter=q).column("id").to_pylist()))
        except LakehouseError as e:  # a typed refusal is not silent, but still a changed result
            out.append(type(e).__name__)
    return out


def damaged(payload: bytes, header: int, rng: random.Random) -> bytes:
    """``payload`` with, past its header, a zeroed span or one to three flipped bits."""
    data = bytearray(payload)
    body = len(data) - header
    if rng.random() < 0.5:
        start = header + rng.randrange(body)
        data[start : start + rng.randint(1, max(1, body // 4))] = bytes(
            len(data[start : start + max(1, body // 4)])
        )
    else:
        for _ in range(rng.randint(1, 3)):
            i = header + rng.randrange(body)
            data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


@dataclass(frozen=True)
class Damage:
    """What a run of trials found."""

    trials: int
    harmful: int  # damages that changed some filtered read's result
    reported: int  # harmful ones verify_file_indexes named with their data file and column


def run_trials(warehouse: str, seed: int, trials: int) -> Damage:
    """Damage one index of a small indexed table ``trials`` times (restoring it after each) and
    count the harmful damages and those reported."""
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    t = catalog.create_table("db.t", SCHEMA, options=OPTIONS)
    rng_data = np.random.default_rng(seed)
    batches = [batch(rng_data, i * 60) for i in range(3)]
    for b in batches:
        t.write(b)
    everything = pa.concat_tables(batches)
    qs = queries(everything)
    expected = [truth(everything, q) for q in qs]
    if answers(t, qs) != expected or not t.verify_file_indexes().ok:
        raise AssertionError("the undamaged table must answer every query and verify")
    rng = random.Random(seed)
    harmful = reported = 0
    for _ in range(trials):
        entry = rng.choice(t.live_entries())
        path = Path(t.paths.root) / t.bucket_path(entry.partition, entry.bucket) / entry.file.extra_files[0]
        original = path.read_bytes()
        indexes = container.read(original)
        kind = rng.choice(sorted(HEADERS))
        column = COLUMNS[kind]
        indexes[column][kind] = damaged(indexes[column][kind], HEADERS[kind], rng)
        path.write_bytes(container.write(indexes))
        if answers(t, qs) != expected:
            harmful += 1
            problems = t.verify_file_indexes().problems
            reported += any(entry.file.file_name in p and repr(column) in p for p in problems)
        path.write_bytes(original)
    return Damage(trials, harmful, reported)
