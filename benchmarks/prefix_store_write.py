"""What storing a first epoch's values costs the loading thread: stored in place or queued.

Stores ``--values`` values of ``--mb`` MB (a letterbox sample's 2.1 MB by default) into a fresh
prefix cache store (its RAM tier in shared memory where the machine has one), in these ways:

* ``in place``: each value encoded and written by the loading thread (``PrefixStore.put``);
* ``queued``: each value encoded on the loading thread and handed to the process's
  :class:`~codedag.store.writer.Writer`, whose thread stores it;

each alone and between decodes of a JPEG (``--decode``, what a first epoch does between two
values, so a free core can store while the loading thread decodes). Ways are interleaved in
``--rounds`` rounds (A B, B A, ...). Printed: milliseconds per value on the loading thread (what
the epoch waits for) and until every value is in the store, medians over rounds with the lowest
and highest. It measures; it asserts nothing. Runs unchanged anywhere. Run::

    python benchmarks/prefix_store_write.py [--values 96] [--mb 2.1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from codedag.measure import round_order
from codedag.store.entry import encode
from codedag.store.tiers import PrefixStore, StoreSettings
from codedag.store.writer import Writer


def _jpeg() -> np.ndarray:
    rng = np.random.default_rng(0)
    image = cv2.GaussianBlur(rng.integers(0, 255, (720, 1080, 3), dtype=np.uint8), (9, 9), 3)
    ok, data = cv2.imencode(".jpg", image)
    assert ok
    return data


def _values(count: int, nbytes: int) -> list[np.ndarray]:
    base = np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8)
    out = []
    for i in range(count):
        value = base.copy()
        value[:8] = np.frombuffer(i.to_bytes(8, "little"), np.uint8)
        out.append(value)
    return out


def _run(
    values: list[np.ndarray], queued: bool, work: Callable[[], object] | None
) -> tuple[float, float]:
    """``(loading thread ms, ms until stored)`` per value, on a fresh store."""
    folder = Path(tempfile.mkdtemp(prefix="codedag-store-write-"))
    store = PrefixStore.open(StoreSettings(folder=folder, ram_budget_bytes=2 << 30))
    store.begin_run()
    writer = Writer(store, lambda _key, _outcome, _ns: None) if queued else None
    try:
        loading_ns = 0
        started = time.perf_counter_ns()
        for i, value in enumerate(values):
            if work is not None:
                work()
            begin = time.perf_counter_ns()
            key = i.to_bytes(16, "little")
            if writer is None:
                store.put(key, value, ())
            else:
                encoded = encode(value, store.secret, key)
                assert encoded is not None
                writer.submit(key, encoded, ())
            loading_ns += time.perf_counter_ns() - begin
        if writer is not None:
            writer.flush()
        total_ns = time.perf_counter_ns() - started
        if writer is not None:
            writer.close()
    finally:
        store.clear()
        shutil.rmtree(folder, ignore_errors=True)
    return loading_ns / 1e6 / len(values), total_ns / 1e6 / len(values)


def _span(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=96)
    parser.add_argument("--mb", type=float, default=2.1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    values = _values(args.values, int(args.mb * 1e6))
    jpeg = _jpeg()
    decode_ms = statistics.median(
        _timed(lambda: cv2.imdecode(jpeg, cv2.IMREAD_COLOR)) for _ in range(9)
    )
    ways: dict[str, tuple[bool, Callable[[], object] | None]] = {
        "in place": (False, None),
        "queued": (True, None),
        "in place, between decodes": (False, lambda: cv2.imdecode(jpeg, cv2.IMREAD_COLOR)),
        "queued, between decodes": (True, lambda: cv2.imdecode(jpeg, cv2.IMREAD_COLOR)),
    }
    loading: dict[str, list[float]] = {w: [] for w in ways}
    total: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(args.rounds):
        for way in round_order(list(ways), r):
            queued, work = ways[way]
            thread_ms, all_ms = _run(values, queued, work)
            loading[way].append(thread_ms)
            total[way].append(all_ms)
    print(
        f"{args.values} values of {args.mb} MB, {args.rounds} interleaved rounds, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; one decode "
        f"{decode_ms:.2f} ms; ms per value, median (lowest-highest)"
    )
    print(f"{'way':<28} {'loading thread':>24} {'until stored (with decode)':>28}")
    for way in ways:
        print(f"{way:<28} {_span(loading[way]):>24} {_span(total[way]):>28}")


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


if __name__ == "__main__":
    main()
