"""Cost of the migration wrapper itself, side by side in one run.

Rows (median ns per call over repeated timing loops):

* ``unpatched``: the original function;
* ``pass-through (cached caller)``: patched, the plan keeps this call site on the CPU; the
  placement is cached per caller code object (the usual case for mixed placements);
* ``pass-through (stack cached)``: patched, the plan names only an outer frame of this call site:
  the enclosing frames are walked on every call and the placement is cached per stack;
* ``migrated dispatch``: a migrated call of an identity backend on a one-element array on the
  CPU device minus a direct call of that backend on a tensor: the wrapper's decision, value
  conversion in and out and bookkeeping, excluding the op itself.

Usage: ``python benchmarks/migrate_overhead.py [--loops N] [--repeats R] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.registry import Registry, spec_from_backend

MODULE = "codedag_bench_lib"


def _library() -> types.ModuleType:
    lib = types.ModuleType(MODULE)

    def op(a: Any, b: Any = None) -> Any:
        return a

    op.__module__ = MODULE
    lib.op = op
    sys.modules[MODULE] = lib
    return lib


def _identity_backend(a: torch.Tensor, b: Any = None) -> torch.Tensor:
    return a


def call_loop(fn: Callable[[Any], Any], arg: Any, loops: int) -> None:
    """The call site every case times (plan keys name this function as the caller)."""
    for _ in range(loops):
        fn(arg)


def _median_ns(fn: Callable[[Any], Any], arg: Any, loops: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        call_loop(fn, arg, loops)
        samples.append((time.perf_counter_ns() - start) / loops)
    return statistics.median(samples)


def _plan(mapping: dict[str, Any], keep: list[str]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "context_device_map": mapping,
        "calls": [{"function": f"{MODULE}.op", "context_keys": keep, "migrate": False}],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lib = _library()
    registry = Registry()
    registry.register(spec_from_backend(f"{MODULE}.op", _identity_backend, "numpy"))
    tiny = np.zeros(1, dtype=np.float32)
    here = f"{__name__}.{call_loop.__qualname__}"
    unpatched = _median_ns(lib.op, tiny, args.loops, args.repeats)
    results: dict[str, float] = {"unpatched": unpatched}

    # The plan migrates op in another context and keeps it on the CPU when called from here.
    plan = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{here}#0/{MODULE}.op#0"])
    with PipelineMigrator.from_plan(plan, registry=registry):
        results["pass-through (cached caller)"] = _median_ns(lib.op, tiny, args.loops, args.repeats)
    # The plan names only the caller's caller: the enclosing frames are matched on every call.
    outer = f"{__name__}.{_median_ns.__qualname__}"
    plan = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{outer}#0/{MODULE}.op#0"])
    with PipelineMigrator.from_plan(plan, registry=registry):
        results["pass-through (stack cached)"] = _median_ns(lib.op, tiny, args.loops, args.repeats)
    plan = _plan({f"{here}#0/{MODULE}.op#0": "cpu"}, [])
    tensor = torch.from_numpy(tiny)
    direct = _median_ns(_identity_backend, tensor, args.loops, args.repeats)
    with PipelineMigrator.from_plan(plan, registry=registry) as migrator:
        migrated = _median_ns(lib.op, tiny, args.loops // 4, args.repeats)
        assert migrator.get_stats()["functions"][f"{MODULE}.op"]["migrated"] > 0
    results["migrated dispatch"] = migrated - direct
    del sys.modules[MODULE]

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'case':34s} {'ns/call':>10s} {'added ns':>10s} {'x unpatched':>12s}")
    for name, value in results.items():
        if name == "migrated dispatch":
            print(f"{name:34s} {value:10.0f} {'':>10s} {'':>12s}")
            continue
        added = value - unpatched
        print(f"{name:34s} {value:10.0f} {added:10.0f} {value / unpatched:12.2f}")
    print(f"(backend called directly: {direct:.0f} ns; migrated call total: {migrated:.0f} ns)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
