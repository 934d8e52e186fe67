"""The batched contract: whatever a deferred value records, run on a batch, is what the samples
compute eagerly, within the tolerance table.

For every operation a deferred value can record, in the style of the conformance suite:

* **library ops** with a batch-first backend whose data are arrays (cv2, librosa): the
  conformance corpus's calls (``conformance_corpus.cases``), each on three samples of the same
  shape (the image, and two rearrangements of it), recorded from a pending value, collated into
  one record and run by the batched executor; each row must equal the library's own result for
  that sample (shape, dtype, values within the tolerance table; a collated batch keeps no
  sample's memory layout), the
  recorded shape and dtype must be the library's, and a call the library refuses (raises) must not
  be recorded;
* **NumPy ufuncs and operators, casts, views, static indexing, flips and conversions to torch**:
  chains of one to three of them drawn by hypothesis on arrays of several shapes and dtypes.

CI runs a fixed set (a few corpus calls per op, derandomized draws); ``CONTRACT_CASES=0`` runs
every corpus call, ``CONTRACT_EXAMPLES=200`` draws more chains.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from conformance_corpus import cases, covered
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

import codedag.backends.batched.deferred as deferred
import codedag.backends.batched.executor as executor_module
import codedag.backends.batched.ops as ops
import codedag.backends.batched.views as views
from codedag.backends.batched.collate import BatchRecord, default_collate_deferred
from codedag.backends.batched.deferred import Lazy, deferring
from codedag.backends.batched.executor import BatchExecutor
from codedag.backends.batched.forcing import FORCED
from codedag.backends.probe import original_function
from codedag.backends.registry import default_registry
from codedag.backends.tolerances import Tolerance, difference, tolerance_for
from codedag.errors import UnsupportedOperation

CASES = int(os.environ.get("CONTRACT_CASES", "8"))
"""Corpus calls per library op (0: all of them)."""
EXAMPLES = examples(int(os.environ.get("CONTRACT_EXAMPLES", "30")))
SAMPLES = 3


def _library_names() -> list[str]:
    names = []
    for name in sorted(default_registry().names()):
        op = ops.library_op(name)
        if op is not None and not name.startswith("PIL.") and name in covered():
            names.append(name)
    return names


LIBRARY = _library_names()


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    FORCED.reset()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    FORCED.reset()


def _variants(data: np.ndarray) -> list[np.ndarray]:
    """Three samples of the same shape and dtype: the data and two rearrangements of it."""
    if data.ndim == 0 or data.size == 0:
        return [data.copy() for _ in range(SAMPLES)]
    flipped = np.ascontiguousarray(data[::-1])
    rolled = np.ascontiguousarray(np.roll(data, 1, axis=-1 if data.ndim == 1 else 1))
    return [data, flipped, rolled][:SAMPLES]


def _data_slot(
    op: ops.LibraryOp, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> int | str | None:
    for position, value in enumerate(args):
        if isinstance(value, np.ndarray) and op.slot_kind(position, value) == ops.DATA:
            return position
    for name, value in kwargs.items():
        if isinstance(value, np.ndarray) and op.slot_kind(name, value) == ops.DATA:
            return name
    return None


def _with(args: tuple[Any, ...], kwargs: dict[str, Any], slot: int | str, value: Any) -> Any:
    if isinstance(slot, int):
        return (*args[:slot], value, *args[slot + 1 :]), kwargs
    return args, {**kwargs, slot: value}


class _Failures:
    """Exceptions of batched groups (the executor logs them and replays the samples)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.errors: list[str] = []

        def record(executor: Any, step: Any, error: Exception) -> None:
            if not isinstance(error, UnsupportedOperation):
                self.errors.append(f"{step.op.name}: {type(error).__name__}: {error}"[:200])

        monkeypatch.setattr(BatchExecutor, "_warn_once", record)


