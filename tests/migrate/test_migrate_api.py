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
from migrate_support import CALLS, make_registry, plan_for

from codedag.errors import SchemaError
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.guard import GuardSettings

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
        # and where workers start, and both fetches (where a data set's references are rebound)
        assert migrator.restore() == 5 and migrator.restore() == 0
        assert cv2.flip is originals["flip"] and np.clip is originals["clip"]
        assert user.flip is originals["flip"]
        stats = migrator.get_stats()
        assert stats["functions"]["cv2.flip"]["migrated"] == 2
        assert stats["functions"]["numpy.clip"]["migrated"] == 1
        assert stats["totals"]["fell_back"] == 0 and not stats["applied"]
    finally:
        del sys.modules["user_pipeline_mod"]


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


def test_consecutive_migrated_calls_reuse_device_values() -> None:
    from codedag.backends.device_values import ValueConverter

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


def test_the_run_time_check_switches_off_a_placement_that_loses_and_says_why() -> None:
    """A plan forced onto cv2 calls that lose through torch on this CPU: the guard (on by
    default) runs the first calls both ways, switches the placement off, and reports it."""
    import cv2
    import numpy as np

    image = np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)

    def blur_many() -> None:
        for _ in range(12):
            cv2.GaussianBlur(image, (5, 5), 0)

    plan = plan_for({f"{__name__}.blur_many#0/cv2.GaussianBlur#0": "cpu"})
    with PipelineMigrator.from_plan(plan) as migrator:
        blur_many()
        stats = migrator.get_stats()
    guard = stats["functions"]["cv2.GaussianBlur"]["guard"]
    assert guard["state"] == "switched_off", guard
    assert "cv2.GaussianBlur" in stats["guard"]["switched_off"]
    assert stats["guard"]["enabled"] and stats["guard"]["calls"] == 8
    assert guard["backend_ms_median"] > guard["original_ms_median"]
    with PipelineMigrator.from_plan(plan, guard=False) as migrator:
        blur_many()
        stats = migrator.get_stats()
    assert stats["guard"] == {"enabled": False}
    assert stats["functions"]["cv2.GaussianBlur"]["migrated"] == 12


def test_the_run_time_check_compares_librosa_calls_under_their_traced_names() -> None:
    """The tracer names librosa functions by their defining module; the check must use the
    tolerance of the public name, or it would switch off a backend that is within it."""
    pytest.importorskip("librosa")
    import librosa
    import numpy as np

    y = np.random.default_rng(0).random(22050).astype(np.float32)

    def mel() -> None:
        for _ in range(3):
            librosa.feature.melspectrogram(y=y, sr=22050, n_mels=32)

    name = "librosa.feature.spectral.melspectrogram"
    plan = plan_for({f"{__name__}.mel#0/{name}#0": "cpu"})
    with PipelineMigrator.from_plan(plan, guard=GuardSettings(calls=2)) as migrator:
        mel()
        stats = migrator.get_stats()
    guard = stats["functions"][name]["guard"]
    assert guard["mismatches"] == 0, guard


def test_a_plan_without_batched_chains_imports_no_batched_execution(tmp_path: Path) -> None:
    # batched execution's run-time brings the executor and every op backend: a plan that runs
    # no chain batched applies, runs and restores without importing it
    import subprocess

    plan = {**plan_for({}), "batched": {"mode": "auto", "device": None, "chains": []}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    script = f"""
import sys
from codedag.migrate.api import PipelineMigrator
migrator = PipelineMigrator.from_json({str(path)!r})
with migrator:
    assert not migrator.batched.active and migrator.batched.functions() == []
    migrator.batched.run_per_sample()
    stats = migrator.get_stats()
assert stats.batched.enabled is False, stats.batched
loaded = [m for m in ("codedag.migrate.batched.runtime", "codedag.backends.batched.executor")
          if m in sys.modules]
assert not loaded, loaded
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
