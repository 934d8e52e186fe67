"""PipelineMigrator on hand-built plans: apply/restore, fallback, refusal, unknown names, devices."""

from __future__ import annotations

import json
import logging
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CALLS, boom, make_registry, plan_for

from codedag.errors import MigrationError, SchemaError
from codedag.migrate.api import PipelineMigrator

GET = "app.DS.__getitem__"


def _img(seed: int = 0, shape: tuple[int, ...] = (9, 11, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_apply_migrates_and_restore_puts_back_the_exact_originals() -> None:
    originals = {"flip": cv2.flip, "add": cv2.add, "clip": np.clip}
    user = types.ModuleType("user_pipeline_mod")
    user.flip = cv2.flip  # from cv2 import flip
    sys.modules["user_pipeline_mod"] = user
    try:
        plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.clip#0": "cpu"})
        migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
        assert migrator.apply() == {"patched": 2, "failed": 0, "skipped": 0}
        assert migrator.is_applied() and migrator.apply() == {
            "patched": 0,
            "failed": 0,
            "skipped": 0,
        }
        assert cv2.flip is not originals["flip"] and user.flip is cv2.flip
        assert cv2.add is originals["add"]  # not in the plan: untouched
        before = CALLS["flip"]
        img = _img()
        out = cv2.flip(img, 1)
        assert CALLS["flip"] == before + 1
        assert type(out) is np.ndarray and out.dtype == np.uint8 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, originals["flip"](img, 1))
        np.testing.assert_array_equal(user.flip(img, -1), originals["flip"](img, -1))
        x = np.linspace(-1, 2, 50, dtype=np.float32).reshape(5, 10)
        clipped = np.clip(x, 0.0, 1.0)
        assert clipped.dtype == np.float32
        np.testing.assert_array_equal(clipped, originals["clip"](x, 0.0, 1.0))
        assert migrator.restore() == 2 and migrator.restore() == 0
        assert cv2.flip is originals["flip"] and np.clip is originals["clip"]
        assert user.flip is originals["flip"]
        stats = migrator.get_stats()
        assert stats["functions"]["cv2.flip"]["migrated"] == 2
        assert stats["functions"]["numpy.clip"]["migrated"] == 1
        assert stats["totals"]["fell_back"] == 0 and not stats["applied"]
    finally:
        del sys.modules["user_pipeline_mod"]


def test_a_failing_backend_falls_back_to_the_original(caplog: pytest.LogCaptureFixture) -> None:
    original = cv2.flip
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry(**{"cv2.flip": boom}))
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


def test_unsupported_arguments_fall_back() -> None:
    plan = plan_for({f"{GET}#0/numpy.clip#0": "cpu", f"{GET}#0/cv2.flip#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=make_registry()) as migrator:
        ints = np.arange(10)
        np.testing.assert_array_equal(np.clip(ints, 2, 5), np.minimum(np.maximum(ints, 2), 5))
        out = np.empty((4,), np.float32)
        np.clip(np.ones(4, np.float32) * 3, 0, 1, out=out)  # writes into a user buffer
        np.testing.assert_array_equal(out, np.ones(4, np.float32))
        dst = np.empty((9, 11, 3), np.uint8)
        cv2.flip(_img(), 0, dst)
    reasons = migrator.get_stats()["functions"]["numpy.clip"]["fallback_reasons"]
    assert any("floats only" in r for r in reasons)
    assert any("out=" in r for r in reasons)


def test_plan_naming_a_non_migratable_function_is_refused() -> None:
    original = cv2.flip
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/os.system#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with pytest.raises(MigrationError, match=r"os\.system"):
        migrator.apply()
    assert cv2.flip is original and not migrator.is_applied()


def test_unknown_names_warn_and_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/mylib.fancy_op#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with caplog.at_level(logging.WARNING, logger="codedag.migrate"):
        counts = migrator.apply()
    try:
        assert counts == {"patched": 1, "failed": 0, "skipped": 1}
        assert "mylib.fancy_op" in caplog.text
        assert migrator.get_stats()["skipped"] == {
            "mylib.fancy_op": "not in the registry of migratable functions"
        }
    finally:
        migrator.restore()


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        ([1, 2], "JSON object"),
        ({"context_device_map": "cuda"}, "context_device_map"),
        ({"context_device_map": {"a#0/cv2.flip#0": 3}}, "context_device_map"),
        ({"context_device_map": {"a#0/cv2.flip#0": "cuda:-1"}}, "cuda:-1"),
        ({"schema_version": -1, "context_device_map": {}}, "positive integer"),
        ({"schema_version": 99, "context_device_map": {}}, "schema_version 99"),
        ({"context_device_map": {}, "calls": [{"context_keys": "x", "migrate": 1}]}, "calls"),
    ],
)
def test_malformed_plans_are_one_schema_error(plan: object, match: str) -> None:
    with pytest.raises(SchemaError, match=match):
        PipelineMigrator.from_plan(plan)  # type: ignore[arg-type]


def test_from_json_and_missing_or_broken_files(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_for({f"{GET}#0/cv2.flip#0": "cpu"})))
    migrator = PipelineMigrator.from_json(path, registry=make_registry())
    assert migrator.plan.migrated_functions == ["cv2.flip"]
    with pytest.raises(SchemaError, match="cannot read"):
        PipelineMigrator.from_json(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SchemaError, match="not JSON"):
        PipelineMigrator.from_json(tmp_path / "bad.json")


