"""The parts of the suite: the tests that need an extra's packages beyond the engine, each under a
marker, so that an environment with fewer extras selects what it can run (``-m engine``: the
engine alone) and no test of a part it lacks.

A test belongs to a part by its directory, by a fixture it uses, or by its own marker; a test of
no part is marked ``engine``. A run that selects no test of a part cannot import that part's
packages: the import fails, and the run fails naming the test, whether the packages are installed
or not (a test that needs them but is not marked would otherwise pass only where they are).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

# each part's marker: the top-level packages its tests import
PARTS = {
    "interop": ("pypaimon",),  # the compatibility oracle (the dev extra; it keeps pyarrow < 20)
    "iceberg": ("pyiceberg", "duckdb"),  # Iceberg readers of the Iceberg-compatible metadata (test extra)
    "spark": ("pyspark",),
    "dagster": ("dagster", "dagster_lakehouse", "pyspark"),
    "s3": ("obstore", "moto", "pyspark"),  # the S3 server runs on the Spark extra's loopback helpers
    "postgres": ("psycopg", "pgserver"),
    "mysql": ("pymysql",),
    "rest": ("starlette", "uvicorn"),
    "e2e": ("dagster", "dagster_lakehouse", "pyspark", "obstore", "moto", "pymysql", "playwright"),
}
BY_DIRECTORY = {"interop": "interop", "spark": "spark", "dagster": "dagster", "e2e": "e2e", "rest": "rest"}
BY_FIXTURE = {
    "spark": "spark", "connect_server": "spark", "connect_spark": "spark", "any_spark": "spark",
    "s3_server": "s3", "s3_warehouse": "s3", "postgres_server": "postgres", "mariadb_server": "mysql",
}  # fmt: skip
ENGINE = "engine"


def parts_of(item: pytest.Item) -> set[str]:
    """The parts ``item`` belongs to."""
    found = {BY_DIRECTORY.get(item.path.parent.name)} | {BY_FIXTURE.get(f) for f in item.fixturenames}
    found |= {part for part in PARTS if item.get_closest_marker(part)}
    return found - {None}


class Unselected(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Fails every import of the packages of the parts a run selects no test of, and records it.
    A probe that only looks for such a package (``importlib.util.find_spec``, as Polars looks for
    pyiceberg) finds it and imports nothing: only loading it fails."""

    def __init__(self, packages: dict[str, list[str]]) -> None:
        self.packages = packages  # package -> the parts that use it
        self.imports: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.packages:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        parts = self.packages[spec.name.partition(".")[0]]
        test = os.environ.get("PYTEST_CURRENT_TEST", "collection").rpartition(" (")[0]
        message = f"{test} imports {spec.name}, a package of the {' or '.join(parts)} tests: mark it so"
        self.imports.append(message)
        raise ModuleNotFoundError(f"{message} (this run selects none)", name=spec.name)

    def exec_module(self, module) -> None:
        """Never reached: :meth:`create_module` fails every load."""


UNSELECTED = Unselected({})


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = parts_of(item)
        for part in parts:
            item.add_marker(part)
        if not parts:
            item.add_marker(ENGINE)


def pytest_collection_finish(session: pytest.Session) -> None:
    selected = set().union(*map(parts_of, session.items))
    needed = {package for part in selected for package in PARTS[part]}
    for part in sorted(PARTS.keys() - selected):
        for package in PARTS[part]:
            if package not in needed and package not in sys.modules:
                UNSELECTED.packages.setdefault(package, []).append(part)
    sys.meta_path.insert(0, UNSELECTED)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if UNSELECTED.imports:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if UNSELECTED.imports:
        terminalreporter.section("imports of unselected parts", red=True)
        for line in dict.fromkeys(UNSELECTED.imports):
            terminalreporter.line(line)
    terminalreporter.line(tested())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--installed", action="store_true",
        help="test the installed lakehouse and dagster-lakehouse: fail if either is imported from a checkout",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("installed"):
        for name in ("lakehouse", "dagster_lakehouse"):
            module = _find(name)
            if module is not None and (Path(module).parents[1] / "pyproject.toml").exists():
                raise pytest.UsageError(f"--installed, but {name} is imported from a checkout: {module}")


def _find(name: str) -> str | None:
    """Where ``name`` would be imported from (its ``__init__.py``), if it is installed."""
    spec = importlib.util.find_spec(name)
    return spec.origin if spec is not None else None


def tested() -> str:
    """Which lakehouse the run tests, on which Python and releases."""
    names = ("pyarrow", "numpy", "pyspark", "dagster", "pandas", "polars", "pypaimon")
    releases = ", ".join(f"{name} {_release(name)}" for name in names)
    where = _find("lakehouse")
    return f"tested {where and Path(where).parent} on Python {sys.version.split()[0]}, {releases}"


def _release(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"
