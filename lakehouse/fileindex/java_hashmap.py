"""The iteration order of ``java.util.HashMap``, which Paimon's index writers leak into their bytes.

Bitmap dictionaries and file-index headers are written in HashMap order, so matching Java byte
for byte means replaying the table (JDK 17): capacity 16 doubling past a 0.75 load factor, bins
chosen by ``(h ^ h >>> 16) & (capacity - 1)``, ``put`` appending to a bin and ``computeIfAbsent``
prepending, resizes splitting bins in order, and a crowded bin (8 nodes from computeIfAbsent, 9
from put) growing a table smaller than 64 or else turning into a red-black tree, whose root is
moved to the front of the bin and whose new nodes are linked right after their tree parent.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from lakehouse.murmur import murmur_hash

_TREEIFY = 8
_UNTREEIFY = 6
_MIN_TREEIFY_CAPACITY = 64

K = TypeVar("K", bound=Hashable)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


class _Node(Generic[K]):
    __slots__ = ("h", "key", "parent", "left", "right", "red")

    def __init__(self, h: int, key: K) -> None:
        self.h, self.key = h, key
        self.parent: _Node[K] | None = None
        self.left: _Node[K] | None = None
        self.right: _Node[K] | None = None
        self.red = False


class _Bin(Generic[K]):
    """One table slot: nodes in iteration (``next``) order, plus a tree root once treeified."""

    def __init__(self) -> None:
        self.nodes: list[_Node[K]] = []
        self.root: _Node[K] | None = None


class JavaHashMap(Generic[K]):
    """Keys in the order a Java HashMap iterates them; ``sort_key`` gives keys their ``compareTo``
    order, which decides their place inside tree bins."""

    def __init__(self, sort_key: Callable[[K], Any] | None = None) -> None:
        self._bins: list[_Bin[K]] = []
        self._keys: set[K] = set()
        self._sort_key: Callable[[K], Any] = sort_key or (lambda k: k)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[K]:
        for b in self._bins:
            for node in b.nodes:
                yield node.key

    def put(self, key: K, hash_code: int) -> None:
        if key in self._keys:
            return
        if not self._bins:
            self._resize()
        self._insert(key, hash_code, at_head=False)
        if len(self._keys) > 0.75 * len(self._bins):
            self._resize()

    def compute_if_absent(self, key: K, hash_code: int) -> None:
        """``computeIfAbsent`` (and ``compute``): an overfull table grows first, even when ``key``
        is already present."""
        if not self._bins or len(self._keys) > 0.75 * len(self._bins):
            self._resize()
        if key not in self._keys:
            self._insert(key, hash_code, at_head=True)

    # ---- internals -----------------------------------------------------------------------

    def _insert(self, key: K, hash_code: int, at_head: bool) -> None:
        h = hash_code & 0xFFFFFFFF
        h ^= h >> 16
        node = _Node(_signed(h), key)
        b = self._bins[h & (len(self._bins) - 1)]
        self._keys.add(key)
        if b.root is not None:
            self._put_tree(b, b.root, node)
            return
        b.nodes.insert(0, node) if at_head else b.nodes.append(node)
        if len(b.nodes) >= _TREEIFY + (0 if at_head else 1):
            if len(self._bins) < _MIN_TREEIFY_CAPACITY:
                self._resize()
            else:
                self._treeify(b)

    def _resize(self) -> None:
        old = self._bins
        cap = len(old) * 2 if old else 16
        bins: list[_Bin[K]] = [_Bin() for _ in range(cap)]
        for j, b in enumerate(old):
            lo = [n for n in b.nodes if not n.h & len(old)]
            hi = [n for n in b.nodes if n.h & len(old)]
            for index, half, other in ((j, lo, hi), (j + len(old), hi, lo)):
                if not half:
                    continue
                target = bins[index]
                target.nodes = half
                if b.root is not None and len(half) > _UNTREEIFY:
                    if other:
                        self._treeify(target)
                    else:
                        target.root = b.root  # the whole tree moved: structure unchanged
        self._bins = bins

    def _dir(self, x: _Node[K], p: _Node[K]) -> int:
        if p.h != x.h:
            return -1 if p.h > x.h else 1
        return -1 if self._sort_key(x.key) < self._sort_key(p.key) else 1

    def _treeify(self, b: _Bin[K]) -> None:
        root = b.nodes[0]
        root.parent = root.left = root.right = None
        root.red = False
        for x in b.nodes[1:]:
            x.parent = x.left = x.right = None
            p = root
            while True:
                d = self._dir(x, p)
                child = p.left if d <= 0 else p.right
                if child is None:
                    x.parent = p
                    if d <= 0:
                        p.left = x
                    else:
                        p.right = x
                    root = _balance_insertion(root, x)
                    break
                p = child
        self._move_root_to_front(b, root)

    def _put_tree(self, b: _Bin[K], root: _Node[K], x: _Node[K]) -> None:
        p = root
        while True:
            d = self._dir(x, p)
            child = p.left if d <= 0 else p.right
            if child is None:
                b.nodes.insert(b.nodes.index(p) + 1, x)  # linked right after its tree parent
                x.parent = p
                if d <= 0:
                    p.left = x
                else:
                    p.right = x
                self._move_root_to_front(b, _balance_insertion(root, x))
                return
            p = child

    @staticmethod
    def _move_root_to_front(b: _Bin[K], root: _Node[K]) -> None:
        b.root = root
        if b.nodes[0] is not root:
            b.nodes.remove(root)
            b.nodes.insert(0, root)


def computed_order(
    keys: Sequence[K],
    hash_codes: np.ndarray,
    sort_key: Callable[[K], Any] | None = None,
    trailing_calls: bool = False,
) -> list[K]:
    """Distinct ``keys`` (in insertion order) as a HashMap filled by ``computeIfAbsent`` iterates them.

    ``trailing_calls``: more calls (for keys already present) follow the last insertion; the
    first of them still grows an overfull table. Calls between insertions need no telling: a
    growth they trigger is the one the next insertion would trigger, at the same size.

    While no bin ever holds 8 nodes, the order follows from the final capacity alone: bins in
    index order, newest key first inside a bin (``computeIfAbsent`` links new nodes at the head,
    and resizes keep the relative order of the nodes they split). That case is sorted in one
    vectorized pass; a crowded bin (an early resize below capacity 64, or a red-black tree) is
    replayed node by node.
    """
    h = np.asarray(hash_codes, dtype=np.int64).astype(np.uint32)
    h ^= h >> np.uint32(16)
    n, capacity = len(keys), 16
    while True:
        present = min(n, int(0.75 * capacity) + 1)  # keys inserted before this capacity is outgrown
        if present and np.bincount(h[:present] & np.uint32(capacity - 1)).max() >= _TREEIFY:
            table: JavaHashMap[K] = JavaHashMap(sort_key)
            for key, code in zip(keys, np.asarray(hash_codes).tolist(), strict=True):
                table.compute_if_absent(key, code)
            if trailing_calls and n:
                table.compute_if_absent(keys[-1], int(hash_codes[-1]))
            return list(table)
        if present == n:
            break
        capacity *= 2
    if trailing_calls and n > 0.75 * capacity:
        capacity *= 2
    order = np.lexsort((-np.arange(n), h & np.uint32(capacity - 1)))
    return [keys[i] for i in order.tolist()]


def _rotate(root: _Node[K], p: _Node[K], side: str) -> _Node[K]:
    """``rotateLeft`` (side "left": p's right child takes its place) or ``rotateRight``."""
    other = "right" if side == "left" else "left"
    child = getattr(p, other)
    if child is None:
        return root
    inner = getattr(child, side)
    setattr(p, other, inner)
    if inner is not None:
        inner.parent = p
    child.parent = p.parent
    if child.parent is None:
        root, child.red = child, False
    elif getattr(p.parent, side) is p:
        setattr(p.parent, side, child)
    else:
        setattr(p.parent, other, child)
    setattr(child, side, p)
    p.parent = child
    return root


def _balance_insertion(root: _Node[K], x: _Node[K]) -> _Node[K]:
    """``HashMap.TreeNode.balanceInsertion``: red-black fix-up after inserting ``x``."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        side = "left" if xp is xpp.left else "right"  # the side of xpp that x's parent is on
        other = "right" if side == "left" else "left"
        y = getattr(xpp, other)
        if y is not None and y.red:
            y.red = xp.red = False
            xpp.red = True
            x = xpp
            continue
        if x is getattr(xp, other):
            x = xp
            root = _rotate(root, x, side)
            xp = x.parent
            xpp = xp.parent if xp is not None else None
        if xp is not None:
            xp.red = False
            if xpp is not None:
                xpp.red = True
                root = _rotate(root, xpp, other)


# ---- Java hashCode of the key types the index writers use ------------------------------------


def string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def binary_string_hashes(values: list[bytes]) -> np.ndarray:
    """``BinaryString.hashCode`` of UTF-8 encoded strings (MurmurHash of the bytes)."""
    buf = np.frombuffer(b"".join(values), dtype=np.uint8)
    offsets = np.cumsum([0, *map(len, values)])
    return np.asarray(murmur_hash(buf, offsets), dtype=np.int64)


def long_hash_codes(values: np.ndarray) -> np.ndarray:
    """``Long.hashCode``: ``(int) (v ^ (v >>> 32))`` of each value."""
    u = np.asarray(values, dtype=np.int64).view(np.uint64)
    return ((u ^ (u >> np.uint64(32))) & np.uint64(0xFFFFFFFF)).astype(np.int64)


def float_hash_codes(values: np.ndarray) -> np.ndarray:
    """``Float.hashCode``: the IEEE bits, every NaN as the canonical one."""
    v = np.asarray(values, dtype=np.float32)
    return np.where(np.isnan(v), 0x7FC00000, v.view(np.int32)).astype(np.int64)


def double_hash_codes(values: np.ndarray) -> np.ndarray:
    """``Double.hashCode``: the canonical IEEE bits folded to 32."""
    v = np.asarray(values, dtype=np.float64)
    return long_hash_codes(np.where(np.isnan(v), 0x7FF8000000000000, v.view(np.int64)))
