"""Damaged metadata files, as data: a small warehouse holding every kind of metadata file the
engine writes, seeded byte mutations of each kind, and the reads that consult the damaged file.
``tests/faults/test_metadata_fuzz.py`` runs them and says what a read of a damaged table may end
with: rows (the damage did not matter, or hit a value the format cannot tell from a good one: a
flipped key hash, a different count) or a ``LakehouseError`` that says where.

Most kinds damage a file's bytes; the Avro kinds also damage what is inside valid framing (the
encoded records, an embedded file index, a BinaryRow), which byte damage of a compressed file
rarely reaches.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa

from lakehouse import Catalog, col
from lakehouse.deletionvectors.index_file import DELETION_VECTORS
from lakehouse.manifest import files as manifest_files

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        ("user_id", pa.int32()),
        ("status", pa.string()),
        ("price", pa.int64()),
    ]
)
INDEXES = {
    "file-index.bloom-filter.columns": "user_id",
    "file-index.bloom-filter.user_id.items": "50",
    "file-index.bitmap.columns": "status",
    "file-index.bsi.columns": "price",
}
MANY_COMMITS = 16  # manifests of a read: the lanes the column-wise decoder needs (avro_columns.MIN_LANES)
# one filter per index type, so that a plan consults each, and filters on partitions and keys
FILTERS = [col("user_id") == 3, col("status") == "PAID", col("price") < -9, col("dt") == "d1", col("id") < 9]


def batch(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "dt": [("d0", "d1")[i % 2] for i in range(start, start + n)],
            "user_id": rng.integers(0, 40, n).astype(np.int32),
            "status": [("NEW", "PAID", None)[i] for i in rng.integers(0, 3, n)],
            "price": rng.integers(-500, 500, n),
        },
        SCHEMA,
    )


def build(warehouse: str) -> None:
    """Three tables with every metadata file kind between them:

    - ``db.pk``: primary keys, deletion vectors, file indexes embedded in the manifests, a tag, a
      consumer (snapshot, schema, manifest list, manifest, index manifest, deletion-vector file);
    - ``db.ap``: a partitioned append table whose file indexes are files of their own;
    - ``db.dyn``: a dynamic-bucket table (HASH index files);
    - ``db.many``: uncompressed manifests, enough of them that a read decodes them column-wise
      (``lakehouse.manifest.avro_columns``), and damage reaches the records instead of a
      decompressor.
    """
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    pk = catalog.create_table(
        "db.pk",
        SCHEMA,
        primary_keys=["id"],
        options={
            "bucket": "2",
            "deletion-vectors.enabled": "true",
            "file-index.in-manifest-threshold": "64 kb",
            **INDEXES,
        },
    )
    pk.write(batch(0, 40, 1))
    pk.write(batch(10, 20, 2))
    pk.compact()
    pk.write(batch(30, 20, 3))
    pk.create_tag("t1", snapshot_id=2)
    pk.read_changes(1, pk.latest_snapshot_id(), consumer_id="c1")
    ap = catalog.create_table(
        "db.ap", SCHEMA, partition_keys=["dt"], options={"file-index.in-manifest-threshold": "1 b", **INDEXES}
    )
    ap.write(batch(0, 30, 4))
    ap.write(batch(30, 30, 5))
    dyn = catalog.create_table("db.dyn", SCHEMA, primary_keys=["id"], options={"bucket": "-1"})
    dyn.write(batch(0, 30, 6))
    dyn.write(batch(20, 30, 7))
    many = catalog.create_table(
        "db.many", SCHEMA, partition_keys=["dt"], options={"manifest.compression": "null"}
    )
    for i in range(MANY_COMMITS):
        many.write(batch(i * 4, 4, 10 + i))


# ---- mutations ----------------------------------------------------------------------------


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def zero(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    n = rng.randint(1, 64)
    return data[:at] + bytes(len(data[at : at + n])) + data[at + n :]


def insert(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.randbytes(rng.randint(1, 32)) + data[at:]


def duplicate(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data))
    chunk = data[start : start + rng.randint(1, 64)]
    at = rng.randrange(len(data) + 1)
    return data[:at] + chunk + data[at:]


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    m.__name__: m for m in (truncate, flip, zero, insert, duplicate)
}
Mutate = Callable[[bytes], bytes]


# ---- file kinds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of metadata file: the files of it that reads consult, and those reads."""

    name: str
    table: str
    files: Callable[[Catalog, str], list[str]]
    reads: Callable[[Catalog, str], None]
    # damage inside a file's records (re-encoded as valid Avro); default: the file's own bytes
    damage: Callable[[bytes, Mutate, random.Random], bytes] | None = None


def _dir(name: str) -> Callable[[Catalog, str], list[str]]:
    """Every file of a table's directory ``name``."""

    def files(catalog: Catalog, table: str) -> list[str]:
        root = Path(catalog.get_table(table).paths.root) / name
        return sorted(str(p) for p in root.iterdir() if p.is_file())

    return files


