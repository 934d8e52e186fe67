"""The single-pass path of array calls (``ArrayAdapter.fast_path``) returns exactly what the
general path returns (refusal, ``to_backend``, ``to_library``), bit for bit and layout for layout,
shares no memory with an input where the general path does not, and leaves every call it does not
take to the general path before anything runs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from codedag.backends.adapters import ArrayAdapter
from codedag.backends.contract import NOT_TAKEN, DeclaredUnsupported, declare
from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.backends.ops.cv2._adapter import CV2

ARRAYS = ArrayAdapter()


class _Sub(np.ndarray):
    pass


def _inputs() -> dict[str, Callable[[], np.ndarray]]:
    def base() -> np.ndarray:
        return np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5

    def read_only() -> np.ndarray:
        a = base()
        a.flags.writeable = False
        return a

    return {
        "C": base,
        "F": lambda: np.asfortranarray(base()),
        "strided": lambda: base()[::2, 1::2],
        "transposed": lambda: base().T,
        "0-d": lambda: np.array(3.5, dtype=np.float64),
        "int": lambda: np.arange(6, dtype=np.int16).reshape(2, 3),
        "bool": lambda: np.array([True, False, True]),
        "empty": lambda: np.zeros((0, 3), dtype=np.float32),
        "read-only": read_only,
        "negative strides": lambda: base()[::-1],
        "subclass": lambda: base().view(_Sub),
    }


BACKENDS: dict[str, Callable[..., Any]] = {
    "identity": lambda a, b=None: a,
    "view": lambda a, b=None: a[..., :1] if a.dim() else a,
    "transposed view": lambda a, b=None: a.permute(tuple(reversed(range(a.dim())))),
    "detached alias": lambda a, b=None: a.detach(),
    "new": lambda a, b=None: a * 2 if b is None else a * b,
    "0-d": lambda a, b=None: a.sum(),
    "tuple": lambda a, b=None: (a, a + 1),
    "python value": lambda a, b=None: int(a.numel()),
}

ORDERS = (None, "C", "F", "A")


def _executor(
    backend: Callable[..., Any], order: str | None, zero_copy: bool = True, **quirks: Any
) -> Executor:
    quirks.setdefault("empty", True)
    spec = declare("numpy.fast_demo", backend, ARRAYS, order=order, **quirks)
    converter = ValueConverter("cpu", zero_copy=zero_copy)
    return Executor(spec, lambda *a, **k: None, {"cpu": converter})


def _describe(value: Any, inputs: list[np.ndarray]) -> Any:
    """Everything user code can observe of a result, memory sharing with the inputs included."""
    if isinstance(value, tuple | list):
        return (type(value), [_describe(v, inputs) for v in value])
    if isinstance(value, np.ndarray):
        return (
            type(value),
            value.dtype.str,
            value.shape,
            value.strides,
            value.flags.c_contiguous,
            value.flags.f_contiguous,
            value.flags.writeable,
            value.tobytes(order="A"),
            [np.shares_memory(value, a) for a in inputs],
        )
    return (type(value), value)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_fast_path_returns_what_the_general_path_returns(backend: str, order: str) -> None:
    ex = _executor(BACKENDS[backend], order)
    for (label, make), scale in itertools.product(_inputs().items(), (None, 3)):
        args: tuple[Any, ...] = (make(),) if scale is None else (make(), scale)
        fast = ex.run(args, {}, "cpu")
        general = ex._run(args, {}, "cpu")
        want = _describe(general, list(args[:1]))
        assert _describe(fast, list(args[:1])) == want, (label, scale)
        assert not any(np.shares_memory(out, args[0]) for out in _arrays(fast)), (
            f"{label}: a result shares the input's memory"
        )


def _arrays(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, tuple | list):
        return [a for v in value for a in _arrays(v)]
    return []


def test_keyword_arrays_and_scalars_go_the_fast_way() -> None:
    seen: list[Any] = []

    def backend(a: torch.Tensor, b: Any = None) -> torch.Tensor:
        seen.append(type(b))
        return a + b

    ex = _executor(backend, None)
    assert ex._fast is not None
    a, b = np.arange(4.0), np.ones(4)
    out = ex._fast(ex._backend, (a,), {"b": b}, ex.converters["cpu"])
    np.testing.assert_array_equal(out, a + 1)
    assert ex._fast(ex._backend, (a, 2.5), {}, ex.converters["cpu"]).tolist() == [
        2.5,
        3.5,
        4.5,
        5.5,
    ]
    assert seen == [torch.Tensor, float]


def test_calls_outside_the_fast_case_are_left_before_anything_runs() -> None:
    ran: list[int] = []

    def backend(a: Any, b: Any = None) -> Any:
        ran.append(1)
        return a

    ex = _executor(backend, None, dtypes=frozenset({"float32", "float64"}))
    fast, converter = ex._fast, ex.converters["cpu"]
    assert fast is not None
    inputs = _inputs()
    for args in [
        (inputs["read-only"](),),
        (inputs["negative strides"](),),
        (inputs["subclass"](),),
        (inputs["int"](),),  # a dtype the op does not declare
        ([np.zeros(2), np.ones(2)],),
        (torch.zeros(2),),
        (np.zeros(2), (np.ones(2),)),
    ]:
        assert fast(backend, args, {}, converter) is NOT_TAKEN, args
    assert fast(backend, (np.zeros(2),), {"b": torch.zeros(2)}, converter) is NOT_TAKEN
    assert ran == []
    strict = _executor(backend, None, empty=False)
    assert strict._fast is not None
    assert strict._fast(backend, (np.zeros(0),), {}, converter) is NOT_TAKEN
    assert ran == []


def test_the_executor_takes_the_fast_path_for_plain_calls_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    general: list[tuple[Any, ...]] = []
    ex = _executor(lambda a, out=None: a + 1, None)
    run = ex._run

    def spy(args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        general.append(args)
        return run(args, kwargs, device)

    monkeypatch.setattr(ex, "_run", spy)
    a = np.arange(3)
    ex.run((a,), {}, "cpu")
    assert general == []
    ex.run((a,), {"out": None}, "cpu")  # a buffer keyword: the general path drops it
    with pytest.raises(DeclaredUnsupported, match="out= writes into a caller's buffer"):
        ex.run((a, np.empty(3)), {}, "cpu")
    ex.run((a[::-1],), {}, "cpu")  # not taken by the fast path
    assert len(general) == 3


def test_the_ops_check_runs_first_and_a_refusal_takes_the_general_path() -> None:
    def check(a: Any, b: Any = None) -> str | None:
        return "three elements" if a.shape == (3,) else None

    ex = _executor(lambda a, b=None: a + 1, None, check=check)
    assert ex.run((np.arange(2),), {}, "cpu").tolist() == [1, 2]
    with pytest.raises(DeclaredUnsupported, match="three elements"):
        ex.run((np.arange(3),), {}, "cpu")
    with pytest.raises(DeclaredUnsupported, match="do not match the signature"):
        ex.run((np.arange(2), 1, 2), {}, "cpu")


def test_devices_without_shared_memory_take_the_general_path() -> None:
    ex = _executor(BACKENDS["identity"], None, zero_copy=False)
    a = np.arange(6.0).reshape(2, 3)
    out = ex.run((a,), {}, "cpu")
    np.testing.assert_array_equal(out, a)
    assert not np.shares_memory(out, a)
    assert len(ex.converters["cpu"].cache) == 1  # the staged path remembered its result


# -- batch-first adapters (cv2 images, librosa signals) ----------------------------------------

BATCH_BACKENDS: dict[str, Callable[..., Any]] = {
    "identity": lambda src, src2=None, kernel=None: src,
    "view": lambda src, src2=None, kernel=None: src[..., :1, :],
    "new": lambda src, src2=None, kernel=None: src + (1 if src2 is None else src2),
    "kernel": lambda src, src2=None, kernel=None: src * (1 if kernel is None else kernel.sum()),
    "scalar": lambda src, src2=None, kernel=None: src.float().mean(dim=tuple(range(1, src.dim()))),
    "pair": lambda src, src2=None, kernel=None: (src, src + 1),
}


def _images() -> dict[str, np.ndarray]:
    base = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    return {
        "color": base,
        "gray": base[..., 0].copy(),
        "one channel": base[..., :1].copy(),
        "strided": base[::2, ::2],
        "float": base.astype(np.float32) / 7,
    }


def _batch_executor(backend: Callable[..., Any], **quirks: Any) -> Executor:
    spec = declare("cv2.fast_demo", backend, CV2, **quirks)
    return Executor(spec, lambda *a, **k: None, {"cpu": ValueConverter("cpu")})


@pytest.mark.parametrize("backend", sorted(BATCH_BACKENDS))
def test_batch_fast_path_returns_what_the_general_path_returns(backend: str) -> None:
    ex = _batch_executor(BATCH_BACKENDS[backend])
    assert ex._fast is not None
    kernel = np.ones((3, 3), np.float32)
    for label, image in _images().items():
        for args, kwargs in [
            ((image,), {}),
            ((image, 2), {}),
            ((image,), {"kernel": kernel}),
            ((), {"src": image, "src2": 3}),
        ]:
            fast = ex.run(args, dict(kwargs), "cpu")
            general = ex._run(args, dict(kwargs), "cpu")
            assert _describe(fast, [image]) == _describe(general, [image]), (label, kwargs)


def test_batch_calls_outside_the_fast_case_are_left_before_anything_runs() -> None:
    ran: list[int] = []

    def backend(src: Any, src2: Any = None, kernel: Any = None) -> Any:
        ran.append(1)
        return src

    ex = _batch_executor(backend, channels=(1, 3), dtypes=frozenset({"uint8"}))
    fast, converter = ex._fast, ex.converters["cpu"]
    assert fast is not None
    image = np.zeros((4, 4, 3), np.uint8)
    read_only = image.copy()
    read_only.flags.writeable = False
    for args, kwargs in [
        ((np.zeros((4, 4, 2), np.uint8),), {}),  # channels not declared
        ((np.zeros(4, np.uint8),), {}),  # rank
        ((np.zeros((0, 4, 3), np.uint8),), {}),  # empty
        ((image.astype(np.int64),), {}),  # dtype
        ((read_only,), {}),
        ((image[::-1],), {}),
        ((image.view(_Sub),), {}),
        ((torch.zeros(4, 4, 3),), {}),
        ((image, "text"), {}),  # a data argument that is no declared scalar
        ((image,), {"kernel": np.zeros(2, dtype=object)}),
        ((image,), {"kernel": [np.zeros(2)]}),
    ]:
        assert fast(backend, args, kwargs, converter) is NOT_TAKEN, (args, kwargs)
    assert ran == []