def _check_library_call(name: str, label: str, case: Any, failures: _Failures) -> str | None:
    op = ops.library_op(name)
    assert op is not None
    original = original_function(name)
    args, kwargs = case()
    slot = _data_slot(op, args, kwargs)
    if slot is None:
        return None
    data = args[slot] if isinstance(slot, int) else kwargs[slot]
    samples = _variants(data)
    wants: list[Any] = []
    raised: BaseException | None = None
    for sample in samples:
        call_args, call_kwargs = _with(args, kwargs, slot, sample.copy())
        try:
            wants.append(original(*call_args, **call_kwargs))
        except Exception as error:
            raised = error
            break
    with deferring():
        try:
            lazies = [
                deferred.start(op, sample, *_with(args, kwargs, slot, sample), entry="contract")
                for sample in samples
            ]
        except UnsupportedOperation:
            return None  # refused: the call runs eagerly, as the library
        if raised is not None:
            return f"[{label}] recorded a call the library refuses ({type(raised).__name__})"
        record = default_collate_deferred(lazies)
    want = wants[0]
    if not isinstance(want, np.ndarray):
        return f"[{label}] recorded a call returning {type(want).__name__}"
    meta = lazies[0]._node.meta
    if meta.shape != want.shape or np.dtype(meta.dtype) != want.dtype:
        return f"[{label}] recorded {meta.shape} {meta.dtype}, the library gives {want.shape} {want.dtype}"
    if not isinstance(record, BatchRecord):
        return f"[{label}] collated to {type(record).__name__}"
    outcome = BatchExecutor("cpu").run(record)
    if failures.errors:
        return f"[{label}] the batch failed: {failures.errors[0]}"
    for row, expected in enumerate(wants):  # values (a collated batch has no sample layout)
        problem = difference(name, expected, outcome.tensor[row].numpy())
        if problem is not None:
            return f"[{label}] sample {row}: {problem}"
    return None


def _chosen(name: str) -> list[tuple[str, Any]]:
    labeled = cases(name)
    return labeled if CASES <= 0 else labeled[:CASES]


@pytest.mark.parametrize("name", LIBRARY)
def test_library_op_on_a_batch_equals_the_samples(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = _Failures(monkeypatch)
    problems = []
    for label, case in _chosen(name):
        problem = _check_library_call(name, label, case, failures)
        if problem is not None:
            problems.append(problem)
    assert not problems, f"{name}:\n" + "\n".join(problems[:10])


# -- NumPy operations, views, casts and conversions, drawn -----------------------------------

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)

Step = tuple[str, Callable[[Any], Any]]
"""A label, and the operation applied to a value (deferred or eager alike)."""

STEPS: list[Step] = [
    ("add int", lambda x: x + 3),
    ("subtract float", lambda x: x - 2.5),
    ("multiply", lambda x: x * 2),
    ("divide", lambda x: x / 255.0),
    ("reflected subtract", lambda x: 255 - x),
    ("power", lambda x: x**2),
    ("floor divide", lambda x: x // 3),
    ("remainder", lambda x: x % 7),
    ("greater", lambda x: x > 100),
    ("negative", lambda x: -x),
    ("absolute", lambda x: abs(x)),
    ("maximum", lambda x: np.maximum(x, 10)),
    ("minimum", lambda x: np.minimum(x, 200)),
    ("clip", lambda x: np.clip(x, 10, 200)),
    ("clip method", lambda x: x.clip(0, 100)),
    ("bitwise and", lambda x: x & 15),
    ("sqrt", lambda x: np.sqrt(x)),
    ("floor", lambda x: np.floor(x)),
    ("minus channel mean", lambda x: x - MEAN),
    ("astype float32", lambda x: x.astype(np.float32)),
    ("astype uint8", lambda x: x.astype(np.uint8)),
    ("ascontiguousarray float32", lambda x: np.ascontiguousarray(x, dtype=np.float32)),
    ("copy", lambda x: x.copy()),
    ("asarray", lambda x: np.asarray(x)),
    ("transpose", lambda x: x.transpose()),
    ("np.transpose perm", lambda x: np.transpose(x, tuple(range(x.ndim))[::-1])),
    ("T", lambda x: x.T),
    ("reshape flat", lambda x: x.reshape(-1)),
    ("reshape rows", lambda x: x.reshape(x.shape[0], -1)),
    ("step slice", lambda x: x[::2]),
    ("reverse columns", lambda x: x[:, ::-1]),
    ("last channel", lambda x: x[..., 0]),
    ("new axis", lambda x: x[None]),
    ("crop", lambda x: x[1:-1, 2:]),
    ("flip", lambda x: np.flip(x, 0)),
    ("fliplr", lambda x: np.fliplr(x)),
    ("flipud", lambda x: np.flipud(x)),
    ("to torch float", lambda x: _torch(x).float() / 255),
    ("to torch permute", lambda x: _torch(x).permute(*range(x.ndim)[::-1]).contiguous()),
]
STEP_NAMES = {
    "sqrt": "numpy.sqrt",
    "divide": "numpy.divide",
    "to torch float": "torch.Tensor.__truediv__",
}
"""The op whose tolerance applies to a chain holding the step (the loosest of them; none:
exact)."""
SHAPES = [(6, 5), (6, 5, 3), (4, 7, 1)]
DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.bool_]


