"""Dynamic bucket mode (``bucket = -1``): the assigner giving each primary key of a batch its bucket.

A primary key is identified by the ``BinaryRow.hashCode`` of its trimmed key (the primary key
without the partition columns). Per partition, :class:`PartitionIndex` maps every key hash to its
bucket and places new keys with Java's rules; each bucket's hashes are persisted as a HASH index
file (:mod:`lakehouse.bucket.hash_index`) so the next writer can rebuild the index.

:class:`HashBucketAssigner` is one assigner task (Java's ``HashBucketAssigner``); given no loader it
starts every partition empty, like ``SimpleHashBucketAssigner`` (used for overwrites).
:class:`BucketAssignerGroup` runs all tasks of a parallel Java job in one process, so a table
gets the buckets a Flink or Spark job with that assigner parallelism would give it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa

from lakehouse.bucket.channels import AssignerSplit, assigner_channel
from lakehouse.bucket.partition_index import ID_LIMIT, UNLIMITED, PartitionIndex
from lakehouse.errors import InvalidOptionError, MisroutedRowsError
from lakehouse.manifest import binary_row
from lakehouse.options import (
    DYNAMIC_BUCKET_ASSIGNER_PARALLELISM,
    DYNAMIC_BUCKET_INITIAL_BUCKETS,
    DYNAMIC_BUCKET_MAX_BUCKETS,
    DYNAMIC_BUCKET_TARGET_ROW_NUM,
    CoreOptions,
)
from lakehouse.types import DataType

P = TypeVar("P", bound=Hashable)  # how a caller names partitions (serialized rows, in the engine)

# (bucket, key hashes) of a partition's HASH files, in index-manifest order
FileLoader = Callable[[P], Sequence[tuple[int, np.ndarray]]]


@dataclass(frozen=True)
class DynamicBucketOptions:
    """The ``dynamic-bucket.*`` table options, with Paimon's defaults."""

    target_row_num: int = 2_000_000
    max_buckets: int = UNLIMITED
    initial_buckets: int | None = None
    assigner_parallelism: int | None = None

    def __post_init__(self) -> None:
        if self.target_row_num < 1:
            raise InvalidOptionError(
                f"{DYNAMIC_BUCKET_TARGET_ROW_NUM}={self.target_row_num} must be positive"
            )
        if self.max_buckets != UNLIMITED and not 1 <= self.max_buckets <= ID_LIMIT:
            raise InvalidOptionError(
                f"{DYNAMIC_BUCKET_MAX_BUCKETS}={self.max_buckets} must be -1 (unlimited) or between 1 "
                f"and {ID_LIMIT}"
            )
        for key, value in (
            (DYNAMIC_BUCKET_INITIAL_BUCKETS, self.initial_buckets),
            (DYNAMIC_BUCKET_ASSIGNER_PARALLELISM, self.assigner_parallelism),
        ):
            if value is not None and value < 1:
                raise InvalidOptionError(f"{key}={value} must be positive")

    @classmethod
    def from_table(cls, options: CoreOptions) -> DynamicBucketOptions:
        """The options as a table sets them (unset ones take Paimon's defaults)."""

        def optional(key: str) -> int | None:
            return None if options.get(key) is None else options.get_int(key)

        target, limit = optional(DYNAMIC_BUCKET_TARGET_ROW_NUM), optional(DYNAMIC_BUCKET_MAX_BUCKETS)
        return cls(
            target_row_num=2_000_000 if target is None else target,
            max_buckets=UNLIMITED if limit is None else limit,
            initial_buckets=optional(DYNAMIC_BUCKET_INITIAL_BUCKETS),
            assigner_parallelism=optional(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM),
        )


@dataclass(frozen=True)
class HashIndexUpdate(Generic[P]):
    """The complete key hashes a bucket's new HASH index file must hold."""

    partition: P
    bucket: int
    hashes: np.ndarray


