"""One partition's dynamic-bucket index: the bucket of every known key, and where new keys go.

Paimon's ``PartitionIndex`` assigns one key hash at a time:

1. a known hash keeps its bucket;
2. else the first entry of its non-full map (a ``java.util.HashMap`` of bucket -> row count, in
   iteration order) whose count is below ``dynamic-bucket.target-row-num`` takes it; entries found
   full on the way are removed;
3. else a new bucket: the lowest id this assigner owns and nobody uses yet, below
   ``dynamic-bucket.max-buckets`` (below 32767 when unlimited, and running out is an error);
4. else (max-buckets reached) one of the partition's buckets of this assigner. Java picks one at
   random; here it is ``buckets[abs(hash % len(buckets))]`` over the ascending bucket ids, so the
   choice is reproducible and does not depend on arrival or load order.

The non-full map is filled when the index is loaded and only shrinks from the front after that
(an iterator's ``remove`` keeps the order of the rest); a new bucket enters it only once it is
empty. So it is a queue - loaded buckets in HashMap order, then created buckets one at a time -
and a batch of n new keys takes, in arrival order, the room left in the queue, then
``target-row-num`` keys per new bucket, then step 4: cumulative sums, no loop per key. A bucket
loaded with more rows than the target (the target was lowered, or other assigners' keys are in
its file) is simply full: it keeps its keys and only receives step-4 keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lakehouse.bucket.bucket_map import HashBucketMap
from lakehouse.bucket.channels import AssignerSplit
from lakehouse.errors import InvalidOptionError
from lakehouse.fileindex.java_hashmap import JavaHashMap

UNLIMITED = -1
ID_LIMIT = 32767  # bucket ids are Java shorts: unlimited means ids 0 .. Short.MAX_VALUE - 1


@dataclass
class _Plan:
    """Where a batch's new keys go by rules 2 and 3, before any state changes."""

    slots: np.ndarray  # bucket of the k-th new key (arrival order), for the first len(slots) keys
    taken: np.ndarray  # keys each queue entry receives
    created: np.ndarray  # new bucket ids, ascending
    into_created: int  # keys the created buckets receive
    bound_reached: bool


