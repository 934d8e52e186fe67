"""UniversalWrapper: placement per call, fallback, nesting, threads, pickling, deactivation."""

from __future__ import annotations

import logging
import multiprocessing
import pickle

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CALLS, boom, make_registry, plan_for, sin, wait_until

from codedag.migrate.api import PipelineMigrator

GET = "app.DS.__getitem__"


def _img(seed: int = 0, shape: tuple[int, ...] = (9, 11, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_a_failing_backend_falls_back_to_the_original(caplog: pytest.LogCaptureFixture) -> None:
    original = cv2.flip
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    migrator = PipelineMigrator.from_plan(
        plan, registry=make_registry(**{"cv2.flip": boom}), guard=False
    )
    img = _img(3)
    with caplog.at_level(logging.INFO, logger="codedag.migrate"), migrator:
        outs = [cv2.flip(img, code) for code in (0, 1, -1)]
    for code, out in zip((0, 1, -1), outs):
        np.testing.assert_array_equal(out, original(img, code))
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["fell_back"] == 3 and stats["migrated"] == 0
    assert stats["fallback_reasons"] == {"RuntimeError: injected failure": 3}
    warnings = [r for r in caplog.records if "running the original" in r.getMessage()]
    assert len(warnings) == 1  # logged once per function


def test_calls_the_plan_keeps_on_the_cpu_pass_through() -> None:
    # migrate the flip made directly from this test function, keep the one from a helper
    here = f"{__name__}.test_calls_the_plan_keeps_on_the_cpu_pass_through"
    helper = f"{__name__}._helper_flip"
    plan = plan_for(
        {f"{here}#0/cv2.flip#0": "cpu"},
        calls=[
            {"function": "cv2.flip", "context_keys": [f"{helper}#0/cv2.flip#0"], "migrate": False}
        ],
    )
    img = _img(5)
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        for _ in range(3):
            np.testing.assert_array_equal(cv2.flip(img, 1), img[:, ::-1])
            np.testing.assert_array_equal(_helper_flip(img), img[:, ::-1])
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["migrated"] == 3 and stats["passed_through"] == 3
    assert stats["match_levels"] == {"exact": 3}


def _helper_flip(img: np.ndarray) -> np.ndarray:
    return cv2.flip(img, 1)


def test_nested_calls_inside_a_backend_run_the_original() -> None:
    def flip_via_numpy(src: torch.Tensor, flipCode: int, dst: object = None) -> torch.Tensor:
        # a backend that (badly) calls a patched function: it must get the original
        np.clip(np.zeros(2, np.float32), 0, 1)
        return src.flip(2)

    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.clip#0": "cpu"})
    with PipelineMigrator.from_plan(
        plan, registry=make_registry(**{"cv2.flip": flip_via_numpy}), guard=False
    ) as migrator:
        cv2.flip(_img(), 1)
    stats = migrator.get_stats()["functions"]
    assert stats["numpy.clip"]["nested"] == 1 and stats["numpy.clip"]["migrated"] == 0


def test_concurrent_migrated_calls_are_correct_and_counted() -> None:
    import threading

    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    images = [_img(i, (20, 24, 3)) for i in range(4)]
    failures: list[str] = []

    def work(img: np.ndarray) -> None:
        for code in (0, 1, -1) * 20:
            if not np.array_equal(cv2.flip(img, code), np.flip(img, _axes(code))):
                failures.append("mismatch")

    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        threads = [threading.Thread(target=work, args=(img,)) for img in images]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failures
    assert migrator.get_stats()["functions"]["cv2.flip"]["migrated"] == 4 * 60


def _axes(code: int) -> tuple[int, ...]:
    return {0: (0,), 1: (1,), -1: (0, 1)}[code]


def _outer_flips(img: np.ndarray) -> list[np.ndarray]:
    return [_inner_flip(img) for _ in range(3)]


def _inner_flip(img: np.ndarray) -> np.ndarray:
    return cv2.flip(img, 1)


def test_outer_contexts_and_own_counters_decide() -> None:
    outer = f"{__name__}._outer_flips"
    twice = f"{__name__}._flip_twice"
    plan = plan_for(
        {"elsewhere.f#0/cv2.flip#0": "cpu", f"{twice}#0/cv2.flip#0": "cpu"},
        calls=[
            {
                "function": "cv2.flip",
                "context_keys": [f"{outer}#0/cv2.flip#0", f"{twice}#0/cv2.flip#1"],
                "migrate": False,
            }
        ],
    )
    img = _img(9)
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        for _ in range(2):  # the plan names the caller's caller: kept on the CPU (cached)
            for out in _outer_flips(img):
                np.testing.assert_array_equal(out, img[:, ::-1])
        for _ in range(4):  # first call of a frame migrates, the second does not
            first, second = _flip_twice(img)
            np.testing.assert_array_equal(first, img[:, ::-1])
            np.testing.assert_array_equal(second, img[:, ::-1])
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["passed_through"] == 6 + 4 and stats["migrated"] == 4
    assert stats["match_levels"] == {"exact": 4}


def _flip_twice(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return cv2.flip(img, 1), cv2.flip(img, 1)


def test_a_call_site_that_keeps_failing_stops_trying() -> None:
    from codedag.migrate.wrapper import GIVE_UP_AFTER

    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    img = _img(2)
    before = CALLS["boom"]
    with PipelineMigrator.from_plan(
        plan, registry=make_registry(**{"cv2.flip": boom}), guard=False
    ) as m:
        for _ in range(GIVE_UP_AFTER + 10):
            np.testing.assert_array_equal(cv2.flip(img, 1), img[:, ::-1])
    assert CALLS["boom"] - before == GIVE_UP_AFTER  # the backend is not tried any more
    stats = m.get_stats()["functions"]["cv2.flip"]
    assert stats["fell_back"] == GIVE_UP_AFTER and stats["passed_through"] == 10
    assert stats["given_up_call_sites"] == 1


def _via_helper(img: np.ndarray) -> np.ndarray:
    return cv2.flip(img, 1)


def _outer_migrated(img: np.ndarray) -> np.ndarray:
    return _via_helper(img)


def _outer_kept(img: np.ndarray) -> np.ndarray:
    return _via_helper(img)


def test_the_frame_that_decides_is_found_beyond_a_shared_helper() -> None:
    plan = plan_for(
        {f"{__name__}._outer_migrated#0/cv2.flip#0": "cpu"},
        calls=[
            {
                "function": "cv2.flip",
                "context_keys": [f"{__name__}._outer_kept#0/cv2.flip#0"],
                "migrate": False,
            }
        ],
    )
    img = _img(4)
    before = CALLS["flip"]
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        for _ in range(5):  # alternating outer frames through the same helper
            np.testing.assert_array_equal(_outer_migrated(img), img[:, ::-1])
            np.testing.assert_array_equal(_outer_kept(img), img[:, ::-1])
        wrapper = migrator._injector.wrappers["cv2.flip"]  # type: ignore[union-attr]
        (helper_paths,) = wrapper._trie.values()
        assert len(helper_paths) == 2  # one cached answer per outer frame, below the helper
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["migrated"] == 5 and stats["passed_through"] == 5
    assert CALLS["flip"] - before == 5


def _twice_via(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _via_helper(img), _via_helper(img)


def test_a_plan_naming_helper_and_outer_frames_decides_by_the_whole_path() -> None:
    helper = f"{__name__}._via_helper"
    plan = plan_for(
        {f"{__name__}._outer_migrated#0/{helper}#0/cv2.flip#0": "cpu"},
        calls=[
            {
                "function": "cv2.flip",
                "context_keys": [f"{__name__}._outer_kept#0/{helper}#0/cv2.flip#0"],
                "migrate": False,
            }
        ],
    )
    img = _img(5)
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        for _ in range(4):
            _outer_migrated(img)
            _outer_kept(img)
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["migrated"] == 4 and stats["passed_through"] == 4
    assert stats["match_levels"] == {"exact": 4}


def test_patched_functions_pickle_as_their_originals() -> None:
    originals = {"sin": np.sin, "flip": cv2.flip, "clip": np.clip}
    expected = {name: pickle.dumps(f) for name, f in originals.items()}
    plan = plan_for({f"{GET}#0/{n}#0": "cpu" for n in ("numpy.sin", "cv2.flip", "numpy.clip")})
    registry = make_registry(**{"numpy.sin": sin})
    with PipelineMigrator.from_plan(plan, registry=registry, guard=False):
        patched = {"sin": np.sin, "flip": cv2.flip, "clip": np.clip}
        for name, function in patched.items():
            assert function is not originals[name]
            assert pickle.dumps(function) == expected[name]
            assert pickle.loads(pickle.dumps(function)) is function
        held = (np.sin,)  # a tuple: the one kind of place restore cannot rebind
    assert pickle.loads(pickle.dumps(held[0])) is originals["sin"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_user_code_maps_patched_functions_over_a_real_pool(start: str) -> None:
    plan = plan_for({"multiprocessing.pool.mapstar#0/numpy.sin#0": "cpu"})
    values = [0.0, 0.5, 1.0, 2.0]
    registry = make_registry(**{"numpy.sin": sin})
    migrator = PipelineMigrator.from_plan(plan, registry=registry, guard=False)
    with migrator, multiprocessing.get_context(start).Pool(2) as pool:
        results = pool.map(np.sin, values, chunksize=1)
        arrays = pool.map(np.sin, [np.linspace(0, 1, 5, dtype=np.float32)])
        if start == "fork":  # forked workers run the patched np.sin and report their calls

            def counted() -> bool:
                row = migrator.get_stats()["functions"]["numpy.sin"]["in_workers"]
                return row["migrated"] + row["fell_back"] == 5

            wait_until(counted, "the pool workers' counts")
    assert results == [np.sin(v) for v in values]
    np.testing.assert_allclose(arrays[0], np.sin(np.linspace(0, 1, 5, dtype=np.float32)))
    if start == "fork":
        assert migrator.get_stats()["functions"]["numpy.sin"]["in_workers"]["migrated"] >= 1


def test_a_replacement_held_past_restore_forwards_without_counting() -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.sin#0": "cpu"})
    registry = make_registry(**{"numpy.sin": sin})
    with PipelineMigrator.from_plan(plan, registry=registry, guard=False) as migrator:
        held = (cv2.flip, np.sin)
        held[0](_img(), 1)
    before = migrator.get_stats()["functions"]
    flips = CALLS["flip"]
    np.testing.assert_array_equal(held[0](_img(), 0), _img()[::-1])
    assert held[1](np.float64(1.0)) == np.sin(1.0)
    assert migrator.get_stats()["functions"] == before and CALLS["flip"] == flips
