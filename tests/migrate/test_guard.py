"""The run-time guard: checked calls, decisions, their cost once decided, workers' decisions."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import sys
import types
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.backends.contract import Quirks
from codedag.backends.registry import Registry, default_registry, spec_from_backend
from codedag.migrate.guard import Guard, GuardSettings, GuardState
from codedag.migrate.injector import PatchInjector

LIB = "guardlib"
NAME = f"{LIB}.double"


class FakeTime:
    """A clock that only the timed functions move: each adds its declared cost."""

    def __init__(self, original_ns: int, backend_ns: int) -> None:
        self.now = 0
        self.original_ns = original_ns
        self.backend_ns = backend_ns
        self.order: list[str] = []
        self.original_calls = 0
        self.backend_calls = 0

    def clock(self) -> int:
        return self.now


@pytest.fixture
def timing(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTime]:
    """A library ``guardlib.double`` and its backend, both advancing a fake clock."""
    time = FakeTime(original_ns=1000, backend_ns=500)
    lib = types.ModuleType(LIB)

    def double(a: np.ndarray) -> np.ndarray:
        time.now += time.original_ns
        time.original_calls += 1
        time.order.append("original")
        return a * 2

    double.__module__ = LIB
    lib.double = double  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, LIB, lib)
    yield time


def _backend(time: FakeTime, wrong: bool = False) -> Any:
    def double(a: torch.Tensor) -> torch.Tensor:
        time.now += time.backend_ns
        time.backend_calls += 1
        time.order.append("backend")
        return a * 2 + (1 if wrong else 0)

    return double


def _injector(time: FakeTime, settings: GuardSettings | None, **spec_changes: Any) -> Any:
    registry = Registry()
    spec = spec_from_backend(NAME, _backend(time, spec_changes.pop("wrong", False)), "numpy")
    registry.register(dataclasses.replace(spec, **spec_changes))
    entries = {NAME: [(f"app.f#0/{NAME}#0", "cpu")]}
    return PatchInjector(entries, registry, {}, guard=settings, opted_in=[NAME])


def _call(n: int) -> list[np.ndarray]:
    lib = sys.modules[LIB]
    return [lib.double(np.arange(4, dtype=np.float32) + i) for i in range(n)]


@contextlib.contextmanager
def _applied(injector: PatchInjector) -> Iterator[PatchInjector]:
    injector.apply_all()
    try:
        yield injector
    finally:
        injector.restore_all()


def test_a_faster_matching_backend_is_kept(
    timing: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    settings = GuardSettings(calls=4, clock_ns=timing.clock)
    injector = _injector(timing, settings)
    with caplog.at_level(logging.INFO, logger="codedag.migrate.guard"), _applied(injector):
        outputs = _call(10)
        stats = injector.stats()[NAME]
    for i, out in enumerate(outputs):
        np.testing.assert_array_equal(out, (np.arange(4, dtype=np.float32) + i) * 2)
    assert stats["guard"] == {
        "state": "kept",
        "original_ms_median": 0.001,
        "backend_ms_median": 0.0005,
        "calls": 4,
        "mismatches": 0,
        "reason": stats["guard"]["reason"],
    }
    assert "0.0005 ms" in stats["guard"]["reason"] and "0.001 ms" in stats["guard"]["reason"]
    assert timing.original_calls == 4 and timing.backend_calls == 10  # checked 4, then backend
    assert stats["migrated"] == 10 and stats["fell_back"] == 0
    assert timing.order[:8] == ["backend", "original", "original", "backend"] * 2  # alternating
    decisions = [r for r in caplog.records if r.getMessage().startswith("guard:")]
    assert len(decisions) == 1 and "kept" in decisions[0].getMessage()


def test_a_slower_backend_is_switched_off_with_both_medians(timing: FakeTime) -> None:
    timing.backend_ns = 3000
    injector = _injector(timing, GuardSettings(calls=4, clock_ns=timing.clock))
    with _applied(injector):
        outputs = _call(9)
        stats = injector.stats()[NAME]
    for i, out in enumerate(outputs):
        np.testing.assert_array_equal(out, (np.arange(4, dtype=np.float32) + i) * 2)
    guard = stats["guard"]
    assert guard["state"] == "switched_off" and guard["calls"] == 4
    assert (guard["original_ms_median"], guard["backend_ms_median"]) == (0.001, 0.003)
    assert "does not beat the original" in guard["reason"] and "0.003 ms" in guard["reason"]
    assert timing.backend_calls == 4 and timing.original_calls == 9  # the original from then on
    assert stats["migrated"] == 4 and stats["passed_through"] == 5


@pytest.mark.parametrize(
    ("margin", "state"), [(0.0, "kept"), (0.05, "kept"), (0.2, "switched_off")]
)
def test_the_margin_the_backend_must_save(timing: FakeTime, margin: float, state: str) -> None:
    timing.backend_ns = 900
    injector = _injector(timing, GuardSettings(calls=2, margin=margin, clock_ns=timing.clock))
    with _applied(injector):
        _call(3)
        assert injector.stats()[NAME]["guard"]["state"] == state


def test_a_saving_within_the_noise_does_not_keep_the_backend() -> None:
    """A backend whose median is 5 % below the original's, with samples that spread from 1 to
    3 us on both sides: the saving is within its spread, so the original runs."""
    now = [0]
    guard = Guard("numpy.sin", GuardSettings(calls=6, clock_ns=lambda: now[0]))

    def costs(ns: int) -> Any:
        def call() -> float:
            now[0] += ns
            return 1.0

        return call

    for original_ns, backend_ns in zip((1000, 3000) * 3, (950, 2850) * 3):
        guard.run(costs(backend_ns), costs(original_ns), "cpu")
    stats = guard.stats()
    assert stats["state"] == "switched_off" and stats["calls"] == 6
    assert stats["backend_ms_median"] < stats["original_ms_median"]
    assert "beyond the spread" in stats["reason"] and "±" in stats["reason"]


def test_a_result_that_differs_switches_off_at_once(timing: FakeTime) -> None:
    injector = _injector(timing, GuardSettings(calls=8, clock_ns=timing.clock), wrong=True)
    with _applied(injector):
        outputs = _call(3)
        stats = injector.stats()[NAME]
    for i, out in enumerate(outputs):  # the original's results, never the backend's
        np.testing.assert_array_equal(out, (np.arange(4, dtype=np.float32) + i) * 2)
    guard = stats["guard"]
    assert guard["state"] == "switched_off" and (guard["calls"], guard["mismatches"]) == (1, 1)
    assert "4 of 4 values" in guard["reason"]
    assert timing.backend_calls == 1 and stats["migrated"] == 0
    assert stats["fell_back"] == 1 and any("differs" in r for r in stats["fallback_reasons"])


def test_once_decided_or_disabled_the_fast_path_has_no_guard(timing: FakeTime) -> None:
    for settings in (GuardSettings(calls=1, clock_ns=timing.clock), None):
        injector = _injector(timing, settings)
        with _applied(injector):
            _call(3)
            wrapper = injector.wrappers[NAME]
            assert wrapper._route.slow is False  # one attribute test per call, nothing else
            expected = "kept" if settings else "disabled"
            assert wrapper.stats()["guard"]["state"] == expected


def test_functions_that_write_their_arguments_are_not_run_twice(timing: FakeTime) -> None:
    settings = GuardSettings(calls=4, clock_ns=timing.clock)
    injector = _injector(timing, settings, quirks=Quirks(inplace=(0,)))
    with _applied(injector):
        _call(2)
        guard = injector.stats()[NAME]["guard"]
    assert guard["state"] == "disabled" and "in place" in guard["reason"]
    assert timing.original_calls == 0


def test_functions_that_draw_random_numbers_are_not_run_twice(timing: FakeTime) -> None:
    settings = GuardSettings(calls=4, clock_ns=timing.clock)
    injector = _injector(timing, settings, quirks=Quirks(random=True))
    with _applied(injector):
        _call(3)
        guard = injector.stats()[NAME]["guard"]
    assert guard["state"] == "disabled" and "random numbers" in guard["reason"]
    assert timing.original_calls == 0


def test_a_placed_numpy_draw_leaves_numpy_s_stream_alone_with_the_guard_on() -> None:
    """A draw placed on purpose (``--only``) runs once: through its backend (which takes one
    seed from NumPy's stream); the guard never runs the original too, which would advance
    NumPy's generator again and change every later draw."""
    name = "numpy.random.uniform"
    entries = {name: [(f"app.f#0/{name}#0", "cpu")]}
    injector = PatchInjector(
        entries, default_registry(), {}, guard=GuardSettings(calls=4), opted_in=[name]
    )
    np.random.seed(7)
    with _applied(injector):
        for _ in range(6):
            np.random.uniform(0.0, 1.0, size=8)
        after = np.random.random(3)
    np.random.seed(7)
    for _ in range(6):  # what the backend takes from NumPy's stream: one seed per call
        np.random.randint(0, 2**63 - 1, dtype=np.int64)
    assert np.array_equal(after, np.random.random(3))
    stats = injector.stats()[name]
    assert stats["migrated"] == 6 and stats["guard"]["state"] == "disabled"
    assert injector.kept_on_cpu == {}


@pytest.mark.parametrize("name", ["numpy.random.uniform", "numpy.random.Generator.normal"])
def test_a_draw_a_plan_places_without_opting_in_runs_with_numpy(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An old or hand-written plan placing a draw: NumPy draws it, NumPy's stream is the one
    without the plan, and the apply says so in one warning."""
    from codedag.migrate.api import PipelineMigrator

    plan = {
        "context_device_map": {f"app.f#0/{name}#0": "cpu"},
        "calls": [{"function": name, "migrate": True, "context_keys": [f"app.f#0/{name}#0"]}],
    }
    np.random.seed(7)
    expected = [np.random.uniform(0.0, 1.0, size=8) for _ in range(3)]
    np.random.seed(7)
    migrator = PipelineMigrator.from_plan(plan, guard=GuardSettings(calls=4))
    with caplog.at_level(logging.WARNING, logger="codedag"), migrator:
        drawn = [np.random.uniform(0.0, 1.0, size=8) for _ in range(3)]
        assert name not in migrator.patched_functions()
    assert all(np.array_equal(a, b) for a, b in zip(drawn, expected, strict=True))
    lines = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(lines) == 1 and "runs with its library" in lines[0], lines
    assert "would change the data" in lines[0]
    stats = migrator.get_stats()
    assert name not in stats["functions"] and "runs with its library" in stats["skipped"][name]


def test_the_injector_keeps_a_draw_on_the_cpu_in_its_own_state() -> None:
    name = "numpy.random.rand"
    entries = {name: [(f"app.f#0/{name}#0", "cpu")]}
    injector = PatchInjector(entries, default_registry(), {})
    assert injector.check() == []
    assert list(injector.kept_on_cpu) == [name] and "moving it" in injector.kept_on_cpu[name]
    assert PatchInjector(entries, default_registry(), {}, opted_in=[name]).check() == [name]


def test_backend_errors_return_the_original_and_original_errors_propagate() -> None:
    guard = Guard("numpy.clip", GuardSettings(calls=2))
    checked = guard.run(lambda: 1 / 0, lambda: np.float64(3.0), "cpu")
    assert checked.result == 3.0 and not checked.from_backend
    assert isinstance(checked.backend_error, ZeroDivisionError)
    assert guard.calls == 0 and guard.state is GuardState.CHECKING  # nothing was compared
    with pytest.raises(ValueError, match="rejected"):
        guard.run(lambda: 1.0, lambda: (_ for _ in ()).throw(ValueError("rejected")), "cpu")


def test_a_cuda_backend_is_timed_between_synchronizations() -> None:
    events: list[str] = []
    ticks = iter(range(0, 10**9, 10))

    def clock() -> int:
        events.append("clock")
        return next(ticks)

    settings = GuardSettings(calls=4, clock_ns=clock, synchronize=lambda d: events.append(d))
    guard = Guard("numpy.sin", settings)
    guard.run(lambda: events.append("backend") or 1.0, lambda: 1.0, "cuda:1")
    assert events[:5] == ["cuda:1", "clock", "backend", "cuda:1", "clock"]
    events.clear()
    guard.run(lambda: events.append("backend") or 1.0, lambda: 1.0, "cpu")
    assert "cuda:1" not in events  # no synchronization on the CPU


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="calls"):
        GuardSettings(calls=0)
    with pytest.raises(ValueError, match="margin"):
        GuardSettings(margin=1.0)


# -- real cv2 functions against the torch backends, on the CPU ---------------------------------
def blur_and_convert(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pipeline step: a 5x5 Gaussian blur and a BGR->HSV conversion of a 480x640 image."""
    return cv2.GaussianBlur(image, (5, 5), 0), cv2.cvtColor(image, cv2.COLOR_BGR2HSV)


@pytest.mark.timeout(300)
def test_torch_backends_that_lose_to_cv2_on_the_cpu_are_switched_off() -> None:
    image = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    want = (cv2.GaussianBlur(image, (5, 5), 0), cv2.cvtColor(image, cv2.COLOR_BGR2HSV))
    caller = f"{__name__}.blur_and_convert"
    entries = {
        name: [(f"{caller}#0/{name}#0", "cpu")] for name in ("cv2.GaussianBlur", "cv2.cvtColor")
    }
    injector = PatchInjector(entries, default_registry(), {}, guard=GuardSettings(calls=4))
    injector.apply_all()
    try:
        outputs = [blur_and_convert(image) for _ in range(6)]
        stats = injector.stats()
    finally:
        injector.restore_all()
    for blurred, hsv in outputs:
        np.testing.assert_array_equal(blurred, want[0])
        np.testing.assert_array_equal(hsv, want[1])
    for name in ("cv2.GaussianBlur", "cv2.cvtColor"):
        guard = stats[name]["guard"]
        assert guard["state"] == "switched_off", (name, guard)
        assert guard["mismatches"] == 0 and "does not beat" in guard["reason"]
        assert guard["backend_ms_median"] > guard["original_ms_median"]
        assert stats[name]["passed_through"] == 2  # calls 5 and 6 ran cv2 only


# -- decisions made in forked DataLoader workers reach the parent --------------------------------
class DoublingDataset(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.from_numpy(sys.modules[LIB].double(np.full(3, index, np.float32)))


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_decisions_in_forked_workers_reach_the_parent(timing: FakeTime) -> None:
    get = f"{__name__}.DoublingDataset.__getitem__"
    registry = Registry()
    registry.register(spec_from_backend(NAME, _backend(timing), "numpy"))
    entries = {NAME: [(f"{get}#0/{NAME}#0", "cpu")]}
    injector = PatchInjector(entries, registry, {}, guard=GuardSettings(3, clock_ns=timing.clock))
    loader = DataLoader(
        DoublingDataset(),
        batch_size=4,
        num_workers=2,
        multiprocessing_context=multiprocessing.get_context("fork"),
    )
    injector.apply_all()
    try:
        batches = torch.cat(list(loader))
        stats = injector.stats()[NAME]
    finally:
        injector.restore_all()
    torch.testing.assert_close(batches, torch.arange(16.0).repeat_interleave(3).view(16, 3) * 2)
    guard = stats["guard"]
    assert [w["state"] for w in guard["workers"]] == ["kept", "kept"]
    assert all(w["calls"] == 3 and w["backend_ms_median"] == 0.0005 for w in guard["workers"])
    assert guard["state"] == "kept" and guard["calls"] == 6  # the parent made no call itself
    assert stats["in_workers"]["migrated"] == 16 and stats["migrated"] == 16
    assert timing.original_calls == 0  # the parent's copy of the clock never moved


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_of_the_next_epoch_start_with_the_decision_of_the_last(timing: FakeTime) -> None:
    """Without persistent workers every epoch forks new workers: they take over the decision the
    first epoch's workers reached instead of running the first calls both ways again."""
    get = f"{__name__}.DoublingDataset.__getitem__"
    registry = Registry()
    registry.register(spec_from_backend(NAME, _backend(timing), "numpy"))
    entries = {NAME: [(f"{get}#0/{NAME}#0", "cpu")]}
    injector = PatchInjector(entries, registry, {}, guard=GuardSettings(3, clock_ns=timing.clock))
    loader = DataLoader(
        DoublingDataset(), batch_size=4, num_workers=2,
        multiprocessing_context=multiprocessing.get_context("fork"),
    )  # fmt: skip
    injector.apply_all()
    try:
        first = torch.cat(list(loader))
        checked_first = injector.stats()[NAME]["guard"]["calls"]
        second = torch.cat(list(loader))
        stats = injector.stats()[NAME]
    finally:
        injector.restore_all()
    torch.testing.assert_close(first, second)
    assert checked_first == 6  # 3 checked calls in each of the first epoch's two workers
    workers = stats["guard"]["workers"]
    later = [w for w in workers if w["calls"] == 0]
    assert len(later) == 2 and all(w["state"] == "kept" for w in later), workers
    assert stats["migrated"] == 32


def _call_in_child(result: Any) -> None:
    result.put([float(v) for v in sys.modules[LIB].double(np.arange(2, dtype=np.float32))])
    result.put(sys.modules[LIB].double.__codedag_wrapper__.stats()["guard"]["state"])


@pytest.mark.timeout(60)
def test_a_forked_child_never_waits_on_locks_its_parent_held(timing: FakeTime) -> None:
    injector = _injector(timing, GuardSettings(calls=1, clock_ns=timing.clock))
    context = multiprocessing.get_context("fork")
    with _applied(injector):
        wrapper = injector.wrappers[NAME]
        results = context.Queue()
        with wrapper._lock, wrapper.guard._lock:  # held by the parent while it forks
            child = context.Process(target=_call_in_child, args=(results,))
            child.start()
            child.join(30)
        assert child.exitcode == 0
        assert results.get(timeout=5) == [0.0, 2.0]
        assert results.get(timeout=5) == "kept"  # the child checked and decided on its own
        assert wrapper.guard.state is GuardState.CHECKING  # the parent has not been called


def test_many_placed_draws_are_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    names = [f"numpy.random.Generator.d{i}\x1b[2J" for i in range(300)]
    entries = {n: [(f"app.f#0/{n}#0", "cpu")] for n in names}
    with caplog.at_level(logging.WARNING, logger="codedag"):
        assert PatchInjector(entries, default_registry(), {}).check() == []
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("300 random draws run with their library")
    assert "\x1b" not in lines[0] and "292 more" in lines[0]


def test_the_guard_summary_lists_a_kept_draw_and_an_opted_in_one_moves() -> None:
    from codedag.migrate.api import PipelineMigrator

    name = "numpy.random.uniform"
    plan: dict[str, Any] = {
        "context_device_map": {f"app.f#0/{name}#0": "cpu"},
        "calls": [{"function": name, "migrate": True, "context_keys": [f"app.f#0/{name}#0"]}],
    }
    with PipelineMigrator.from_plan(plan) as kept:
        assert name not in kept.patched_functions()
    assert "would change the data" in kept.get_stats()["guard"]["kept_on_cpu"][name]
    plan["placement"] = {"only": [name]}  # the user's --only opts the draw in
    with PipelineMigrator.from_plan(plan) as moved:
        assert name in moved.patched_functions()
    assert moved.get_stats()["guard"]["kept_on_cpu"] == {}
