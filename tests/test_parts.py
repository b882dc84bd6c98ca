"""The parts of the suite (``tests/parts.py``): a run fails, naming the test, when a test imports a
package of a part the run selects no test of, whether the package is installed or not, and even
when the test swallows the failed import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SWALLOWED = """
    def test_probe():
        try:
            import pymysql.cursors  # noqa: F401
        except ImportError:
            pass
"""


def run_probe(tmp_path: Path, marker: str) -> subprocess.CompletedProcess[str]:
    """pytest with the parts' hooks on one test importing pymysql, under ``marker`` if given."""
    decorator = f"@pytest.mark.{marker}" if marker else ""
    probe = f"import pytest\n\n{decorator}" + textwrap.dedent(SWALLOWED)
    (tmp_path / "test_probe.py").write_text(probe)
    args = ["-m", "pytest", "-p", "tests.parts", "-p", "no:cacheprovider", "-W", "ignore", str(tmp_path)]
    root = Path(__file__).parents[1]  # where tests.parts imports from
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=120)


def test_an_unmarked_test_importing_a_part_fails_the_run(tmp_path):
    done = run_probe(tmp_path, "")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "test_probe.py::test_probe imports pymysql, a package of the" in done.stdout


@pytest.mark.parametrize("marker", ["mysql", "e2e"])
def test_a_test_marked_with_a_part_using_the_package_imports_it(tmp_path, marker):
    done = run_probe(tmp_path, marker)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "imports of unselected parts" not in done.stdout
