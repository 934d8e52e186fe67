"""The whole-plan benchmark's CPU accounting counts DataLoader workers that outlive an epoch."""

from __future__ import annotations

import importlib.util
import multiprocessing
import sys
import time
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("whole_plan", BENCH / "whole_plan.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def _burn_then_wait(ready: object, done: object) -> None:
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
    ready.set()  # type: ignore[attr-defined]
    done.wait(30)  # type: ignore[attr-defined]


def test_cpu_of_a_child_still_running_is_counted() -> None:
    whole_plan = _load()
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    before = whole_plan._cpu_s()
    child = context.Process(target=_burn_then_wait, args=(ready, done))
    child.start()
    try:
        assert ready.wait(30)
        alive = whole_plan._cpu_s() - before  # the child has not ended: /proc counts it
    finally:
        done.set()
        child.join(30)
    ended = whole_plan._cpu_s() - before  # reaped: its CPU moved to RUSAGE_CHILDREN
    assert alive >= 0.3
    assert abs(ended - alive) < 0.2
