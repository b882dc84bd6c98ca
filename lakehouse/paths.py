"""Where a table's files live, and how partition values become directory names.

Layout (``FileStorePathFactory``)::

    <table>/schema/schema-N
    <table>/snapshot/{EARLIEST,LATEST,snapshot-N}
    <table>/tag/tag-<name>
    <table>/consumer/consumer-<id>
    <table>/branch/branch-<b>/{schema,snapshot,tag,consumer}/...   (a branch's own metadata)
    <table>/manifest/{manifest-,manifest-list-,index-manifest-}<uuid>-<n>
    <table>/index/index-<uuid>-<n>
    <table>/<k1>=<v1>/<k2>=<v2>/bucket-<b>/data-<uuid>-<n>.parquet

Readers rebuild data file directories from the partition values stored in manifests, so the value
-> string conversion must match Java's byte for byte (``InternalRowPartitionComputer`` with
``partition.legacy-name=true``, the default, and ``PartitionPathUtils.escapePathName``).
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

from lakehouse.errors import InvalidArgumentError
from lakehouse.io.fs import FileIO, join
from lakehouse.types import TIMESTAMP_ROOTS, DataType, timestamp_unit, type_param

_ESCAPED = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\\x7f{}[]^")


MAIN_BRANCH = "main"  # Identifier.DEFAULT_MAIN_BRANCH
BRANCH_DIR = "branch"
BRANCH_PREFIX = "branch-"  # BranchManager.BRANCH_PREFIX
TAG_PREFIX = "tag-"


def normalize_branch(branch: str | None) -> str:
    """``main`` for no branch or a blank one (``BranchManager.normalizeBranch``)."""
    return MAIN_BRANCH if branch is None or not branch.strip() else branch


@dataclass(frozen=True)
class TablePaths:
    """Paths of one table's metadata and data directories, as one branch sees them: a branch
    has its own schemas, snapshots, tags and consumers; manifests, index and data files are the
    table's, shared by every branch."""

    root: str
    branch: str = MAIN_BRANCH

    @property
    def branch_root(self) -> str:
        """Where this branch's metadata lives (``BranchManager.branchPath``)."""
        if self.branch == MAIN_BRANCH:
            return self.root
        return join(self.branches_dir, BRANCH_PREFIX + self.branch)

    @property
    def branches_dir(self) -> str:
        return join(self.root, BRANCH_DIR)

    def on_branch(self, branch: str | None) -> TablePaths:
        """The same table's paths as ``branch`` (``main`` for None) sees them."""
        return replace(self, branch=normalize_branch(branch))

    @property
    def schema_dir(self) -> str:
        return join(self.branch_root, "schema")

    @property
    def snapshot_dir(self) -> str:
        return join(self.branch_root, "snapshot")

    @property
    def manifest_dir(self) -> str:
        return join(self.root, "manifest")

    @property
    def tag_dir(self) -> str:
        return join(self.branch_root, "tag")

    @property
    def consumer_dir(self) -> str:
        return join(self.branch_root, "consumer")

    @property
    def index_dir(self) -> str:
        return join(self.root, "index")

    def schema(self, schema_id: int) -> str:
        return join(self.schema_dir, f"schema-{schema_id}")

    def snapshot(self, snapshot_id: int) -> str:
        return join(self.snapshot_dir, f"snapshot-{snapshot_id}")

    def tag(self, name: str) -> str:
        return join(self.tag_dir, TAG_PREFIX + name)

    def manifest(self, name: str) -> str:
        return join(self.manifest_dir, name)

    def index_file(self, file_name: str, external_path: str | None = None) -> str:
        """A table index file (deletion vectors, hash index), or its external path."""
        return external_path or join(self.index_dir, file_name)

    def data_file(self, bucket_path: str, file_name: str, external_path: str | None = None) -> str:
        """A data file in a bucket directory (relative to the table), or its external path."""
        return external_path or join(self.root, bucket_path, file_name)

    def extra_file(self, bucket_path: str, name: str, data_external_path: str | None = None) -> str:
        """A file kept next to a data file (e.g. its file index), wherever the data file is."""
        if data_external_path is None:
            return join(self.root, bucket_path, name)
        return f"{data_external_path.rsplit('/', 1)[0]}/{name}"

    def data_files(self, bucket_path: str, meta) -> list[str]:
        """A data file (a ``DataFileMeta``) and the files kept next to it."""
        extras = [self.extra_file(bucket_path, n, meta.external_path) for n in meta.extra_files]
        return [self.data_file(bucket_path, meta.file_name, meta.external_path), *extras]


class FileNumbers:
    """The counter one writer's namers share; ``next`` is atomic (``itertools.count`` under the GIL)."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self.used = False

    def next(self) -> int:
        self.used = True
        return next(self._count)


@dataclass
class FileNamer:
    """``<prefix><uid>-<n><suffix>`` names: numbers shared with its :meth:`with_prefix` copies, so
    one writer's data, changelog and index files never share a number.

    ``guard`` runs before each name is handed out: a writer that must stop (its write was
    aborted) raises there instead of creating another file.
    """

    prefix: str
    suffix: str = ""
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    numbers: FileNumbers = field(default_factory=FileNumbers, repr=False)
    guard: Callable[[], None] | None = field(default=None, repr=False)

    def next(self) -> str:
        if self.guard is not None:
            self.guard()
        return f"{self.prefix}{self.uid}-{self.numbers.next()}{self.suffix}"

    def with_prefix(self, prefix: str, suffix: str = "") -> FileNamer:
        """Names of another kind of file, numbered by the same counter."""
        return replace(self, prefix=prefix, suffix=suffix)

    @property
    def used(self) -> bool:
        """Whether any name was handed out (so a file may exist)."""
        return self.numbers.used


def index_file_namer(names: FileNamer | None = None) -> FileNamer:
    """Names ``index-<uid>-<n>`` of table index files (``IndexPathFactory``); ``names``: the
    writer's namer, whose uid and counter they share (default: a fresh uuid)."""
    return (names or FileNamer("")).with_prefix("index-")


