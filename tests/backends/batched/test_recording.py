"""Recording deferred values: shapes inferred once per signature, data recorded in place, and the
one switch (:func:`deferring`) that owns deferral."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
import pytest

import codedag.backends.batched.deferred as deferred
import codedag.backends.batched.ops as ops
import codedag.backends.batched.views as views
from codedag.backends.batched.collate import default_collate_deferred
from codedag.backends.batched.deferred import LazyArray, deferring
from codedag.backends.batched.forcing import FORCED
from codedag.backends.batched.wrappers import EntryMatcher, chain_function

RESIZE = chain_function("cv2.resize", cv2.resize, EntryMatcher("cv2.resize", [], []))
CVT = chain_function("cv2.cvtColor", cv2.cvtColor, None)


@pytest.fixture(autouse=True)
def _fresh_signatures() -> Iterator[None]:
    FORCED.reset()
    for op in ops.registered_ops().values():
        op.forget()
    yield
    FORCED.reset()


class _Counting:
    """Counts the inferences of an op (``Op.infer`` runs only on a new signature)."""

    def __init__(self, op: ops.Op, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = op.infer

        def infer(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            self.calls += 1
            return original(args, kwargs)

        monkeypatch.setattr(op, "infer", infer)


def _image(h: int = 32, w: int = 40, dtype: Any = np.uint8) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (h, w, 3)).astype(dtype)


def test_a_shape_is_inferred_once_per_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    divide = _Counting(ops.elementwise_op("numpy.divide"), monkeypatch)  # type: ignore[arg-type]
    resize = _Counting(ops.library_op("cv2.resize"), monkeypatch)  # type: ignore[arg-type]
    with deferring() as scope:
        outs = [RESIZE(_image(), (20, 16)).astype(np.float32) / float(i + 1) for i in range(32)]
    assert scope.created == 32 * 3
    assert (divide.calls, resize.calls) == (1, 1)  # 32 samples, one signature each
    assert all(o.shape == (16, 20, 3) and o.dtype == np.float32 for o in outs)


@pytest.mark.parametrize(
    ("change", "expected_shape", "expected_dtype"),
    [
        ("shape", (24, 30, 3), np.float32),  # another input size
        ("dtype", (16, 20, 3), np.float64),  # another input dtype (float64 / 2.0 stays float64)
        ("static", (8, 10, 3), np.float32),  # another static argument (resize's dsize)
    ],
)
def test_the_signature_changes_with_shape_dtype_or_static_arguments(
    change: str, expected_shape: tuple[int, ...], expected_dtype: Any
) -> None:
    with deferring():
        first = RESIZE(_image(), (20, 16)).astype(np.float32) / 2.0
        assert (first.shape, first.dtype) == ((16, 20, 3), np.float32)
        source = _image(dtype=np.float64 if change == "dtype" else np.uint8)
        size = {"shape": (30, 24), "static": (10, 8)}.get(change, (20, 16))
        resized = RESIZE(source, size)
        second = (resized if change == "dtype" else resized.astype(np.float32)) / 2.0
        eager = cv2.resize(source, size)
        eager = (eager if change == "dtype" else eager.astype(np.float32)) / 2.0
    assert (second.shape, second.dtype) == (expected_shape, np.dtype(expected_dtype))
    assert (second.shape, second.dtype) == (eager.shape, eager.dtype)


def test_python_ints_count_by_the_dtypes_that_hold_them() -> None:
    with deferring():
        x = RESIZE(_image(), (20, 16))
        small = x + 3
        assert isinstance(small, LazyArray) and small.dtype == np.uint8
        with pytest.raises(OverflowError):  # NumPy refuses 300 for uint8: forced, then raised
            x + 300
    assert FORCED.reasons["unsupported"] == 1


def test_a_refusal_is_remembered_and_still_forces(monkeypatch: pytest.MonkeyPatch) -> None:
    op = views.numpy_view("numpy.ndarray.reshape")
    assert op is not None
    counting = _Counting(op, monkeypatch)
    with deferring():
        for _ in range(4):
            x = RESIZE(_image(), (20, 16))
            out = x.reshape(-1, order="F")  # Fortran order is not recorded
            assert isinstance(out, np.ndarray) and out.shape == (960,)
    assert counting.calls == 1
    assert FORCED.reasons["unsupported"] == 4


def test_large_data_is_recorded_in_place_and_read_only_until_the_block_ends() -> None:
    image = _image(128, 128)
    assert image.nbytes >= deferred.FREEZE_BYTES
    with deferring():
        x = CVT(RESIZE(image, (64, 64)), cv2.COLOR_BGR2RGB)
        assert not image.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            image[0, 0] = 1
        record = default_collate_deferred([x])
    assert image.flags.writeable  # the block ended: the user's array is writeable again
    assert record.payload.numel() == image.nbytes  # packed once, at collate


def test_thaw_gives_records_copies_before_code_may_write() -> None:
    image = _image(128, 128)
    expected = cv2.resize(image, (64, 64))
    with deferring():
        x = RESIZE(image, (64, 64))
        deferred.thaw()  # as a fetch does before running a sample again eagerly
        image[...] = 0
        assert not deferred.frozen()
        assert np.array_equal(np.asarray(x), expected)


def test_small_arguments_are_copied_when_recorded() -> None:
    image = _image(8, 8)
    assert image.nbytes < deferred.FREEZE_BYTES
    expected = cv2.resize(image, (4, 4))
    with deferring():
        x = RESIZE(image, (4, 4))
        image[...] = 0  # the record holds a copy: no effect
        assert image.flags.writeable
        assert np.array_equal(np.asarray(x), expected)


def test_blocks_nest_and_a_disabled_block_runs_eagerly() -> None:
    assert not deferred.recording()
    with deferring() as outer:
        with deferring() as sample:
            RESIZE(_image(), (20, 16))
        assert sample.created == 1 and sample.entries
        with deferring(enabled=False) as eager:
            assert not deferred.recording()
            out = RESIZE(_image(), (20, 16))
            assert isinstance(out, np.ndarray) and eager.created == 0
        assert deferred.recording()
    assert outer.created == 1
    assert not deferred.recording()


def test_a_call_the_library_refuses_raises_its_error_in_a_chain_too() -> None:
    warp = chain_function("cv2.warpAffine", cv2.warpAffine, None)
    matrix = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # cv2 wants an array: a list is refused
    with pytest.raises(cv2.error) as eager:
        cv2.warpAffine(cv2.resize(_image(), (20, 16)), matrix, (20, 16))
    with deferring(), pytest.raises(cv2.error) as chained:
        small = RESIZE(_image(), (20, 16))
        assert isinstance(small, LazyArray)
        warp(small, matrix, (20, 16))
    assert "warpAffine" in str(chained.value) and str(chained.value) == str(eager.value)


def test_an_op_that_looks_at_sample_values_is_asked_on_every_call() -> None:
    """Recording asks ``sample_refusal`` only of ops that check samples: an op class overriding
    it checks them without saying so, the base op does not."""

    class Checking(ops.Op):
        def sample_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
            return "values refused"

    class Declared(Checking):
        checks_samples = False

    assert Checking.checks_samples and not ops.Op.checks_samples
    assert not Declared.checks_samples
