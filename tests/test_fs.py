from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs
import pytest

from lakehouse.io.fs import FileIO
from lakehouse.io.pool import map_reads


def test_try_create_has_exactly_one_winner_among_threads(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    path = f"{root}/snapshot/snapshot-1"
    with ThreadPoolExecutor(8) as pool:
        wins = list(pool.map(lambda i: io.try_create(path, f"writer {i}".encode()), range(32)))
    assert wins.count(True) == 1
    winner = wins.index(True)
    assert io.read_bytes(path) == f"writer {winner}".encode()
    assert os.listdir(tmp_path / "snapshot") == ["snapshot-1"]  # no temporary files left


def _race(args):
    root, i = args
    io, _ = FileIO.for_uri(root)
    return io.try_create(f"{root}/snapshot-7", str(i).encode())


def test_try_create_has_exactly_one_winner_among_processes(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        wins = pool.map(_race, [(str(tmp_path), i) for i in range(16)])
    assert wins.count(True) == 1


def test_file_uri_and_plain_path_are_the_same_place(tmp_path):
    io, root = FileIO.for_uri(f"file://{tmp_path}")
    io.write_bytes(f"{root}/a/b.txt", b"x")
    io2, root2 = FileIO.for_uri(str(tmp_path))
    assert io2.read_bytes(f"{root2}/a/b.txt") == b"x"


def test_write_bytes_replaces_atomically(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    io.write_bytes(f"{root}/LATEST", b"1")
    io.write_bytes(f"{root}/LATEST", b"2")
    assert io.read_bytes(f"{root}/LATEST") == b"2"
    assert os.listdir(tmp_path) == ["LATEST"]


def test_a_failed_output_leaves_nothing_under_the_final_name(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    with pytest.raises(RuntimeError), io.open_output(f"{root}/data.parquet") as out:
        out.write(b"half a file")
        raise RuntimeError("writer died")
    assert os.listdir(tmp_path) == []


def test_listing_hides_temporary_files(tmp_path):
    io, root = FileIO.for_uri(str(tmp_path))
    (tmp_path / ".snapshot-3.abc.tmp").write_bytes(b"")
    io.write_bytes(f"{root}/snapshot-1", b"{}")
    assert [s.name for s in io.list_dir(root)] == ["snapshot-1"]
    assert io.list_dir(f"{root}/missing") == []


@pytest.mark.parametrize("remote", [False, True], ids=["local", "through pyarrow.fs"])
def test_ranges_read_pieces_and_stop_at_the_end(tmp_path, remote):
    (tmp_path / "f.bin").write_bytes(bytes(range(100)))
    if remote:  # a filesystem that is not LocalFileSystem takes the generic path
        io, root = FileIO(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())), ""
    else:
        io, root = FileIO.for_uri(str(tmp_path))
    with io.open_ranges(f"{root}/f.bin".lstrip("/") if remote else f"{root}/f.bin") as read:
        assert read(10, 5) == bytes([10, 11, 12, 13, 14])
        assert read(95, 50) == bytes(range(95, 100))
        assert read(200, 10) == b""
        # offsets and lengths read from damaged files: nothing outside the file is asked for
        assert read(-5, 10) == read(10, -5) == b""
        assert read(90, 2**40) == bytes(range(90, 100))
    with pytest.raises(FileNotFoundError), io.open_ranges(f"{root}/missing"):
        pass


def test_a_name_with_a_nul_is_no_file(tmp_path):
    """Names come from metadata files; a damaged one is a missing file, not a filesystem's error."""
    io, root = FileIO.for_uri(str(tmp_path))
    damaged = f"{root}/manifest-\0x"
    assert not io.exists(damaged)
    for read in (io.read_bytes, io.open_input, lambda p: io.open_ranges(p).__enter__()):
        with pytest.raises(FileNotFoundError):
            read(damaged)


_FORK_CHECK = """
import multiprocessing, time
from lakehouse.io.pool import map_reads, submit

def pooled_sum(_):
    return sum(map_reads(lambda x: x * 2, range(10)))

assert map_reads(lambda x: x * x, range(50)) == [x * x for x in range(50)]
assert submit(pow, 2, 10).result() == 1024
for _ in range(3):  # leave idle workers behind: a forked child must not count on them
    map_reads(lambda x: time.sleep(0.001) or x, range(64))
time.sleep(0.1)
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map_async(pooled_sum, range(4), chunksize=1).get(timeout=20) == [90] * 4
"""


def test_the_shared_pool_keeps_order_and_survives_fork():
    # in a fresh interpreter: this test process may hold a Spark gateway connection that a forked
    # child would inherit (and block on), which a Spark Python worker never has
    done = subprocess.run([sys.executable, "-c", _FORK_CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_failed_call_of_map_reads_leaves_nothing_running():
    running, finished = [], []

    def call(x: int) -> int:
        if x == 0:
            raise OSError("cannot delete")
        running.append(x)
        time.sleep(0.01)
        finished.append(x)
        return x

    with pytest.raises(OSError, match="cannot delete"):
        map_reads(call, range(200))
    settled = len(finished)
    time.sleep(0.05)
    assert len(finished) == settled == len(running) and settled < 199


def test_listings_do_not_follow_symbolic_links(tmp_path):
    """A link inside a table to a directory or file elsewhere is neither listed nor walked into."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "precious.parquet").write_bytes(b"x")
    (outside / "single.parquet").write_bytes(b"y")
    root = tmp_path / "table"
    (root / "bucket-0").mkdir(parents=True)
    (root / "bucket-0" / "data-1.parquet").write_bytes(b"z")
    (root / "bucket-1").symlink_to(outside, target_is_directory=True)
    (root / "bucket-0" / "data-2.parquet").symlink_to(outside / "single.parquet")
    io, path = FileIO.for_uri(str(root))
    assert [st.name for st in io.list_dir(path)] == ["bucket-0"]
    assert [st.name for st in io.list_recursive(path)] == ["data-1.parquet"]
