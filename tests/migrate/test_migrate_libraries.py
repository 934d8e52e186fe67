"""The library backends through the migrator: what user code gets back is what the library
returns (type, dtype, shape, layout, scalar kinds), with values within the tolerance table."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from migrate_support import plan_for

from codedag.backends.names import canonical_name
from codedag.backends.tolerances import tolerance_for
from codedag.migrate.api import PipelineMigrator

librosa = pytest.importorskip("librosa")


def _close(name: str, got: Any, want: Any) -> None:
    assert type(got) is type(want), (name, type(got), type(want))
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _close(name, g, w)
        return
    if not isinstance(want, np.ndarray):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), name
        return
    assert got.dtype == want.dtype and got.shape == want.shape, name
    assert got.flags.c_contiguous == want.flags.c_contiguous, (name, "C order")
    assert got.flags.f_contiguous == want.flags.f_contiguous, (name, "F order")
    tol = tolerance_for(name)
    diff = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    bad = diff > tol.allowed(want.astype(np.complex128))
    assert bad.mean() <= tol.max_mismatch_frac, (name, float(diff.max()))
    if bad.any():
        assert float(diff[bad].max()) <= tol.mismatch_atol, (name, float(diff.max()))


def _cases() -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    y = (0.3 * rng.standard_normal(8000)).astype(np.float32)
    spec = np.abs(librosa.stft(y, n_fft=512)) ** 2
    return [
        ("cv2.resize", cv2.resize, (img, (40, 30)), {"interpolation": cv2.INTER_LINEAR}),
        ("cv2.cvtColor", cv2.cvtColor, (img, cv2.COLOR_BGR2GRAY), {}),
        ("cv2.GaussianBlur", cv2.GaussianBlur, (img, (5, 5), 1.2), {}),
        ("cv2.threshold", cv2.threshold, (img[..., 0], 100, 255, cv2.THRESH_BINARY), {}),
        ("numpy.mean", np.mean, (img.astype(np.float32),), {"axis": (0, 1)}),
        ("numpy.mean", np.mean, (img.astype(np.float64),), {}),
        ("librosa.stft", librosa.stft, (y,), {"n_fft": 512}),
        ("librosa.feature.melspectrogram", librosa.feature.melspectrogram, (), {"y": y}),
        ("librosa.power_to_db", librosa.power_to_db, (spec,), {}),
    ]


def test_backends_through_the_migrator_return_what_the_library_returns() -> None:
    cases = _cases()
    expected = [fn(*args, **kwargs) for _name, fn, args, kwargs in cases]
    here = f"{__name__}.test_backends_through_the_migrator_return_what_the_library_returns"
    names = {name: canonical_name(fn) for name, fn, _a, _k in cases}
    plan = plan_for({f"{here}#0/{canonical}#0": "cpu" for canonical in names.values()})
    migrator = PipelineMigrator.from_plan(plan, guard=False)
    assert migrator.apply()["patched"] == len(names)
    try:
        # call through the (patched) public names, as user code does
        patched = {
            "cv2.resize": cv2.resize,
            "cv2.cvtColor": cv2.cvtColor,
            "cv2.GaussianBlur": cv2.GaussianBlur,
            "cv2.threshold": cv2.threshold,
            "numpy.mean": np.mean,
            "librosa.stft": librosa.stft,
            "librosa.feature.melspectrogram": librosa.feature.melspectrogram,
            "librosa.power_to_db": librosa.power_to_db,
        }
        got = [patched[name](*args, **kwargs) for name, _fn, args, kwargs in cases]
    finally:
        migrator.restore()
    for (name, _fn, _args, _kwargs), g, w in zip(cases, got, expected):
        _close(name, g, w)
    stats = migrator.get_stats()["functions"]
    for name, canonical in names.items():
        assert stats[canonical]["fell_back"] == 0, (name, stats[canonical]["fallback_reasons"])
        assert stats[canonical]["migrated"] >= 1, name


def test_pil_backends_through_the_migrator_return_pil_images() -> None:
    from PIL import Image, ImageFilter, ImageOps

    rng = np.random.default_rng(3)
    rgb = Image.fromarray(rng.integers(0, 256, (40, 52, 3), dtype=np.uint8))
    cases = [
        ("PIL.Image.Image.resize", lambda: rgb.resize((30, 20), Image.Resampling.BILINEAR)),
        ("PIL.Image.Image.convert", lambda: rgb.convert("L")),
        ("PIL.Image.Image.transpose", lambda: rgb.transpose(Image.Transpose.ROTATE_90)),
        ("PIL.Image.Image.crop", lambda: rgb.crop((3, 4, 30, 25))),
        ("PIL.Image.Image.filter", lambda: rgb.filter(ImageFilter.GaussianBlur(2))),
        ("PIL.ImageOps.mirror", lambda: ImageOps.mirror(rgb)),
    ]
    expected = [fn() for _name, fn in cases]
    here = f"{__name__}.test_pil_backends_through_the_migrator_return_pil_images"
    names = sorted({name for name, _fn in cases})
    plan = plan_for({f"{here}#0/{name}#0": "cpu" for name in names})
    migrator = PipelineMigrator.from_plan(plan, guard=False)
    assert migrator.apply()["patched"] == len(names)
    try:
        got = [fn() for _name, fn in cases]
    finally:
        migrator.restore()
    for (name, _fn), g, w in zip(cases, got, expected):
        assert isinstance(g, Image.Image) and (g.mode, g.size) == (w.mode, w.size), name
        _close(name, np.asarray(g), np.asarray(w))
    stats = migrator.get_stats()["functions"]
    for name in names:
        assert stats[name]["migrated"] >= 1, (name, stats[name]["fallback_reasons"])
