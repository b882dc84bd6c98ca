"""The local session: reachable from this machine only."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.spark


def listening_addresses(pid: int) -> set[str]:
    """IPv4/IPv6 addresses the process's TCP sockets listen on (from /proc, Linux)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.islink(f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                    found.add(fields[1].rsplit(":", 1)[0])
    return found


@pytest.mark.skipif(not os.path.exists("/proc/self/net/tcp"), reason="reads Linux's /proc")
def test_a_local_session_listens_on_loopback_only(spark):
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    addresses = listening_addresses(pid)
    # 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc prints them
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    assert addresses and addresses <= loopback
