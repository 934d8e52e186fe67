"""What writing a value into new shared memory costs, whatever the store: the floor of storing.

A first epoch stores every value at the cut into pages of shared memory that were never written,
which the kernel allocates and zeroes on first touch. This times, for ``--values`` float32 arrays
of ``--mb`` MB written into a fresh folder under ``/dev/shm`` (CPU time of this thread, medians
of ``--rounds`` rounds, lowest to highest):

* ``lmdb put``: one LMDB transaction per value, the prefix cache's settings (no sync);
* ``file``: each value written to a file of its own, then renamed (write-then-rename);
* ``copy into new memory``: a ``bytearray`` of the value's size filled from it, freed after;
* ``checksum``: xxh3 of the value (what the cache takes on the loading thread).

It measures; it asserts nothing. Run::

    python benchmarks/store_write_floor.py [--values 96] [--mb 2.1] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import lmdb
import numpy as np
import xxhash


def _folder() -> str:
    return tempfile.mkdtemp(prefix="codedag-write-floor-", dir="/dev/shm")


def _per_value_ms(write: Callable[[int], None], count: int) -> float:
    started = time.thread_time()
    for index in range(count):
        write(index)
    return (time.thread_time() - started) * 1e3 / count


def lmdb_put(values: list[memoryview], count: int) -> float:
    """ms per value stored into a fresh LMDB environment in shared memory."""
    folder = _folder()
    size = sum(v.nbytes for v in values) * (count // len(values) + 1) * 2
    env = lmdb.open(folder, map_size=size, sync=False, metasync=False, readahead=False)
    try:

        def put(index: int) -> None:
            with env.begin(write=True) as txn:
                txn.put(b"%d" % index, values[index % len(values)])

        return _per_value_ms(put, count)
    finally:
        env.close()
        shutil.rmtree(folder)


def file_write(values: list[memoryview], count: int) -> float:
    """ms per value written to a file of its own in shared memory, then renamed."""
    folder = _folder()
    try:

        def write(index: int) -> None:
            temporary = os.path.join(folder, f"{index}.tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(descriptor, values[index % len(values)])
            finally:
                os.close(descriptor)
            os.rename(temporary, os.path.join(folder, str(index)))

        return _per_value_ms(write, count)
    finally:
        shutil.rmtree(folder)


def copy_into_new_memory(values: list[memoryview], count: int) -> float:
    """ms per value copied into memory allocated for it."""

    def copy(index: int) -> None:
        value = values[index % len(values)]
        target = bytearray(value.nbytes)
        target[:] = value
        del target

    return _per_value_ms(copy, count)


def checksum(values: list[memoryview], count: int) -> float:
    """ms per value hashed with xxh3."""
    return _per_value_ms(lambda index: xxhash.xxh3_64_digest(values[index % len(values)]), count)


WAYS: dict[str, Callable[[list[memoryview], int], float]] = {
    "lmdb put": lmdb_put,
    "file written and renamed": file_write,
    "copy into new memory": copy_into_new_memory,
    "checksum": checksum,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=96)
    parser.add_argument("--mb", type=float, default=2.1)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    floats = max(1, int(args.mb * 1e6 / 4))
    values = [memoryview(rng.random(floats, dtype=np.float32)).cast("B") for _ in range(8)]
    print(
        f"{args.values} values of {values[0].nbytes / 1e6:.2f} MB into /dev/shm, "
        f"{args.rounds} rounds, {os.cpu_count()} CPUs; ms of this thread's CPU per value"
    )
    for name, way in WAYS.items():
        times = [way(values, args.values) for _ in range(args.rounds)]
        print(
            f"{name:<26} {statistics.median(times):7.3f} ({min(times):.3f}-{max(times):.3f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