def test_missing_plan_device_maps_to_the_default(caplog: pytest.LogCaptureFixture) -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cuda:7"})
    with caplog.at_level(logging.WARNING, logger="codedag.migrate"):
        migrator = PipelineMigrator.from_plan(plan, default_device="cpu", registry=make_registry())
    if not torch.cuda.is_available():
        assert migrator.device_map == {"cuda:7": "cpu"}
        assert "does not exist here" in caplog.text
    with migrator:
        cv2.flip(_img(), 1)
    assert migrator.get_stats()["functions"]["cv2.flip"]["migrated"] == 1


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
    with PipelineMigrator.from_plan(plan, registry=make_registry()) as migrator:
        for _ in range(3):
            np.testing.assert_array_equal(cv2.flip(img, 1), img[:, ::-1])
            np.testing.assert_array_equal(_helper_flip(img), img[:, ::-1])
    stats = migrator.get_stats()["functions"]["cv2.flip"]
    assert stats["migrated"] == 3 and stats["passed_through"] == 3
    assert stats["match_levels"] == {"exact": 3}


def _helper_flip(img: np.ndarray) -> np.ndarray:
    return cv2.flip(img, 1)


def test_consecutive_migrated_calls_reuse_device_values() -> None:
    from codedag.migrate.values import ValueConverter

    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/cv2.add#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    migrator._converters["cpu"] = ValueConverter("cpu", zero_copy=False)  # a CUDA-like path
    img = _img(7)
    with migrator:
        flipped = cv2.flip(img, 0)
        summed = cv2.add(flipped, flipped)  # reuses flip's device result: no transfer
        flipped[0, 0, 0] = 0  # the user changes the array: the next call must see it
        summed2 = cv2.add(flipped, img)
    ref = cv2.flip(img, 0)
    np.testing.assert_array_equal(summed, cv2.add(ref, ref))
    ref[0, 0, 0] = 0
    np.testing.assert_array_equal(summed2, cv2.add(ref, img))
    cache = migrator.get_stats()["value_cache"]
    assert cache["hits"] >= 2 and cache["stale"] == 1


def test_nested_calls_inside_a_backend_run_the_original() -> None:
    def flip_via_numpy(src: torch.Tensor, flipCode: int, dst: object = None) -> torch.Tensor:
        # a backend that (badly) calls a patched function: it must get the original
        np.clip(np.zeros(2, np.float32), 0, 1)
        return src.flip(2)

    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.clip#0": "cpu"})
    with PipelineMigrator.from_plan(
        plan, registry=make_registry(**{"cv2.flip": flip_via_numpy})
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

    with PipelineMigrator.from_plan(plan, registry=make_registry()) as migrator:
        threads = [threading.Thread(target=work, args=(img,)) for img in images]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failures
    assert migrator.get_stats()["functions"]["cv2.flip"]["migrated"] == 4 * 60


def _axes(code: int) -> tuple[int, ...]:
    return {0: (0,), 1: (1,), -1: (0, 1)}[code]


def test_a_failure_while_applying_leaves_nothing_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    from codedag.migrate import injector as injector_module

    original_flip, original_clip = cv2.flip, np.clip
    calls = {"n": 0}
    real = injector_module.alias_paths

    def failing(name: str, raw: object, registered: set[str]) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom while patching")
        return real(name, raw, registered)

    monkeypatch.setattr(injector_module, "alias_paths", failing)
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.clip#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with pytest.raises(RuntimeError, match="boom"):
        migrator.apply()
    assert cv2.flip is original_flip and np.clip is original_clip
    assert not migrator.is_applied()


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
    with PipelineMigrator.from_plan(plan, registry=make_registry()) as migrator:
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
    with PipelineMigrator.from_plan(plan, registry=make_registry(**{"cv2.flip": boom})) as m:
        for _ in range(GIVE_UP_AFTER + 10):
            np.testing.assert_array_equal(cv2.flip(img, 1), img[:, ::-1])
    assert CALLS["boom"] - before == GIVE_UP_AFTER  # the backend is not tried any more
    stats = m.get_stats()["functions"]["cv2.flip"]
    assert stats["fell_back"] == GIVE_UP_AFTER and stats["passed_through"] == 10
    assert stats["given_up_call_sites"] == 1


def test_torch_functions_move_only_and_come_back_on_the_callers_device() -> None:
    import torch.nn.functional as F

    x = torch.rand(1, 3, 20, 24)
    signal = torch.rand(2048)
    window = torch.hann_window(256)
    want_resized = F.interpolate(x, size=(10, 12), mode="bilinear", align_corners=False)
    want_spec = torch.stft(signal, 256, window=window, return_complex=True)
    plan = plan_for(
        {
            f"{GET}#0/torch.nn.functional.interpolate#0": "cpu",
            f"{GET}#0/torch.functional.stft#0": "cpu",  # the canonical name of torch.stft
        }
    )
    with PipelineMigrator.from_plan(plan) as migrator:
        resized = F.interpolate(x, size=(10, 12), mode="bilinear", align_corners=False)
        spec = torch.stft(signal, 256, window=window, return_complex=True)  # an alias
    assert resized.device == x.device and spec.device == signal.device
    torch.testing.assert_close(resized, want_resized)
    torch.testing.assert_close(spec, want_spec)
    stats = migrator.get_stats()["functions"]
    assert stats["torch.nn.functional.interpolate"]["strategy"] == "MoveOnly"
    assert stats["torch.nn.functional.interpolate"]["migrated"] == 1
    assert stats["torch.functional.stft"]["migrated"] == 1
