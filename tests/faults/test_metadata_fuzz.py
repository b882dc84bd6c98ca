"""Every kind of metadata file damaged many ways (:mod:`tests.faults.metadata_fuzz`): each read
ends in time, with rows or with a ``LakehouseError``.

What the error must say: a ``CorruptFileError`` names a file of the table (the damaged one, or
the one it now points to, which is missing); another ``LakehouseError`` names the table - a
damaged value can be one a newer Paimon writes (``UnsupportedFeatureError`` for a type name or a
data file's format it does not know) or send a read to a snapshot that is not there
(``SnapshotNotFoundError``).

A read runs in a thread given ``TIMEOUT`` seconds, far above the tenth of a second a read of these
tiny tables takes: a decoder that trusts a damaged count spins for minutes. Seeds are fixed, so a
failure names the one trial to replay (kind, file, mutation, seed).
"""

from __future__ import annotations

import threading
import traceback

import pytest

from lakehouse.errors import CorruptFileError, LakehouseError

from .metadata_fuzz import KINDS, Trial, Warehouse, build, trials

SEED = 20240917
PER_KIND = 40  # of each mutation 8
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    root = str(tmp_path_factory.mktemp("fuzz") / "warehouse")
    build(root)
    return Warehouse(root)


def _outcome(trial: Trial, warehouse: Warehouse) -> BaseException | None:
    """What the trial's reads raised (None: they returned), or TimeoutError if they did not end."""
    found: list[BaseException | None] = []

    def reads() -> None:
        try:
            trial.kind.reads(warehouse.catalog, trial.kind.table)
            found.append(None)
        except BaseException as e:  # noqa: BLE001 - judged below
            found.append(e)

    worker = threading.Thread(target=reads, daemon=True)  # a hung read is left behind
    worker.start()
    worker.join(TIMEOUT)
    return found[0] if found else TimeoutError(f"the reads did not end in {TIMEOUT:.0f} s")


def _says_where(error: LakehouseError, trial: Trial, warehouse: Warehouse) -> bool:
    message = str(error)
    if isinstance(error, CorruptFileError):
        return str(warehouse.root) in message or any(p.name in message for p in warehouse.pristine)
    return f"table {trial.kind.table}" in message


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_damaged_metadata_reads_or_is_a_typed_error(kind, warehouse):
    for trial in [t for t in trials(warehouse, PER_KIND, SEED) if t.kind is kind]:
        trial.apply()
        try:
            error = _outcome(trial, warehouse)
        finally:
            warehouse.restore()
        if error is None:
            continue
        trace = "".join(traceback.format_exception(error))
        assert isinstance(error, LakehouseError), f"{trial}: untyped\n{trace}"
        assert _says_where(error, trial, warehouse), f"{trial}: does not say where: {error}"


def test_the_trials_cover_every_kind_and_mutation(warehouse):
    drawn = trials(warehouse, PER_KIND, SEED)
    assert {(t.kind.name, t.mutation) for t in drawn} == {
        (k.name, m) for k in KINDS for m in ("truncate", "flip", "zero", "insert", "duplicate")
    }
    assert len(drawn) == len(KINDS) * PER_KIND


def test_the_warehouse_reads_when_nothing_is_damaged(warehouse):
    for kind in KINDS:
        try:
            assert _outcome(Trial(kind, "", "flip", 0), warehouse) is None, kind.name
        finally:
            warehouse.restore()  # reads that write (a dynamic-bucket write, an expiration)
