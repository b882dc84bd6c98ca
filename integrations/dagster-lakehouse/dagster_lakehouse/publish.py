"""Write-audit-publish on Paimon branches: a materialization of an audited table writes to a
branch of its run, the table's checks run against that branch, and only data that passes them is
fast-forwarded to ``main``; failing data stays on the branch for inspection and ``main`` is
untouched (downstream assets, gated by the blocking checks, never see it).

The branch starts at ``main``'s latest snapshot (empty when ``main`` has none). Publishing
requires ``main`` to still be there: had another writer committed to ``main`` meanwhile, a fast
forward would drop its snapshots, so the publish is refused and the run can be retried.
"""

from __future__ import annotations

from enum import Enum

from lakehouse import Table
from lakehouse.errors import CommitConflictError, SnapshotNotFoundError


class Publish(Enum):
    """How a materialization reaches its table."""

    DIRECT = "direct"  # committed to main; checks run after the data is visible
    AUDITED = "audited"  # committed to a run branch, fast-forwarded to main once its checks pass


def audit_branch(run_id: str) -> str:
    """The branch a run's audited writes go to."""
    return f"audit-{run_id}"


def open_audit(table: Table, branch: str) -> Table:
    """The audit branch ``branch`` of ``table`` (main), created from main's latest snapshot; a
    branch of that name left by an earlier attempt of the same run is replaced."""
    if branch in table.branches():
        table.delete_branch(branch)
    table.create_branch(branch, snapshot_id=table.latest_snapshot_id())
    return table.on_branch(branch)


def audit_base(table: Table, audit: Table) -> int | None:
    """The main snapshot the audit branch started from: its earliest snapshot if main holds that
    very snapshot, else None (the branch started empty, its earliest snapshot is the run's)."""
    earliest = audit.earliest_snapshot_id()
    if earliest is None:
        return None
    try:
        same = table.snapshot(earliest) == audit.snapshot(earliest)
    except SnapshotNotFoundError:
        return None
    return earliest if same else None


def publish(table: Table, branch: str) -> int | None:
    """Fast-forward main to the audit branch and delete the branch; main's new latest snapshot."""
    audit = table.on_branch(branch)
    base, latest = audit_base(table, audit), table.latest_snapshot_id()
    if latest != base:
        raise CommitConflictError(
            f"table {table.name}: main moved from snapshot {base} to {latest} while branch {branch} was "
            f"audited; publishing would drop those commits. Re-run the materialization"
        )
    if audit.latest_snapshot_id() != base:  # the run committed something
        table.fast_forward(branch)
    table.delete_branch(branch)
    return table.refresh().latest_snapshot_id()
