"""What the prefix cache's store costs here: writing a value once and reading it back, by size.

Measured on a scratch store of the same kind and place as the RAM tier (shared memory when the
machine has it, else a temporary folder): each size is encoded and written as new entries (as the
first epoch does: its keyed tag, page allocation and the check of the bytes written included) and
read back into a private copy, tag checked (as a hit does). The optimizer weighs a cut's traced time against these figures
(:func:`codedag.optimize.cache.decide`).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from codedag.measure.pair import time_one
from codedag.store.entry import decode, encode
from codedag.store.lmdb_tier import LmdbTier


@dataclass
class StoreCosts:
    """Measured read and write times by value size (medians, ns)."""

    sizes: list[int] = field(default_factory=list)
    read_ns: list[int] = field(default_factory=list)
    write_ns: list[int] = field(default_factory=list)
    where: str = ""

    def __call__(self, nbytes: int) -> tuple[int, int]:
        """``(read_ns, write_ns)`` for ``nbytes``, interpolated between measured sizes."""
        if not self.sizes:
            return 0, 0
        i = bisect.bisect_left(self.sizes, nbytes)
        if i < len(self.sizes) and self.sizes[i] == nbytes:
            return self.read_ns[i], self.write_ns[i]
        lo, hi = max(0, i - 1), min(len(self.sizes) - 1, i)
        if lo == hi or self.sizes[hi] == self.sizes[lo]:
            scale = nbytes / max(1, self.sizes[lo])
            return int(self.read_ns[lo] * scale), int(self.write_ns[lo] * scale)
        t = (nbytes - self.sizes[lo]) / (self.sizes[hi] - self.sizes[lo])
        read = self.read_ns[lo] + t * (self.read_ns[hi] - self.read_ns[lo])
        write = self.write_ns[lo] + t * (self.write_ns[hi] - self.write_ns[lo])
        return int(read), int(write)


def measure_store(sizes: Iterable[int], repeats: int = 7) -> StoreCosts:
    """Time writing and reading values of each size on a scratch store (see the module
    docstring)."""
    from codedag.devices.memory import shared_memory_folder

    wanted = sorted({int(s) for s in sizes if int(s) > 0})
    base = shared_memory_folder()
    scratch = Path(tempfile.mkdtemp(prefix="codedag-store-costs-", dir=base))
    costs = StoreCosts(where=str(base or tempfile.gettempdir()))
    try:
        budget = sum(wanted) * (repeats + 3) * 2 + (64 << 20)
        tier = LmdbTier("ram" if base else "disk", scratch / "env", budget)
        tier.begin_run()
        counter = itertools.count()
        secret = os.urandom(32)
        for size in wanted:
            value = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
            written: list[bytes] = []
            write = functools.partial(_write, tier, secret, counter, value, written)
            write_timing = time_one(write, repeats=repeats, warmup=1)
            read = functools.partial(_read, tier, secret, itertools.cycle(written))
            read_timing = time_one(read, repeats=repeats)
            costs.sizes.append(size)
            costs.read_ns.append(int(read_timing.median_ns))
            costs.write_ns.append(int(write_timing.median_ns))
        tier.close()
        # a larger value never costs less: a lower median is noise (a plan would otherwise
        # read "its extra bytes add -0.0002 ms")
        costs.read_ns = list(itertools.accumulate(costs.read_ns, max))
        costs.write_ns = list(itertools.accumulate(costs.write_ns, max))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return costs


def _write(
    tier: LmdbTier,
    secret: bytes,
    counter: Iterator[int],
    value: np.ndarray,
    written: list[bytes],
) -> None:
    key = next(counter).to_bytes(8, "little")
    encoded = encode(value, secret, key)  # its tag, taken as the cache takes it
    assert encoded is not None
    tier.put(key, encoded)
    written.append(key)


def _read(tier: LmdbTier, secret: bytes, keys: Iterator[bytes]) -> None:
    key = next(keys)
    tier.get(key, functools.partial(decode, secret=secret, key=key))
