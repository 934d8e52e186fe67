"""The wrapper's own cost per call, measured in this process.

A patched function costs something on every call: deciding where the call goes and counting it
(migrated calls), or handing it to the original (calls the plan keeps on the CPU). Placement
charges these costs to the functions it patches, so they are measured here with the migrator's
real wrapper around a do-nothing function rather than assumed.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from codedag.calibrate.measurement import DispatchCost
from codedag.calibrate.timing import Timing

_NAME = "codedag.calibrate.noop"


def _noop(x: object) -> object:
    return x


def _best_per_call(fn: object, arg: object, calls: int = 2000, rounds: int = 5) -> float:
    """Median over rounds of the per-call time of ``fn(arg)`` in a tight loop (ns)."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(arg)  # type: ignore[operator]
        samples.append((time.perf_counter_ns() - t0) // calls)
    return float(Timing.of([int(s) for s in samples]).median_ns)


@functools.cache
def measure_dispatch(device: str = "cpu") -> DispatchCost:
    """Measured wrapper costs: migrated dispatch (beyond the migrated path) and pass-through."""
    from codedag.backends.executor import Executor
    from codedag.backends.registry import OpSpec, Strategy
    from codedag.backends.values import ValueConverter
    from codedag.migrate.wrapper import UniversalWrapper
    from codedag.plan.context import ContextMatcher

    spec = OpSpec(_NAME, Strategy.MOVE_ONLY, _noop)  # NumPy semantics: the default adapter
    converters = {device: ValueConverter(device)}
    value = np.zeros(4, np.float32)

    migrated = UniversalWrapper(
        spec, _noop, ContextMatcher(_NAME, [(f"{_NAME}#0", device)]), converters
    )
    executor = Executor(spec, _noop, converters)

    def direct(x: object) -> object:
        return executor.run((x,), {}, device)

    kept = UniversalWrapper(
        spec,
        _noop,
        ContextMatcher(_NAME, [(f"elsewhere#0/{_NAME}#0", device), (f"other#0/{_NAME}#0", None)]),
        converters,
    )
    via_wrapper = _best_per_call(migrated.function, value, calls=500)
    via_executor = _best_per_call(direct, value, calls=500)
    passed = _best_per_call(kept.function, value)
    plain = _best_per_call(_noop, value)
    return DispatchCost(
        migrated_ns=max(0, int(via_wrapper - via_executor)),
        passthrough_ns=max(0, int(passed - plain)),
    )
