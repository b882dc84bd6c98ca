"""Which dynamic-bucket assigner a key goes to, and which bucket ids that assigner may create.

Paimon runs ``num_channels`` assigner tasks and spreads the keys of one partition over
``num_assigners`` of them (``BucketAssigner.computeAssigner``): the partition picks a starting
channel ``abs(partitionHash % channels)`` and a key adds ``abs(keyHash % assigners)`` to it, modulo
channels. Task ``assign_id`` only creates buckets ``b`` with ``b % assigners == assign_id % assigners``,
so each of a partition's assigners fills its own bucket ids. ``num_assigners`` is
``min(dynamic-bucket.initial-buckets, channels)``: that many buckets start filling at once in a new
partition. When ``num_channels`` is a multiple of ``num_assigners``, a partition's assigners own
distinct bucket ids; otherwise two of them can own the same ones (the writers behind them then
share buckets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lakehouse.errors import InvalidOptionError


def assigner_channel(
    partition_hash: int | np.ndarray, key_hashes: np.ndarray, num_channels: int, num_assigners: int
) -> np.ndarray:
    """``computeAssigner``: the assigner task of each key (Java's truncating ``%``), given the hash
    of its partition (one for all keys, or one per key)."""
    start = np.abs(np.fmod(np.asarray(partition_hash, dtype=np.int64), num_channels))
    offset = np.abs(np.fmod(key_hashes.astype(np.int64), num_assigners))
    return (start + offset) % num_channels


def assigners_per_partition(parallelism: int, initial_buckets: int | None) -> int:
    """How many of ``parallelism`` assigner tasks serve one partition."""
    if parallelism < 1 or (initial_buckets is not None and initial_buckets < 1):
        raise InvalidOptionError(
            f"dynamic bucket assigners: parallelism {parallelism} and initial-buckets "
            f"{initial_buckets} must be positive"
        )
    return min(initial_buckets or parallelism, parallelism)


@dataclass(frozen=True)
class AssignerSplit:
    """One assigner task's place among ``num_channels`` tasks, of which ``num_assigners`` serve a
    partition; the default is a single assigner doing everything."""

    num_channels: int = 1
    num_assigners: int = 1
    assign_id: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.num_assigners <= self.num_channels or not 0 <= self.assign_id < self.num_channels:
            raise InvalidOptionError(
                f"assigner {self.assign_id} with {self.num_assigners} assigners over {self.num_channels} "
                f"channels: need 1 <= assigners <= channels and 0 <= id < channels"
            )

    @classmethod
    def tasks(cls, parallelism: int, initial_buckets: int | None = None) -> list[AssignerSplit]:
        """The splits of ``parallelism`` assigner tasks, as Flink and Spark writers configure them."""
        assigners = assigners_per_partition(parallelism, initial_buckets)
        return [cls(parallelism, assigners, task) for task in range(parallelism)]

    @property
    def owns_exclusively(self) -> bool:
        """Whether no other assigner serving a partition with this one owns its bucket ids."""
        return self.num_channels % self.num_assigners == 0

    def owns(self, buckets: np.ndarray) -> np.ndarray:
        """``isMyBucket``: whether this task may create each bucket id."""
        return np.asarray(buckets) % self.num_assigners == self.assign_id % self.num_assigners

    def owned_ids(self, limit: int) -> np.ndarray:
        """The bucket ids below ``limit`` this task may create, ascending."""
        return np.arange(self.assign_id % self.num_assigners, limit, self.num_assigners, dtype=np.int32)

    def routes_here(self, partition_hash: int, key_hashes: np.ndarray) -> np.ndarray:
        """Whether each key of the partition is sent to this task."""
        if self.num_channels == 1:
            return np.ones(len(key_hashes), dtype=bool)
        channels = assigner_channel(partition_hash, key_hashes, self.num_channels, self.num_assigners)
        return channels == self.assign_id
