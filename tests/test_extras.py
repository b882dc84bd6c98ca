"""What the engine needs and what its extras add: a part whose extra is missing says which to install.

Each case runs in a fresh interpreter in which the extra's package cannot be imported, as in an
environment where only the engine is installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCK = """\
import sys
class NotInstalled:  # finds the blocked packages first, and says they are not there
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, NotInstalled())
"""


def run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    script = BLOCK.format(blocked=blocked) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_the_engine_imports_none_of_the_integrations():
    done = run_without(
        ["pyspark", "dagster", "obstore", "pandas", "polars", "psycopg", "pymysql", "starlette", "uvicorn"],
        """
        import lakehouse, lakehouse.catalog, lakehouse.table.table
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "dagster", "obstore")))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_local_warehouse_writes_and_reads_without_the_extras(tmp_path):
    done = run_without(
        ["pyspark", "dagster", "obstore", "pandas", "polars", "zstandard"],
        f"""
        import pyarrow as pa
        from lakehouse import Catalog
        catalog = Catalog({str(tmp_path)!r})
        catalog.create_database("db")
        t = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]), primary_keys=["id"])
        t.write(pa.table({{"id": [1, 2, 2]}}))
        print(t.read().num_rows)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


@pytest.mark.parametrize(
    ("blocked", "code", "extra"),
    [
        (["pyspark"], "import lakehouse.spark", "spark"),
        (["obstore"], "from lakehouse import Catalog; Catalog('s3://bucket/warehouse')", "s3"),
        (
            ["starlette", "uvicorn"],
            "from lakehouse.rest.grants import Grants; from lakehouse.rest.server import create_app; "
            "create_app('w', Grants.single('t'))",
            "rest",
        ),
    ],
    ids=["spark", "s3", "rest"],
)
def test_a_missing_extra_is_a_typed_error_naming_it(blocked, code, extra):
    done = run_without(
        blocked,
        f"""
        from lakehouse.errors import MissingExtraError
        try:
            {code}
        except MissingExtraError as e:
            print(e.extra, "|", e)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{extra} |"), done.stdout
    assert f"pip install 'lakehouse[{extra}]'" in done.stdout
