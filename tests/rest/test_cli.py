"""``lakehouse rest-catalog``: without grants it makes one token, shows it once and writes it to
the token file only its owner reads; the server it starts answers that token and no other."""

from __future__ import annotations

import stat
import subprocess
import sys

from lakehouse.spark.loopback import LOOPBACK, accepts, free_port, stop_groups, wait_until
from tests.rest.live_server import Client


def test_the_command_serves_with_a_token_it_makes(tmp_path):
    port, token_file = free_port(), tmp_path / "token"
    command = [sys.executable, "-m", "lakehouse.cli", "rest-catalog", "--warehouse", str(tmp_path / "wh"),
               "--port", str(port), "--name", "wh", "--token-file", str(token_file)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_until(lambda: accepts(port), [process], 60, "lakehouse rest-catalog did not start")
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert Client(port, {"Authorization": f"Bearer {token}"}).get("/v1/config").status_code == 200
        assert Client(port, {"Authorization": "Bearer nope"}).get("/v1/config").status_code == 401
    finally:
        stop_groups([process], grace_s=10)
    log = process.stderr.read()
    assert log.count(token) == 1 and f"http://{LOOPBACK}:{port}" in log and "warehouse=wh" in log


def test_bad_grants_are_refused_before_serving(tmp_path):
    grants = tmp_path / "grants.json"
    grants.write_text('{"tokens": {"t": {"*": "admin"}}}')
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse.cli", "rest-catalog", "--warehouse", str(tmp_path), "--grants",
         str(grants)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "'read' or 'write'" in done.stderr


def test_a_command_runs_against_the_server_with_its_url_and_token(tmp_path):
    """``lakehouse rest-catalog ... -- COMMAND`` (``make dev``): the command finds the server at
    ``$LAKEHOUSE_WAREHOUSE`` with ``$LAKEHOUSE_CATALOG_TOKEN``; its exit status is the command's,
    and the server stops with it."""
    client = (
        "import os, sys; from lakehouse import Catalog; "
        "token = os.environ['LAKEHOUSE_CATALOG_TOKEN']; "
        "Catalog(os.environ['LAKEHOUSE_WAREHOUSE'], options={'token': token}).create_database('made'); "
        "sys.exit(7)"
    )
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse.cli", "rest-catalog", "--warehouse", str(tmp_path / "wh"), "--port",
         str(port), "--", sys.executable, "-c", client],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "wh" / "made.db").is_dir()
    assert not accepts(port)