class PartitionIndex:
    """Key hash -> bucket for one partition and one assigner, with Java's rules for new keys."""

    def __init__(self, target_row_num: int, max_buckets: int = UNLIMITED, split: AssignerSplit | None = None):
        self.target_row_num = target_row_num
        self.max_buckets = max_buckets
        self.split = split or AssignerSplit()
        self.keys = HashBucketMap()
        self.accessed = True  # assigned to since the assigner's last commit
        self.last_access: int | None = None  # commit identifier of the last interval it was used in
        self._counts = np.zeros(0, dtype=np.int64)  # Java's row count, by bucket id
        self._queue = np.zeros(0, dtype=np.int32)  # the non-full map in iteration order
        self._buckets = np.zeros(0, dtype=np.int32)  # this assigner's buckets in use, ascending
        self._bound_reached = False
        self._foreign: dict[int, np.ndarray] = {}  # hashes in our buckets' files the map leaves out
        self._changed: set[int] = set()

    @classmethod
    def load(
        cls,
        files: Sequence[tuple[int, np.ndarray]],
        partition_hash: int,
        target_row_num: int,
        max_buckets: int = UNLIMITED,
        split: AssignerSplit | None = None,
    ) -> PartitionIndex:
        """The index of a partition from its HASH files, as (bucket, hashes) in index-manifest order.

        Like Java's ``loadIndex``: the map keeps the hashes routed to this assigner (a later file
        wins a repeated hash); the row counts and the non-full map cover the buckets this
        assigner owns, counting every hash of their files.
        """
        index = cls(target_row_num, max_buckets, split)
        files = [(int(bucket), np.asarray(hashes, dtype=np.int32)) for bucket, hashes in files]
        if not files:
            return index
        hashes = np.concatenate([h for _, h in files])
        owners = np.concatenate([np.full(len(h), b, dtype=np.int16) for b, h in files])
        mine = index.split.routes_here(partition_hash, hashes)
        index.keys = HashBucketMap.from_pairs(hashes[mine], owners[mine])
        owns = index.split.owns(np.array([b for b, _ in files])).tolist()
        owned = [(b, len(h)) for (b, h), own in zip(files, owns, strict=True) if len(h) and own]
        index._queue = np.array(_loaded_order(owned), dtype=np.int32)
        index._buckets = np.sort(index._queue)
        index._grow_counts(index._buckets)
        for bucket, size in owned:
            index._counts[bucket] += size
        if len(index.keys) < len(hashes):
            index._foreign = index._unmapped(hashes, owners)
        return index

    @property
    def nbytes(self) -> int:
        """Bytes of every array the index holds."""
        arrays: list[np.ndarray] = [self._counts, self._queue, self._buckets, *self._foreign.values()]
        return self.keys.nbytes + sum(a.nbytes for a in arrays)

    @property
    def has_changes(self) -> bool:
        """Whether some bucket received keys that :meth:`take_changes` has not handed out yet."""
        return bool(self._changed)

    def assign(self, key_hashes: np.ndarray) -> np.ndarray:
        """The bucket of each key hash (int32, in arrival order), as Java assigning them one by one:
        a hash repeated in the batch gets the bucket of its first occurrence."""
        self.accessed = True
        count = len(key_hashes)
        if not count:
            return np.zeros(0, dtype=np.int32)
        packed = np.sort((key_hashes.astype(np.int64) << 32) | np.arange(count, dtype=np.int64))
        hashes = (packed >> 32).astype(np.int32)
        rows = packed & 0xFFFFFFFF
        first = np.empty(count, dtype=bool)
        first[0] = True
        np.not_equal(hashes[1:], hashes[:-1], out=first[1:])
        distinct = bool(first.all())
        if not distinct:
            hashes, first_rows = hashes[first], rows[first]
        else:
            first_rows = rows
        buckets = self.keys.lookup(hashes)
        new = buckets < 0
        if new.all():
            buckets = self._place(hashes, first_rows, count)
        elif new.any():
            buckets[new] = self._place(hashes[new], first_rows[new], count)
        out = np.empty(count, dtype=np.int32)
        out[rows] = buckets if distinct else buckets[np.cumsum(first, dtype=np.int32) - 1]
        return out

    def take_changes(self) -> dict[int, np.ndarray]:
        """Every key hash of each bucket that received new keys since the last call (int32,
        ascending): the content of the bucket's new HASH file."""
        if not self._changed:
            return {}
        wanted = np.array(sorted(self._changed), dtype=np.int16)
        self._changed = set()
        hashes, owners = self.keys.select(wanted)
        extra = [(int(b), self._foreign[int(b)]) for b in wanted if int(b) in self._foreign]
        if extra:
            hashes = np.concatenate([hashes, *(h for _, h in extra)])
            owners = np.concatenate([owners, *(np.full(len(h), b, dtype=np.int16) for b, h in extra)])
        packed = np.sort((owners.astype(np.int64) << 32) | (hashes.astype(np.int64) + 2**31))
        values = ((packed & 0xFFFFFFFF) - 2**31).astype(np.int32)
        bounds = np.searchsorted(packed >> 32, np.append(wanted, wanted[-1] + 1).astype(np.int64))
        return {int(b): values[bounds[i] : bounds[i + 1]] for i, b in enumerate(wanted)}

    # ---- new keys ------------------------------------------------------------------------------

    def _place(self, hashes: np.ndarray, first_rows: np.ndarray, count: int) -> np.ndarray:
        """Buckets of new distinct ``hashes`` (ascending) first seen at ``first_rows`` of a batch of
        ``count`` rows; records them."""
        if len(hashes) == count:
            rank = first_rows  # every row is a new key: arrival rank = row
        else:
            arrived = np.zeros(count, dtype=bool)
            arrived[first_rows] = True
            rank = (np.cumsum(arrived, dtype=np.int32) - 1)[first_rows]
        plan = self._plan(len(hashes))
        # the buckets rules 2 and 3 give keys to: plan.taken counts along the queue _apply replaces
        self._changed.update(self._queue[plan.taken > 0].tolist(), plan.created.tolist())
        placed = rank < len(plan.slots)
        spills = not placed.all()  # rule 4: the keys beyond the slots of rules 2 and 3
        if spills:
            buckets = np.empty(len(hashes), dtype=np.int32)
            buckets[placed] = plan.slots[rank[placed]]
        else:
            buckets = plan.slots[rank].astype(np.int32, copy=False)
        self._apply(plan)
        if spills:
            spilled = hashes[~placed].astype(np.int64)
            buckets[~placed] = spilled_into = self._buckets[np.abs(np.fmod(spilled, len(self._buckets)))]
            self._changed.update(np.unique(spilled_into).tolist())
        self.keys.insert(hashes, buckets)
        return buckets

    def _plan(self, count: int) -> _Plan:
        """Rules 2 and 3 for ``count`` new keys; raises where Java would, before changing anything."""
        target = self.target_row_num
        room = np.maximum(target - self._counts[self._queue], 0)
        ends = np.cumsum(room)
        from_queue = min(count, int(ends[-1]) if len(ends) else 0)
        taken = np.diff(np.minimum(ends, from_queue), prepend=0)
        left = count - from_queue
        created = np.zeros(0, dtype=np.int32)
        if left and not self._bound_reached:
            created = self._free_ids(-(-left // target))
        into_created = min(left, len(created) * target)
        filled = np.clip(into_created - target * np.arange(len(created)), 0, target)  # per created bucket
        slots = np.concatenate([np.repeat(self._queue, taken), np.repeat(created, filled)])
        bound_reached = self._bound_reached or into_created < left
        if into_created < left:
            if self.max_buckets == UNLIMITED:
                raise InvalidOptionError(
                    f"a partition needs more than {ID_LIMIT} dynamic buckets; raise "
                    f"dynamic-bucket.target-row-num (now {target})"
                )
            if not len(self._buckets) and not len(created):
                raise InvalidOptionError(
                    f"dynamic bucket assigner {self.split.assign_id} (of {self.split.num_assigners}) owns "
                    f"no bucket id below dynamic-bucket.max-buckets={self.max_buckets}; raise max-buckets "
                    f"or lower the assigner parallelism / initial-buckets"
                )
        return _Plan(slots, taken, created, into_created, bound_reached)

    def _apply(self, plan: _Plan) -> None:
        target = self.target_row_num
        self._counts[self._queue] += plan.taken
        if len(plan.created):
            self._grow_counts(plan.created)
            self._counts[plan.created] = target
            self._counts[plan.created[-1]] = plan.into_created - (len(plan.created) - 1) * target
            self._buckets = np.union1d(self._buckets, plan.created).astype(np.int32)
            last = plan.created[-1:]
            self._queue = last[self._counts[last] < target]
        else:
            self._queue = self._queue[self._counts[self._queue] < target]
        self._bound_reached = plan.bound_reached

    def _free_ids(self, wanted: int) -> np.ndarray:
        """Up to ``wanted`` of the lowest ids this assigner owns and does not use, below the limit."""
        limit = ID_LIMIT if self.max_buckets == UNLIMITED else self.max_buckets
        ids = self.split.owned_ids(limit)
        return ids[~np.isin(ids, self._buckets)][:wanted]

    def _grow_counts(self, buckets: np.ndarray) -> None:
        size = int(buckets.max()) + 1 if len(buckets) else 0
        if size > len(self._counts):
            self._counts = np.concatenate([self._counts, np.zeros(size - len(self._counts), np.int64)])

    def _unmapped(self, hashes: np.ndarray, owners: np.ndarray) -> dict[int, np.ndarray]:
        """Hashes in the files of our buckets that the map does not place there (routed to another
        assigner, or repeated in a later file): kept so rewritten files lose nothing."""
        ours = self.split.owns(owners)
        hashes, owners = hashes[ours], owners[ours]
        away = self.keys.lookup(hashes) != owners
        hashes, owners = hashes[away], owners[away]
        return {int(b): np.unique(hashes[owners == b]) for b in np.unique(owners)}


def _loaded_order(files: list[tuple[int, int]]) -> list[int]:
    """Buckets in the iteration order of ``loadIndex``'s HashMap, from (bucket, hash count) of the
    owned non-empty files in manifest order. Java calls ``compute`` once per hash: a bucket enters
    at its file's first hash, and a later call - for any bucket - still grows an overfull table, so
    one call after the insertion stands for the rest of the file."""
    table: JavaHashMap[int] = JavaHashMap()
    for bucket, size in files:
        table.compute_if_absent(bucket, bucket)
        if size > 1:
            table.compute_if_absent(bucket, bucket)
    return list(table)
