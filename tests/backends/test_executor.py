"""The generic executor: declared refusals before anything converts, then adapter in, backend,
adapter out, the same for every library (arguments adapted, FactoryOp transforms cached, in-place
results written back)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from codedag.backends.adapters import ArrayAdapter, BatchAdapter
from codedag.backends.contract import (
    DEVICE,
    DeclaredUnsupported,
    FactoryOp,
    OpSpec,
    Quirks,
    StandardOp,
    declare,
)
from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import FACTORY_CACHE_SIZE, Executor
from codedag.errors import UnsupportedOperation

ARRAYS = ArrayAdapter()


def _executor(spec: OpSpec, original: Any = None) -> Executor:
    return Executor(spec, original or (lambda *a, **k: None), {"cpu": ValueConverter("cpu")})


def test_refusal_checks_buffers_then_the_adapter_then_the_ops_check() -> None:
    seen: list[str] = []

    def check(a: Any, out: Any = None) -> str | None:
        seen.append("check")
        return "the op's own reason" if a.shape == (3,) else None

    def backend(a: torch.Tensor, out: Any = None) -> torch.Tensor:
        return a + 1

    ex = _executor(declare("numpy.demo", backend, ARRAYS, check=check, dtypes=frozenset({"int64"})))
    a = np.arange(4)
    assert ex.refusal((a,), {"out": np.empty(4)}) == "out= writes into a caller's buffer"
    assert ex.refusal((a, np.empty(4)), {}) == "out= writes into a caller's buffer"
    assert seen == []  # a buffer refuses before the op's check runs
    reason = ex.refusal((a.astype(np.float32),), {})
    assert reason is not None and "dtype <f4 is not supported" in reason
    assert seen == []
    assert ex.refusal((np.arange(3),), {}) == "the op's own reason"
    assert ex.refusal((a,), {"out": None}) is None
    assert seen == ["check", "check"]


def test_a_check_that_does_not_take_the_arguments_refuses_the_call() -> None:
    def check(a: Any) -> str | None:
        return None

    ex = _executor(declare("numpy.demo", lambda a: a, ARRAYS, check=check))
    reason = ex.refusal((np.arange(3),), {"bogus": 1})
    assert reason is not None and reason.startswith("arguments do not match the signature")


def test_a_refused_call_raises_declared_unsupported_before_the_backend_runs() -> None:
    calls: list[Any] = []

    def backend(a: torch.Tensor) -> torch.Tensor:
        calls.append(a)
        return a

    ex = _executor(declare("numpy.demo", backend, ARRAYS, dtypes=frozenset({"uint8"})))
    with pytest.raises(DeclaredUnsupported, match=r"numpy\.demo: argument 0: dtype"):
        ex.run((np.zeros(3, np.float64),), {}, "cpu")
    assert calls == []
    assert isinstance(DeclaredUnsupported("x"), UnsupportedOperation)  # the wrapper falls back


def test_buffer_arguments_set_to_none_do_not_reach_the_backend() -> None:
    def backend(a: torch.Tensor) -> torch.Tensor:  # no ``out`` parameter at all
        return a * 2

    ex = _executor(declare("numpy.demo", backend, ARRAYS))
    got = ex.run((np.arange(3),), {"out": None}, "cpu")
    np.testing.assert_array_equal(got, [0, 2, 4])
    assert isinstance(got, np.ndarray)


def test_value_maps_renames_and_the_injected_device() -> None:
    received: dict[str, Any] = {}

    def backend(a: torch.Tensor, mode: str = "x", scale: float = 1.0, **kw: Any) -> torch.Tensor:
        received.update(mode=mode, scale=scale, **kw)
        return a

    spec = OpSpec(
        "numpy.demo",
        StandardOp,
        backend,
        ARRAYS,
        value_maps={"mode": {0: "zero", 1: "one"}},
        renames={"factor": "scale"},
        inject_kwargs={"device": DEVICE, "fixed": 7},
        positional_names=("a", "mode"),
    )
    ex = _executor(spec)
    ex.run((np.arange(2), 1), {"factor": 3.0}, "cpu")
    assert received == {"mode": "one", "scale": 3.0, "device": torch.device("cpu"), "fixed": 7}
    received.clear()
    ex.run((np.arange(2),), {"mode": 0}, "cpu")
    assert received["mode"] == "zero"
    with pytest.raises(UnsupportedOperation, match=r"mode=5 is not supported"):
        ex.run((np.arange(2),), {"mode": 5}, "cpu")


def test_a_backend_with_a_keyword_only_device_gets_the_calls_device() -> None:
    def backend(n: int, *, device: torch.device) -> torch.Tensor:
        return torch.arange(n, device=device)

    spec = declare("numpy.demo", backend, ARRAYS)
    assert spec.inject_kwargs == {"device": DEVICE}
    np.testing.assert_array_equal(_executor(spec).run((3,), {}, "cpu"), [0, 1, 2])


def _factory_spec(built: list[Any]) -> OpSpec:
    def factory(k: int, *, device: torch.device) -> Any:
        built.append(k)
        return lambda x: x * k

    return OpSpec(
        "numpy.demo",
        FactoryOp,
        factory,
        ARRAYS,
        positional_names=("x", "k"),
        data_params=("x",),
    )


def test_a_factory_op_builds_one_transform_per_configuration_and_device() -> None:
    built: list[int] = []
    ex = _executor(_factory_spec(built))
    for k in (2, 3, 2, 3, 2):
        np.testing.assert_array_equal(ex.run((np.arange(3), k), {}, "cpu"), np.arange(3) * k)
    assert built == [2, 3]


def test_the_factory_cache_drops_the_least_recently_built_transform() -> None:
    built: list[int] = []
    ex = _executor(_factory_spec(built))
    for k in range(FACTORY_CACHE_SIZE + 1):
        ex.run((np.arange(2), k), {}, "cpu")
    assert len(ex.factories) == FACTORY_CACHE_SIZE
    ex.run((np.arange(2), 0), {}, "cpu")  # dropped: built again
    assert built.count(0) == 2


def test_an_unhashable_configuration_is_unsupported() -> None:
    ex = _executor(_factory_spec([]))
    with pytest.raises(UnsupportedOperation, match="not hashable"):
        ex.run((np.arange(2),), {"k": {"a": 1}}, "cpu")
    with pytest.raises(UnsupportedOperation, match="positional arguments"):
        ex.run((np.arange(2), 1, 2), {}, "cpu")


def test_in_place_results_are_written_back_into_the_callers_array() -> None:
    def backend(x: torch.Tensor) -> None:
        x.copy_(x.flip(0).clone())  # rewrites its input, as numpy.random.shuffle does

    ex = _executor(declare("numpy.demo", backend, ARRAYS, inplace=(0,)))
    strided = np.arange(10)[::2]  # converted through a copy: written back explicitly
    assert ex.run((strided,), {}, "cpu") is None
    np.testing.assert_array_equal(strided, [8, 6, 4, 2, 0])
    plain = np.arange(4)
    ex.run((plain,), {}, "cpu")
    np.testing.assert_array_equal(plain, [3, 2, 1, 0])


def test_batch_adapter_adds_and_removes_the_batch_axis() -> None:
    shapes: list[tuple[int, ...]] = []

    def backend(src: torch.Tensor, k: int) -> torch.Tensor:
        shapes.append(tuple(src.shape))
        return src + k

    adapter = BatchAdapter("cv2", frozenset({"src"}), (2, 3), squeeze_channel=True)
    ex = _executor(declare("cv2.demo", backend, adapter, dtypes=frozenset({"uint8"})))
    img = np.zeros((4, 5, 3), np.uint8)
    got = ex.run((img, 1), {}, "cpu")
    assert shapes == [(1, 4, 5, 3)]
    assert got.shape == (4, 5, 3) and got.dtype == np.uint8 and (got == 1).all()


def test_quirks_default_to_the_strictest_reading() -> None:
    q = Quirks()
    assert q.buffers == ("dst", "out") and not q.empty and not q.random and not q.inplace
    assert q.fidelity.value == "exact"