def _snapshots(catalog: Catalog, table: str) -> list[str]:
    return [p for p in _dir("snapshot")(catalog, table) if "/snapshot-" in p]


def _lists(catalog: Catalog, table: str) -> list[str]:
    """The latest snapshot's manifest lists and every snapshot's delta (what changes read)."""
    t = catalog.get_table(table)
    snapshots = [t.snapshot(i) for i in range(1, t.latest_snapshot_id() + 1)]
    names = {snapshots[-1].base_manifest_list} | {s.delta_manifest_list for s in snapshots}
    return sorted(t.paths.manifest(n) for n in names)


def _latest_lists(catalog: Catalog, table: str) -> list[str]:
    t = catalog.get_table(table)
    snapshot = t.snapshot()
    return [t.paths.manifest(snapshot.base_manifest_list), t.paths.manifest(snapshot.delta_manifest_list)]


def _manifests(catalog: Catalog, table: str) -> list[str]:
    t = catalog.get_table(table)
    store = t.manifests()
    names = {m.file_name for p in _lists(catalog, table) for m in store.read_list(os.path.basename(p))}
    return sorted(t.paths.manifest(n) for n in names)


def _index_manifest(catalog: Catalog, table: str) -> list[str]:
    t = catalog.get_table(table)
    return [t.paths.manifest(t.snapshot().index_manifest)]


def _index_files(index_type: str) -> Callable[[Catalog, str], list[str]]:
    def files(catalog: Catalog, table: str) -> list[str]:
        t = catalog.get_table(table)
        metas = [e.index_file for e in t.index_entries() if e.index_file.index_type == index_type]
        return sorted(t.paths.index_file(m.file_name) for m in metas if m.file_size > 1)

    return files


def _separate_file_indexes(catalog: Catalog, table: str) -> list[str]:
    t = catalog.get_table(table)
    return sorted(
        t.paths.extra_file(t.bucket_path(e.partition, e.bucket), n)
        for e in t.live_entries()
        for n in e.file.extra_files
        if n.endswith(".index")
    )


def _embedding_manifests(catalog: Catalog, table: str) -> list[str]:
    return [p for p in _manifests(catalog, table) if any(_embedded(Path(p).read_bytes()))]


def _embedded(data: bytes) -> list[bytes]:
    return [r["_FILE"]["_EMBEDDED_FILE_INDEX"] for r in fastavro.reader(io.BytesIO(data))]


def recoded(data: bytes, change: Callable[[dict], None]) -> bytes:
    """A manifest whose records ``change`` altered, written again as valid Avro."""
    reader = fastavro.reader(io.BytesIO(data))
    schema, codec = reader.writer_schema, reader.metadata.get("avro.codec", "null")
    records = list(reader)
    for r in records:
        change(r)
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec=codec)
    return out.getvalue()


def _damage_embedded(data: bytes, mutate: Mutate, rng: random.Random) -> bytes:
    """Every embedded file index of a manifest damaged."""

    def change(r: dict) -> None:
        f = r["_FILE"]
        if f["_EMBEDDED_FILE_INDEX"]:
            f["_EMBEDDED_FILE_INDEX"] = mutate(f["_EMBEDDED_FILE_INDEX"])

    return recoded(data, change)


@dataclass(frozen=True)
class _Block:
    """Encoded records for ``fastavro``'s ``Writer.write_block``."""

    bytes_: io.BytesIO
    num_records: int


def _damage_records(data: bytes, mutate: Mutate, rng: random.Random) -> bytes:
    """One block's encoded records damaged, framed again as a valid container (right sizes,
    sync markers): damage that reaches the record decoders rather than the container's checks."""
    reader = fastavro.block_reader(io.BytesIO(data))
    blocks = list(reader)
    hit = rng.randrange(len(blocks))
    out = io.BytesIO()
    writer = fastavro.write.Writer(out, reader.writer_schema, codec=reader.metadata.get("avro.codec", "null"))
    for i, block in enumerate(blocks):
        records = block.bytes_.getvalue()
        writer.write_block(_Block(io.BytesIO(mutate(records) if i == hit else records), block.num_records))
    writer.flush()
    return out.getvalue()


_ROWS = (  # the BinaryRows of a manifest entry
    ("_PARTITION",),
    ("_FILE", "_MIN_KEY"),
    ("_FILE", "_MAX_KEY"),
    ("_FILE", "_KEY_STATS", "_MIN_VALUES"),
    ("_FILE", "_KEY_STATS", "_MAX_VALUES"),
    ("_FILE", "_VALUE_STATS", "_MIN_VALUES"),
    ("_FILE", "_VALUE_STATS", "_MAX_VALUES"),
)


def _damage_rows(data: bytes, mutate: Mutate, rng: random.Random) -> bytes:
    """One BinaryRow (partition, key or stats bounds) of every entry of a manifest damaged."""

    def change(r: dict) -> None:
        *path, last = rng.choice(_ROWS)
        for key in path:
            r = r[key]
        r[last] = mutate(r[last])

    return recoded(data, change)


