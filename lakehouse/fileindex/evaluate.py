"""Evaluating a filter against one data file's indexes (``FileIndexPredicate``).

AND and OR combine per Paimon's result algebra; several indexes on one column are ANDed (each is
a superset of the matching rows, so is their intersection). A leaf on a column without an index,
or on a column whose type changed since the file was written, gives REMAIN: an index only ever
narrows what may match, it never decides on its own that a row matches.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse.fileindex.registry import INDEX_TYPES, IndexReader
from lakehouse.fileindex.result import REMAIN, SKIP, IndexResult
from lakehouse.predicate import And, Leaf, Or, Predicate
from lakehouse.types import DataType

# what an empty index (no values at all) answers: EmptyFileIndexReader
_EMPTY_SKIPS = {"eq", "in", "is_not_null", "lt", "le", "gt", "ge", "starts_with"}


class FileIndexes:
    """The parsed indexes of one file, readable by current column name."""

    def __init__(
        self, container: Mapping[str, Mapping[str, bytes | None]], columns: Mapping[str, tuple[str, DataType]]
    ) -> None:
        """``columns``: current name -> (name in the file, type the index was built with)."""
        self.container = container
        self.columns = columns
        self._readers: dict[tuple[str, str], IndexReader] = {}

    def visit(self, leaf: Leaf) -> IndexResult:
        mapped = self.columns.get(leaf.column)
        if mapped is None:
            return REMAIN
        name, dtype = mapped
        result: IndexResult = REMAIN
        for index_type, data in self.container.get(name, {}).items():
            if data is None:
                answer: IndexResult = SKIP if leaf.op in _EMPTY_SKIPS else REMAIN
            elif index_type in INDEX_TYPES:
                key = (name, index_type)
                if key not in self._readers:
                    self._readers[key] = INDEX_TYPES[index_type].reader(data, dtype)
                answer = self._readers[key].visit(leaf.op, leaf.literals)
            else:
                continue  # an index type this engine does not know narrows nothing
            result = result & answer
            if not result.remain():
                return result
        return result

    def evaluate(self, pred: Predicate) -> IndexResult:
        """The rows of the file that may satisfy a bound predicate in negation normal form."""
        if isinstance(pred, Leaf):
            return self.visit(pred)
        if isinstance(pred, And):
            result: IndexResult = REMAIN
            for child in pred.children:
                result = result & self.evaluate(child)
                if not result.remain():
                    return result
            return result
        if isinstance(pred, Or):
            result = SKIP
            for child in pred.children:
                result = result | self.evaluate(child)
            return result
        raise TypeError(f"expected a predicate in negation normal form, got {pred!r}")
