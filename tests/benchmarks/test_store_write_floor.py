"""The storing floor benchmark times every way on the same values and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

from bench_loading import run_benchmark


def test_every_way_is_timed_and_the_shared_memory_folders_are_removed() -> None:
    before = set(Path("/dev/shm").glob("codedag-write-floor-*"))
    lines = run_benchmark("store_write_floor", "--values", "4", "--mb", "0.1", "--rounds", "2")
    assert lines[0].startswith("4 values of 0.10 MB into /dev/shm, 2 rounds")
    timed = {line[:26].strip(): float(line[26:].split()[0]) for line in lines[1:]}
    assert set(timed) == {
        "lmdb put",
        "file written and renamed",
        "copy into new memory",
        "checksum",
    }
    assert all(ms >= 0 for ms in timed.values())
    assert set(Path("/dev/shm").glob("codedag-write-floor-*")) == before
