"""The exceptions the engine raises: one root, a handful of categories.

Every message names the table, column or file concerned and says what to do about it.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Root of every error the engine raises on purpose."""


class DatabaseNotFoundError(LakehouseError):
    """A database that does not exist was named."""


class DatabaseExistsError(LakehouseError):
    """A database was created under a name already in use."""


class DatabaseNotEmptyError(LakehouseError):
    """A database that still holds tables was dropped without cascade."""


class TableNotFoundError(LakehouseError):
    """A table that does not exist was named."""


class TableExistsError(LakehouseError):
    """A table was created under a name already in use."""


class SchemaMismatchError(LakehouseError):
    """Data or a schema change does not fit the table's schema."""


class InvalidOptionError(LakehouseError):
    """A table option has a value the engine cannot use; ``option`` names it where known."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class UnsupportedFeatureError(LakehouseError):
    """A valid Paimon feature this engine does not implement (yet)."""


class MisroutedRowsError(LakehouseError, ValueError):
    """Rows reached a writer that does not serve their bucket assigner (they were not routed)."""


class CommitConflictError(LakehouseError):
    """A commit lost a race that retrying cannot fix (e.g. a file it deletes is already gone)."""


class UnsafeCommitError(LakehouseError):
    """A commit on a store that cannot create files atomically, with no catalog lock configured."""


class CorruptFileError(LakehouseError):
    """A metadata or data file is truncated, unparsable or inconsistent."""


class SnapshotNotFoundError(LakehouseError):
    """Time travel named a snapshot, timestamp or tag the table does not have."""


class TagNotFoundError(SnapshotNotFoundError):
    """A tag that does not exist was named."""


class TagExistsError(LakehouseError):
    """A tag was created under a name already in use."""


class BranchNotFoundError(TableNotFoundError):
    """A branch of a table that does not exist was named (``db.t$branch_x``, ``branch=``)."""


class BranchExistsError(LakehouseError):
    """A branch was created under a name already in use."""


class InvalidArgumentError(LakehouseError, ValueError):
    """A call got an argument value it cannot act on (nothing was changed)."""


class ArgumentTypeError(LakehouseError, TypeError):
    """A call got an argument of a type it does not take (nothing was changed)."""


class MissingExtraError(LakehouseError, ImportError):
    """A part of the engine was used whose optional dependencies are not installed (an extra)."""

    def __init__(self, what: str, extra: str, cause: BaseException | None = None) -> None:
        missing = f" ({cause})" if cause is not None else ""
        super().__init__(f"{what} needs the '{extra}' extra{missing}: pip install 'lakehouse[{extra}]'")
        self.extra = extra


class WorkerEnvironmentError(LakehouseError):
    """The processes an integration hands work to (Spark's Python workers) cannot run the engine."""


class WriteAbortedError(LakehouseError):
    """A writer learnt that its write had ended (aborted, or committed without it) and stopped."""


class NotAuthorizedError(LakehouseError):
    """A REST catalog request came without a token, or with one the server does not know."""


class ForbiddenError(LakehouseError):
    """A REST catalog token lacks the right a request needs (a read token that writes, ...)."""


class ServiceError(LakehouseError):
    """A REST catalog server failed a request, or could not be reached."""
