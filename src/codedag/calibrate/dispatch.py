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

    measured = time_pair(_loop(base, arg, calls), _loop(wrapped, arg, calls), budget=_ROUNDS)
    return max(0, -measured.comparison.saving_ns // calls)


def _loop(fn: Callable[[Any], Any], arg: object, calls: int) -> Callable[[], None]:
    """``fn(arg)`` ``calls`` times in a tight loop (the caller of the wrappers measured)."""

    def run() -> None:
        for _ in range(calls):
            fn(arg)

    return run


def _loop_context() -> str:
    """The context segment of the loop's frame (:func:`codedag.plan.context.frame_name`)."""
    code = _loop(_noop, None, 0).__code__
    return f"{__name__}.{getattr(code, 'co_qualname', code.co_name)}#0"


@functools.cache
def measure_dispatch(device: str = "cpu") -> DispatchCost:
    """Measured wrapper costs: migrated dispatch (beyond the migrated path) and pass-through."""
    value = np.zeros(4, np.float32)
    direct, migrated, kept = dispatch_ways(device)
    return DispatchCost(
        migrated_ns=_extra_per_call_ns(direct, migrated, value, calls=500),
        passthrough_ns=_extra_per_call_ns(_noop, kept, value, calls=2000),
    )


def dispatch_ways(
    device: str,
) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any]]:
    """A do-nothing function three ways: run by its backend on ``device`` directly, through the
    migrator's wrapper placing the call there, and through a wrapper whose plan keeps the
    calls of the measuring loop on the CPU but places the function's calls from elsewhere (it
    hands the loop's calls to the original)."""
    from codedag.backends.device_values import ValueConverter
    from codedag.backends.executor import Executor
    from codedag.backends.registry import OpSpec, Strategy
    from codedag.migrate.wrapper import UniversalWrapper
    from codedag.plan.context import ContextMatcher

    spec = OpSpec(_NAME, Strategy.MOVE_ONLY, _noop)  # NumPy semantics: the default adapter
    converters = {device: ValueConverter(device)}
    migrated = UniversalWrapper(
        spec, _noop, ContextMatcher(_NAME, [(f"{_NAME}#0", device)]), converters
    )
    executor = Executor(spec, _noop, converters)

    def direct(x: object) -> object:
        return executor.run((x,), {}, device)

    # the plan keeps the loop's calls and places those of another caller: the wrapper finds
    # the loop's placement once and keeps it for its code, as for any caller the plan names
    keys = [(f"{_loop_context()}/{_NAME}#0", None), (f"elsewhere#0/{_NAME}#0", device)]
    kept = UniversalWrapper(spec, _noop, ContextMatcher(_NAME, keys), converters)
    return direct, migrated.function, kept.function
