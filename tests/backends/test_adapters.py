"""The generic adapters: which data arguments they refuse before any conversion, and how results
come back (batch axis dropped, layout, scalar kinds), for arrays, batches and tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from codedag.backends.adapters import ArrayAdapter, BatchAdapter, TensorAdapter, describe
from codedag.backends.contract import declare
from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.errors import UnsupportedOperation

IMAGES = BatchAdapter(
    "cv2",
    frozenset({"src", "src2"}),
    (2, 3),
    squeeze_channel=True,
    channel_axis=True,
    scalar=lambda a: a.item(),
    scalar_params=frozenset({"src2"}),
)


def _run(spec: Any, *args: Any, **kwargs: Any) -> Any:
    return Executor(spec, lambda *a, **k: None, {"cpu": ValueConverter("cpu")}).run(
        args, kwargs, "cpu"
    )


def _image_op(**quirks: Any) -> Any:
    def backend(src: torch.Tensor, src2: Any = None) -> torch.Tensor:
        return src if src2 is None else src + 1

    return declare("cv2.demo", backend, IMAGES, **quirks)


def test_batch_adapter_refuses_dtypes_ranks_channels_empty_and_non_arrays() -> None:
    spec = _image_op(dtypes=frozenset({"uint8"}), channels=(1, 3))
    refuse = IMAGES.refuse
    assert refuse(spec, (np.zeros((4, 4, 3), np.uint8),), {}) is None
    assert refuse(spec, (np.zeros((4, 4, 1), np.uint8),), {}) is None  # (H, W, 1) is 1 channel
    assert "dtype <f4" in (refuse(spec, (np.zeros((4, 4), np.float32),), {}) or "")
    swapped = np.zeros((4, 4), ">u2")  # the dtype name is uint16, the byte order is not native
    assert "dtype >u2" in (refuse(_image_op(dtypes=frozenset({"uint16"})), (swapped,), {}) or "")
    assert "4-d array" in (refuse(spec, (np.zeros((1, 4, 4, 3), np.uint8),), {}) or "")
    assert "4 channels" in (refuse(spec, (np.zeros((4, 4, 4), np.uint8),), {}) or "")
    assert "empty array" in (refuse(spec, (np.zeros((0, 4), np.uint8),), {}) or "")
    tensor = torch.zeros(4, 4, dtype=torch.uint8)
    assert refuse(spec, (tensor,), {}) == "src: torch.Tensor (4, 4); cv2 takes NumPy arrays here"
    img = np.zeros((4, 4), np.uint8)
    assert refuse(spec, (img, 3), {}) is None  # a Scalar operand where cv2 takes one
    assert refuse(spec, (img,), {"src2": (1.0, 2.0)}) is None
    assert "takes NumPy arrays" in (refuse(spec, (img, "x"), {}) or "")


def test_batch_adapter_returns_results_without_the_batch_axis_and_one_channel_2d() -> None:
    spec = _image_op()
    got = _run(spec, np.zeros((4, 5, 1), np.uint8))
    assert got.shape == (4, 5) and got.flags.c_contiguous
    got = _run(spec, np.zeros((4, 5, 3), np.uint8), np.zeros((4, 5, 3), np.uint8))
    assert got.shape == (4, 5, 3) and (got == 1).all()


def test_a_backend_that_loses_the_batch_of_one_is_an_error_not_a_wrong_result() -> None:
    def backend(src: torch.Tensor) -> torch.Tensor:
        return torch.cat([src, src])

    with pytest.raises(UnsupportedOperation, match="for a batch of one"):
        _run(declare("cv2.demo", backend, IMAGES), np.zeros((4, 5), np.uint8))


def test_batch_adapter_scalars_are_the_libraries_kind() -> None:
    def backend(src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return src.double().sum((1, 2)), src

    retval, image = _run(declare("cv2.demo", backend, IMAGES), np.ones((2, 3), np.uint8))
    assert type(retval) is float and retval == 6.0
    assert image.shape == (2, 3)


def test_array_adapter_keeps_numpy_semantics() -> None:
    arrays = ArrayAdapter()
    spec = declare("numpy.demo", lambda a: a * 2, arrays, dtypes=frozenset({"float64"}))
    assert arrays.refuse(spec, ([np.zeros(2), np.zeros(2, np.int8)],), {}) is not None
    assert arrays.refuse(spec, (np.zeros(2),), {"b": np.zeros(2)}) is None
    total = _run(declare("numpy.demo", lambda a: a.sum(), arrays), np.arange(4.0))
    assert isinstance(total, np.float64) and total == 6.0  # 0-d: a NumPy scalar
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    follows = declare("numpy.demo", lambda a: a * 2, arrays, order="A")
    assert _run(follows, fortran).flags.f_contiguous
    assert _run(declare("numpy.demo", lambda a: a * 2, arrays, order="C"), fortran).flags[
        "C_CONTIGUOUS"
    ]


def test_tensor_adapter_refuses_nothing_and_returns_to_the_callers_device() -> None:
    tensors = TensorAdapter()
    spec = declare("torch.demo", None, tensors)
    assert tensors.refuse(spec, (torch.zeros(2),), {}) is None
    out = Executor(spec, torch.add, {"cpu": ValueConverter("cpu")}).run(
        (torch.ones(2), torch.ones(2)), {}, "cpu"
    )
    assert out.device.type == "cpu" and out.tolist() == [2.0, 2.0]


def test_describe_names_what_was_passed() -> None:
    assert describe(np.zeros((4, 5, 3), np.uint8)) == "uint8 array (4, 5, 3)"
    assert describe(torch.zeros(2, 3)) == "torch.Tensor (2, 3)"
    assert describe([1]) == "list"