def _read(catalog: Catalog, name: str) -> None:
    """A read, filtered reads (which consult every index and prune on stats), and the changes of
    every snapshot."""
    t = catalog.get_table(name)
    t.read()
    for f in FILTERS:
        t.read(filter=f)
    t.read_changes(1, t.latest_snapshot_id())


def _read_plain(catalog: Catalog, name: str) -> None:
    t = catalog.get_table(name)
    t.read()
    for f in FILTERS[-2:]:
        t.read(filter=f)


def _read_metadata(catalog: Catalog, name: str) -> None:
    _read(catalog, name)
    for system in ("snapshots", "schemas", "files", "manifests", "table_indexes"):
        catalog.get_table(f"{name}${system}").read()


def _read_and_write(catalog: Catalog, name: str) -> None:
    t = catalog.get_table(name)
    t.read()
    t.write(batch(45, 10, 8))  # a dynamic-bucket write loads the HASH index files it extends


def _read_tag(catalog: Catalog, name: str) -> None:
    catalog.get_table(name).read(tag="t1")
    catalog.get_table(f"{name}$tags").read()


def _read_consumers(catalog: Catalog, name: str) -> None:
    catalog.get_table(f"{name}$consumers").read()
    catalog.get_table(name).expire_snapshots(retain_min=1, retain_max=1)  # consumers hold snapshots


KINDS = (
    Kind("snapshot", "db.pk", _snapshots, _read_metadata),
    Kind("schema", "db.pk", _dir("schema"), _read_metadata),
    Kind("manifest-list", "db.pk", _lists, _read_metadata),
    Kind("manifest", "db.pk", _manifests, _read_metadata),
    Kind("index-manifest", "db.pk", _index_manifest, _read_metadata),
    Kind("deletion-vectors", "db.pk", _index_files(DELETION_VECTORS), _read),
    Kind("embedded-file-index", "db.pk", _embedding_manifests, _read, _damage_embedded),
    Kind("key-rows", "db.pk", _manifests, _read, _damage_rows),
    Kind("partition-rows", "db.ap", _manifests, _read, _damage_rows),
    Kind("ap-manifest-list", "db.ap", _lists, _read),
    Kind("file-index", "db.ap", _separate_file_indexes, _read),
    Kind("manifest-records", "db.pk", _manifests, _read, _damage_records),
    Kind("plain-manifest", "db.many", _manifests, _read_plain),
    Kind("plain-manifest-records", "db.many", _manifests, _read_plain, _damage_records),
    Kind("plain-manifest-list", "db.many", _latest_lists, _read_plain),
    Kind("hash-index", "db.dyn", _index_files("HASH"), _read_and_write),
    Kind("hash-index-manifest", "db.dyn", _index_manifest, _read_and_write),
    Kind("tag", "db.pk", _dir("tag"), _read_tag),
    Kind("consumer", "db.pk", _dir("consumer"), _read_consumers),
)


# ---- trials -------------------------------------------------------------------------------


class Warehouse:
    """The built warehouse, restored to its pristine bytes after each trial."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self.catalog = Catalog(root)
        self.pristine = {p: p.read_bytes() for p in self.root.rglob("*") if p.is_file()}

    def restore(self) -> None:
        for p in self.root.rglob("*"):
            if p.is_file() and p not in self.pristine:
                p.unlink()
        for p, data in self.pristine.items():
            if not p.exists() or p.stat().st_size != len(data) or p.read_bytes() != data:
                p.write_bytes(data)
        manifest_files._CACHE.clear()


@dataclass(frozen=True)
class Trial:
    kind: Kind
    file: str
    mutation: str
    seed: int

    def apply(self) -> None:
        """Damage the file (the warehouse is restored afterwards)."""
        rng = random.Random(self.seed)
        mutation = MUTATIONS[self.mutation]

        def mutate(raw: bytes) -> bytes:
            return mutation(raw, rng) if raw else raw

        path = Path(self.file)
        data = path.read_bytes()
        path.write_bytes(mutate(data) if self.kind.damage is None else self.kind.damage(data, mutate, rng))
        manifest_files._CACHE.clear()

    def __str__(self) -> str:
        return f"{self.kind.name}: {self.mutation} of {os.path.basename(self.file)} (seed {self.seed})"


def trials(warehouse: Warehouse, per_kind: int, seed: int) -> list[Trial]:
    """``per_kind`` trials of every kind: the mutations in turn, files and positions drawn from
    ``seed``."""
    rng = random.Random(seed)
    out = []
    for kind in KINDS:
        found = kind.files(warehouse.catalog, kind.table)
        assert found, f"the warehouse has no {kind.name} file"
        for i in range(per_kind):
            mutation = list(MUTATIONS)[i % len(MUTATIONS)]
            out.append(Trial(kind, rng.choice(found), mutation, rng.getrandbits(32)))
    return out