def bucket_dirs(io: FileIO, root: str, partition_levels: int) -> list[str]:
    """The ``bucket-N`` directories below ``partition_levels`` levels of ``key=value`` partition
    directories of a table: where its data, changelog and file-index files live."""
    children = [st for st in io.list_dir(root) if st.is_dir]
    if partition_levels == 0:
        return [st.path for st in children if st.name.startswith("bucket-")]
    return [
        found for st in children if "=" in st.name for found in bucket_dirs(io, st.path, partition_levels - 1)
    ]


MAX_NAME_BYTES = 200  # of a name that becomes part of a file name: fits every filesystem's 255


def checked_name(kind: str, name: object, table: str) -> str:
    """``name`` (a tag, consumer or branch name) if it can be part of a file name of ``table``:
    non-blank, no path separator, no surrounding spaces or leading dot, at most
    :data:`MAX_NAME_BYTES` bytes; otherwise :class:`InvalidArgumentError`."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or name != name.strip()
        or name.startswith(".")
        or any(c in name for c in "/\\\0")
        or len(name.encode()) > MAX_NAME_BYTES
    ):
        raise InvalidArgumentError(
            f"table {table}: {kind} {name!r} must be a non-blank name of at most {MAX_NAME_BYTES} bytes "
            f"without '/', '\\', a leading '.' or surrounding spaces; choose another"
        )
    return name


def escape_path_name(text: str) -> str:
    """PartitionPathUtils.escapePathName: %XX for characters unsafe in a path segment."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def partition_path(names: list[str], types: list[DataType], values: list[Any], default_name: str) -> str:
    """Directory of a partition, e.g. ``dt=2024-01-01/region=eu``; "" for unpartitioned tables."""
    parts = []
    for name, dtype, value in zip(names, types, values, strict=True):
        text = partition_string(dtype, value)
        if text is None or not text.strip():
            text = default_name
        parts.append(f"{escape_path_name(name)}={escape_path_name(text)}")
    return "/".join(parts)


def partition_string(dtype: DataType, value: Any) -> str | None:
    """Java's ``toString()`` of an internal (physical) partition value (legacy partition names)."""
    return None if value is None else value_string(dtype, value)


def value_string(dtype: DataType, value: Any) -> str:
    """Java's ``toString()`` of a (non-null) internal value."""
    root = dtype.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("FLOAT", "DOUBLE"):
        return java_float_string(float(value), single=root == "FLOAT")
    if root == "DECIMAL":
        return format(Decimal(value), "f")
    if root in TIMESTAMP_ROOTS:
        return local_date_time_string(value, timestamp_unit(type_param(dtype, "precision")))
    if root in ("BINARY", "VARBINARY"):
        raise ValueError("binary values cannot name a partition directory")
    return str(value)  # strings, integers, DATE (epoch days), TIME (millis of day)


def local_date_time_string(value: int, unit: str) -> str:
    """``LocalDateTime.toString()`` of an epoch value in ``unit``."""
    per_second = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    seconds, sub = divmod(value, per_second)
    nanos = sub * (1_000_000_000 // per_second)
    dt = datetime(1970, 1, 1) + timedelta(seconds=seconds)
    text = dt.strftime("%Y-%m-%dT%H:%M")
    if dt.second or nanos:
        text += f":{dt.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text


def java_float_string(value: float, single: bool = False) -> str:
    """``Double.toString`` / ``Float.toString``: plain between 1e-3 and 1e7, else d.dddE±n."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if single:
        digits = np.format_float_scientific(np.float32(value), unique=True, trim="-")
    else:
        digits = _shortest_scientific(value)
    mantissa, exp = digits.lower().split("e")
    exponent = int(exp)
    sign = "-" if mantissa.startswith("-") else ""
    mantissa = mantissa.lstrip("-").replace(".", "")
    mantissa = mantissa.rstrip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:
        point = exponent + 1
        if point <= 0:
            return f"{sign}0.{'0' * -point}{mantissa}"
        whole = mantissa[:point].ljust(point, "0")
        frac = mantissa[point:] or "0"
        return f"{sign}{whole}.{frac}"
    frac = mantissa[1:] or "0"
    return f"{sign}{mantissa[0]}.{frac}E{exponent}"


def _shortest_scientific(value: float) -> str:
    """Shortest round-tripping digits of a double, in scientific form."""
    text = repr(value)
    mantissa, _, exp = text.partition("e")
    digits = mantissa.lstrip("-").replace(".", "")
    point = mantissa.lstrip("-").find(".")
    point = len(mantissa.lstrip("-")) if point < 0 else point
    exponent = (int(exp) if exp else 0) + point - 1
    lead = len(digits) - len(digits.lstrip("0"))
    digits = digits[lead:] or "0"
    exponent -= lead
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}e{exponent}"