class HashBucketAssigner(Generic[P]):
    """One assigner task: the partitions it has seen, each loaded from its HASH files on first use."""

    def __init__(
        self,
        options: DynamicBucketOptions,
        split: AssignerSplit | None = None,
        loader: FileLoader[P] | None = None,
    ) -> None:
        self.options = options
        self.split = split or AssignerSplit()
        self._loader = loader
        self._partitions: dict[P, PartitionIndex] = {}

    @property
    def partitions(self) -> list[P]:
        return list(self._partitions)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays of every partition index held."""
        return sum(index.nbytes for index in self._partitions.values())

    def assign(self, partition: P, partition_hash: int, key_hashes: np.ndarray) -> np.ndarray:
        """The bucket of each key (int32, in order) of a batch of one partition.

        ``partition_hash`` is ``BinaryRow.hashCode`` of the partition row (it routes keys between
        tasks); every key must be routed to this task, as Java checks.
        """
        hashes = _int32(key_hashes)
        misrouted = int((~self.split.routes_here(partition_hash, hashes)).sum())
        if misrouted:
            raise MisroutedRowsError(
                f"{misrouted} keys routed to another assigner reached assigner {self.split.assign_id} "
                f"(of {self.split.num_channels}); send each key to the writer of its assigner_channel()"
            )
        index = self._partitions.get(partition)
        if index is None:
            files = self._loader(partition) if self._loader else ()
            index = PartitionIndex.load(
                files, partition_hash, self.options.target_row_num, self.options.max_buckets, self.split
            )
            self._partitions[partition] = index
        return index.assign(hashes)

    def take_changes(self) -> list[HashIndexUpdate[P]]:
        """The new HASH file contents of every bucket that received keys since the last call."""
        return [
            HashIndexUpdate(partition, bucket, hashes)
            for partition, index in self._partitions.items()
            for bucket, hashes in index.take_changes().items()
        ]

    def evict_idle(self, commit_identifier: int, latest_committed: int | None) -> list[P]:
        """Drop partitions left idle, as Java's ``prepareCommit``; call once per commit.

        A partition used since the previous call is stamped ``commit_identifier``; one not used
        since is dropped once its stamp is at most ``latest_committed`` (the identifier of this
        writer's latest successful commit, None before the first), i.e. everything it assigned
        has been committed. Partitions with changes not yet taken are kept. Returns the dropped ones.
        """
        dropped = []
        for partition, index in list(self._partitions.items()):
            if index.accessed:
                index.last_access = commit_identifier
            elif (
                latest_committed is not None
                and index.last_access is not None
                and index.last_access <= latest_committed
                and not index.has_changes
            ):
                del self._partitions[partition]
                dropped.append(partition)
            index.accessed = False
        return dropped


class BucketAssignerGroup(Generic[P]):
    """All ``parallelism`` assigner tasks of a Java job, in one process: every key goes to the task
    ``assigner_channel`` picks for it, so buckets come out as that job would make them."""

    def __init__(
        self,
        options: DynamicBucketOptions,
        loader: FileLoader[P] | None = None,
        parallelism: int | None = None,
    ) -> None:
        parallelism = parallelism or options.assigner_parallelism or 1
        self._files: dict[P, Sequence[tuple[int, np.ndarray]]] = {}
        load = functools.partial(self._load_once, loader) if loader else None
        self.tasks: list[HashBucketAssigner[P]] = [
            HashBucketAssigner(options, split, load)
            for split in AssignerSplit.tasks(parallelism, options.initial_buckets)
        ]

    @property
    def nbytes(self) -> int:
        return sum(task.nbytes for task in self.tasks)

    def assign(self, partition: P, partition_hash: int, key_hashes: np.ndarray) -> np.ndarray:
        """The bucket of each key (int32, in order) of a batch of one partition."""
        hashes = _int32(key_hashes)
        if len(self.tasks) == 1:
            return self.tasks[0].assign(partition, partition_hash, hashes)
        split = self.tasks[0].split
        channels = assigner_channel(partition_hash, hashes, split.num_channels, split.num_assigners)
        order = np.argsort(channels, kind="stable")
        bounds = np.searchsorted(channels[order], np.arange(len(self.tasks) + 1))
        out = np.empty(len(hashes), dtype=np.int32)
        try:
            for task, (start, end) in zip(self.tasks, itertools.pairwise(bounds.tolist()), strict=True):
                if end > start:
                    rows = order[start:end]
                    out[rows] = task.assign(partition, partition_hash, hashes[rows])
        finally:
            self._files.pop(partition, None)
        return out

    def take_changes(self) -> list[HashIndexUpdate[P]]:
        """New HASH file contents per (partition, bucket); tasks sharing a bucket (channels not a
        multiple of assigners) are merged into one file."""
        merged: dict[tuple[P, int], np.ndarray] = {}
        for task in self.tasks:
            for update in task.take_changes():
                key = (update.partition, update.bucket)
                merged[key] = np.union1d(merged[key], update.hashes) if key in merged else update.hashes
        return [HashIndexUpdate(partition, bucket, hashes) for (partition, bucket), hashes in merged.items()]

    def evict_idle(self, commit_identifier: int, latest_committed: int | None) -> list[P]:
        """:meth:`HashBucketAssigner.evict_idle` on every task; the partitions some task dropped."""
        dropped = (task.evict_idle(commit_identifier, latest_committed) for task in self.tasks)
        return list(dict.fromkeys(itertools.chain.from_iterable(dropped)))

    def _load_once(self, loader: FileLoader[P], partition: P) -> Sequence[tuple[int, np.ndarray]]:
        """The partition's files, read once for all tasks that start it within one batch."""
        if partition not in self._files:
            self._files[partition] = loader(partition)
        return self._files[partition]


def key_hashes(table: pa.Table, names: Sequence[str], types: Sequence[DataType]) -> np.ndarray:
    """``BinaryRow.hashCode`` of each row's trimmed primary key (the primary key columns that are
    not partition columns, in key order), int32: the hashes dynamic buckets are assigned by."""
    columns = [table.column(name).combine_chunks() for name in names]
    return binary_row.row_hashes(columns, list(types), table.num_rows)


def _int32(key_hashes: np.ndarray) -> np.ndarray:
    hashes = np.asarray(key_hashes)
    if hashes.dtype != np.int32:
        raise TypeError(f"key hashes must be int32 (BinaryRow.hashCode), not {hashes.dtype}")
    return hashes
