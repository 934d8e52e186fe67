"""The peer-suite plugin on a few cv2 and NumPy calls, without a peer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest
from migrate_support import layout_of

from codedag.patching import Patcher


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "peer_conformance.py"
    spec = importlib.util.spec_from_file_location("peer_conformance", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


peer = _load()


def test_copies_keep_values_and_layout() -> None:
    base = np.arange(4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3)
    readonly = base.copy()
    readonly.flags.writeable = False
    arrays = [
        np.asfortranarray(base),
        base[::-1, ::2],
        np.broadcast_to(base[:1], base.shape),
        readonly,
        np.zeros((0, 3), np.uint8),
        np.float64(2.5),
    ]
    copies = peer.clone((arrays, {"a": arrays[0]}))
    assert copies[1]["a"] is copies[0][0]  # an object seen twice is copied once
    for original, copied in zip(arrays, copies[0]):
        assert np.array_equal(original, copied)
        if isinstance(original, np.ndarray):
            assert copied.dtype == original.dtype
            assert layout_of(copied) == layout_of(original)
            assert copied.flags.writeable == original.flags.writeable
            assert not np.shares_memory(copied, original)


def test_wrapped_calls_return_the_library_results_and_are_compared(tmp_path: Path) -> None:
    shadow = peer.Shadow(tmp_path, examples=2)
    patcher = Patcher("test")
    patcher.patch_many(["cv2.resize", "cv2.flip", "numpy.stack", "numpy.add"], shadow.wrap)
    img = (np.arange(10 * 12 * 3) % 251).astype(np.uint8).reshape(10, 12, 3)
    f = np.asfortranarray(img.astype(np.float32))
    try:
        resized = cv2.resize(img, (6, 5))
        flipped = cv2.flip(img[::-1], 1)
        stacked = np.stack([f, f])
        added = np.add(f, 1.0)
        assert np.add.reduce(f, axis=0).shape == (12, 3)  # the ufunc's methods are kept
    finally:
        patcher.restore()
    assert np.array_equal(resized, cv2.resize(img, (6, 5)))
    assert np.array_equal(flipped, cv2.flip(img[::-1], 1))
    assert layout_of(stacked) == layout_of(np.stack([f, f]))
    assert np.array_equal(added, f + 1.0)
    data = shadow.summary()
    assert data["totals"]["calls"] == 4
    assert all(c["calls"] == 1 for c in data["functions"].values())
    assert not data["differences"]
    json_path, md_path = shadow.write()
    assert json_path.exists() and "| `cv2.resize` | 1 |" in md_path.read_text()


def test_a_difference_is_recorded_with_a_reproducer(tmp_path: Path) -> None:
    shadow = peer.Shadow(tmp_path, examples=1)
    shadow.test = "peer::test"
    import migrate_support

    real = migrate_support.conform
    detail = "result: 3 of 9 values (33.33%) beyond atol=0 rtol=0, worst 2 (allowed 0.00% up to 0)"
    migrate_support.conform = lambda name, case, device: ("failed", detail)
    try:
        shadow.compare("cv2.resize", ((np.zeros((3, 3), np.uint8), (2, 2)), {}))
        shadow.compare("cv2.resize", ((np.zeros((3, 3), np.uint8), (2, 2)), {}))
    finally:
        migrate_support.conform = real
    (found,) = shadow.summary()["differences"]
    assert (found["function"], found["kind"], found["calls"]) == (
        "cv2.resize",
        "beyond tolerance",
        2,
    )
    (example,) = found["examples"]
    assert example["test"] == "peer::test"
    assert example["args"][0] == "ndarray uint8 (3, 3) C"
    assert Path(example["case"]).exists()


def test_random_draws_are_not_disturbed(tmp_path: Path) -> None:
    np.random.seed(3)
    expected = [np.random.rand(3), np.random.randint(0, 9, 4)]
    shadow = peer.Shadow(tmp_path)
    patcher = Patcher("test")
    patcher.patch_many(["numpy.random.rand", "numpy.random.randint"], shadow.wrap)
    try:
        np.random.seed(3)
        got = [np.random.rand(3), np.random.randint(0, 9, 4)]
    finally:
        patcher.restore()
    assert all(np.array_equal(g, e) for g, e in zip(got, expected))
    assert shadow.summary()["totals"]["differs"] == 2


def test_kinds_of_differences() -> None:
    assert peer.kind_of("result: layout ('C',), the library's ('F',)") == "layout"
    assert peer.kind_of("ValueError: x (hidden by the fallback; the library)") == "backend error"
    assert peer.kind_of("result: 2 of 4 booleans differ") == "beyond tolerance"
    assert peer.kind_of("result: float32 (2,) != library float64 (2,)") == "mismatch"


def test_outcomes_of_two_runs(tmp_path: Path) -> None:
    def junit(name: str, body: str) -> str:
        path = tmp_path / name
        path.write_text(
            f'<testsuites><testsuite><testcase classname="t" name="a"/>{body}'
            "</testsuite></testsuites>"
        )
        return str(path)

    base = junit("base.xml", '<testcase classname="t" name="b"><failure/></testcase>')
    same = junit("same.xml", '<testcase classname="t" name="b"><failure/></testcase>')
    other = junit("other.xml", '<testcase classname="t" name="b"/>')
    assert peer.main(["outcomes", base, same]) == 0
    assert peer.main(["outcomes", base, other]) == 1
    assert peer.main(["outcomes", base]) == 2
    assert peer.main(["outcomes", base, str(tmp_path / "missing.xml")]) == 2


def test_repeated_calls_are_compared_up_to_a_count(tmp_path: Path) -> None:
    shadow = peer.Shadow(tmp_path, repeats=2)
    patcher = Patcher("test")
    patcher.patch_many(["cv2.flip"], shadow.wrap)
    img = np.zeros((4, 5), np.uint8)
    try:
        for _ in range(4):
            cv2.flip(img, 1)
        cv2.flip(img, 0)  # another flag: other calls
        cv2.flip(np.asfortranarray(np.zeros((4, 5, 3), np.uint8)), 1)
    finally:
        patcher.restore()
    counts = shadow.summary()["functions"]["cv2.flip"]
    assert (counts["calls"], counts["repeats"], counts["identical"]) == (6, 2, 4)


def test_arguments_are_described() -> None:
    from PIL import ImageFilter

    f = np.asfortranarray(np.zeros((2, 3), np.float32))
    assert peer.describe([f, 2.5]) == "list[ndarray float32 (2, 3) F, 2.5]"
    assert peer.describe(ImageFilter.GaussianBlur(2)) == "GaussianBlur(radius=2)"


def test_alike_calls() -> None:
    img = np.zeros((16, 16), np.uint8)
    key = peer.call_key
    assert key((img, 1.5)) == key((img.copy(), 2.5))  # floats by type, arrays by layout
    assert key((img, 1)) != key((img, 2))
    assert key(img) != key(np.asfortranarray(img)) != key(img[::2])
    assert key(np.eye(3)) != key(2 * np.eye(3))  # small arrays (kernels) by their values


def test_compared_calls_per_function_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer, "PER_FUNCTION", 2)
    shadow = peer.Shadow(tmp_path, repeats=1)
    patcher = Patcher("test")
    patcher.patch_many(["cv2.flip"], shadow.wrap)
    try:
        for i in range(5):  # small arrays of new values: every call is new
            cv2.flip(np.full((2, 2), i, np.uint8), 1)
    finally:
        patcher.restore()
    counts = shadow.summary()["functions"]["cv2.flip"]
    assert (counts["calls"], counts["repeats"], counts["identical"]) == (5, 3, 2)