def _torch(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, Lazy) and x._node.meta.kind == "tensor":
        return x
    return torch.from_numpy(np.ascontiguousarray(x)) if not isinstance(x, Lazy) else _lazy_torch(x)


def _lazy_torch(x: Any) -> Any:
    contiguous = views.numpy_view("numpy.ascontiguousarray")
    to_tensor = views.to_tensor_op("torch.from_numpy")
    value = deferred.call(contiguous, np.ascontiguousarray, (x,), {})
    return deferred.call(to_tensor, torch.from_numpy, (value,), {})


def _pending(data: np.ndarray) -> Any:
    """A deferred value of ``data`` whose computation is pending (a recorded copy)."""
    op = views.numpy_view("numpy.copy")
    assert op is not None
    return deferred.start(op, data, (data,), {}, "contract")


def _apply(chain: list[Step], value: Any) -> Any:
    for _label, step in chain:
        value = step(value)
    return value


def _eager(chain: list[Step], data: np.ndarray) -> tuple[Any, BaseException | None]:
    try:
        return _apply(chain, data.copy()), None
    except Exception as error:
        return None, error


def _as_numpy(value: Any) -> Any:
    return value.numpy() if isinstance(value, torch.Tensor) else value


@st.composite
def _chains(draw: st.DrawFn) -> tuple[list[Step], np.ndarray]:
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, shape).astype(dtype)
    length = draw(st.integers(1, 3))
    chain = [draw(st.sampled_from(STEPS)) for _ in range(length)]
    return chain, data


def _drawn(labels: str, data: np.ndarray) -> tuple[list[Step], np.ndarray]:
    """A chain by its steps' labels (``"a -> b"``), on ``data``: a fixed case of the drawn ones."""
    steps = dict(STEPS)
    return [(label, steps[label]) for label in labels.split(" -> ")], data


