"""What a file index says about a predicate: SKIP (no row matches), REMAIN (rows may match), or
the exact set of row positions that may match (``FileIndexResult``, ``BitmapIndexResult``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyroaring import BitMap


class IndexResult:
    """Base of the three answers; combine with ``&`` and ``|`` as Paimon does."""

    def remain(self) -> bool:
        raise NotImplementedError

    def __and__(self, other: IndexResult) -> IndexResult:
        return self if other.remain() else SKIP

    def __or__(self, other: IndexResult) -> IndexResult:
        return REMAIN if other.remain() else self


class _Remain(IndexResult):
    def remain(self) -> bool:
        return True

    def __and__(self, other: IndexResult) -> IndexResult:
        return other

    def __or__(self, other: IndexResult) -> IndexResult:
        return self

    def __repr__(self) -> str:
        return "REMAIN"


class _Skip(IndexResult):
    def remain(self) -> bool:
        return False

    def __and__(self, other: IndexResult) -> IndexResult:
        return self

    def __or__(self, other: IndexResult) -> IndexResult:
        return other

    def __repr__(self) -> str:
        return "SKIP"


REMAIN = _Remain()
SKIP = _Skip()


@dataclass(frozen=True, eq=False)
class RowSet(IndexResult):
    """Row positions (in the data file) that may match."""

    rows: BitMap

    def remain(self) -> bool:
        return len(self.rows) > 0

    def __and__(self, other: IndexResult) -> IndexResult:
        if isinstance(other, RowSet):
            return RowSet(self.rows & other.rows)
        return super().__and__(other)

    def __or__(self, other: IndexResult) -> IndexResult:
        if isinstance(other, RowSet):
            return RowSet(self.rows | other.rows)
        return super().__or__(other)
