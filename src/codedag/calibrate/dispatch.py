"""The wrapper's own cost per call, measured in this process.

A patched function costs something on every call: deciding where the call goes and counting it
(migrated calls), or handing it to the original (calls the plan keeps on the CPU). Placement
charges these costs to the functions it patches, so they are measured here with the migrator's
real wrapper around a do-nothing function rather than assumed: the wrapped and the bare call, in
interleaved rounds of tight loops (:mod:`codedag.measure`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from codedag.calibrate.measurement import DispatchCost
from codedag.measure.pair import Budget, time_pair

_NAME = "codedag.calibrate.noop"


def _noop(x: object) -> object:
    return x


_ROUNDS = Budget(min_samples=5, max_samples=5, target_ns=0, warmup=1)
"""Five interleaved rounds of each loop after one untimed round."""


def _extra_per_call_ns(
    base: Callable[[Any], Any], wrapped: Callable[[Any], Any], arg: object, calls: int
) -> int:
    """What ``wrapped(arg)`` costs per call beyond ``base(arg)`` (ns, at least 0): each way runs
    ``calls`` times in a tight loop per sample, in interleaved rounds (:mod:`codedag.measure`);
    the difference of the medians."""

    def loop(fn: Callable[[Any], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                fn(arg)

        return run

    measured = time_pair(loop(base), loop(wrapped), budget=_ROUNDS)
    return max(0, -measured.comparison.saving_ns // calls)


@functools.cache
def measure_dispatch(device: str = "cpu") -> DispatchCost:
    """Measured wrapper costs: migrated dispatch (beyond the migrated path) and pass-through."""
    from codedag.backends.device_values import ValueConverter
    from codedag.backends.executor import Executor
    from codedag.backends.registry import OpSpec, Strategy
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
    return DispatchCost(
        migrated_ns=_extra_per_call_ns(direct, migrated.function, value, calls=500),
        passthrough_ns=_extra_per_call_ns(_noop, kept.function, value, calls=2000),
    )