_MASK = np.ones((6, 5), dtype=np.bool_)
_MASK[4, 3] = False
_PIXELS = np.random.default_rng(1).integers(0, 256, (6, 5)).astype(np.uint8)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=_chains())
# NumPy functions on a bool tensor: torch wraps the result as a uint8 tensor
@example(drawn=_drawn("to torch permute -> np.transpose perm", _MASK))
@example(drawn=_drawn("to torch permute -> maximum", _MASK))
# torch refuses on the CPU what its meta kernels let through (bool - x, ~float)
@example(drawn=_drawn("to torch permute -> subtract float", _MASK))
@example(drawn=_drawn("to torch permute -> reflected subtract", _MASK))
@example(drawn=_drawn("to torch float -> bitwise and", _PIXELS))
# a tensor's operator leaves an ndarray operand to NumPy (which raises, or wraps as torch does)
@example(drawn=_drawn("to torch float -> minus channel mean", _PIXELS))
@example(drawn=_drawn("to torch float -> minus channel mean", np.stack([_PIXELS] * 3, axis=-1)))
# a flip of an axis the value has not: NumPy's AxisError
@example(drawn=_drawn("last channel -> last channel -> flip", _PIXELS))
# a step's tolerance holds through the exact steps after it (torch's sqrt is 1 ulp off here)
@example(drawn=_drawn("subtract float -> sqrt -> add int", _PIXELS))
def test_recorded_numpy_and_torch_steps_on_a_batch_equal_the_samples(
    drawn: tuple[list[Step], np.ndarray],
) -> None:
    chain, data = drawn
    labels = " -> ".join(label for label, _ in chain)
    samples = _variants(data)
    eager = [_eager(chain, s) for s in samples]
    FORCED.reset()
    with np.errstate(all="ignore"), warnings.catch_warnings(), deferring():
        warnings.simplefilter("ignore")
        try:
            lazies = [_apply(chain, _pending(s)) for s in samples]
        except Exception as error:
            raised = eager[0][1]
            assert raised is not None, f"{labels}: raised {error!r} where NumPy does not"
            assert type(error) is type(raised), f"{labels}: {error!r}, NumPy: {raised!r}"
            return
        assert eager[0][1] is None, f"{labels}: recorded where NumPy raises {eager[0][1]!r}"
        if not all(isinstance(v, Lazy) for v in lazies):  # forced on the way: eager values
            for value, (want, _error) in zip(lazies, eager):
                got = value._force("repr") if isinstance(value, Lazy) else value
                assert difference(_name(chain), _as_numpy(want), _as_numpy(got)) is None, labels
            return
        metas = [v._node.meta for v in lazies]
        want0 = eager[0][0]
        assert metas[0].shape == tuple(want0.shape), labels
        record = default_collate_deferred(lazies)
    assert isinstance(record, BatchRecord), labels
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = BatchExecutor("cpu").run(record)
        plain = BatchExecutor("cpu", fuse=False).run(record)
    assert not outcome.failed, f"{labels}: the batch failed"
    for row, (want, _error) in enumerate(eager):
        for result in (outcome, plain):
            got = result.tensor[row]
            expected = torch.as_tensor(np.array(_as_numpy(want), order="C"))  # 0-d stays 0-d
            problem = difference(_name(chain), expected, got)
            assert problem is None, f"{labels} on {data.dtype}{data.shape}, sample {row}: {problem}"


def _name(chain: list[Step]) -> str:
    """The op whose tolerance the chain's result is held to: the loosest of its steps' (a few
    ulp of ``sqrt`` stay a few ulp through the exact steps after it)."""
    names = [STEP_NAMES[label] for label, _ in chain if label in STEP_NAMES]
    return max(names, key=lambda name: _loose(tolerance_for(name)), default="exact")


def _loose(tolerance: Tolerance) -> tuple[float, float]:
    return tolerance.rtol, tolerance.atol


def test_every_recorded_view_and_cast_is_drawn() -> None:
    drawn_views = {"T", "transpose", "reshape flat", "step slice", "flip", "fliplr", "flipud"}
    recorded = set(views.NUMPY_VIEWS) - {"numpy.array", "numpy.asanyarray", "numpy.copy"}
    assert len(drawn_views) <= len(recorded)
    assert executor_module.BatchExecutor is BatchExecutor


@pytest.mark.parametrize("divisor", [[1, 0, 2], [True, False, True], [1, 2, 3]])
def test_integer_division_by_a_concrete_tensor_runs_as_torch(divisor: list[Any]) -> None:
    data = np.arange(18, dtype=np.int16).reshape(6, 3)
    by = torch.tensor(divisor)
    try:
        want: Any = _torch(data) // by
    except RuntimeError as error:
        want = error
    with deferring():
        if isinstance(want, RuntimeError):
            with pytest.raises(RuntimeError):
                _torch(_pending(data)) // by
            return
        got = _torch(_pending(data)) // by
        assert isinstance(got, Lazy)
        record = default_collate_deferred([got])
    assert torch.equal(BatchExecutor("cpu").run(record).tensor[0], want)
