"""Rebuilding calls from the tracer's argument descriptions, and their signatures."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from calibrate_helpers import WARP_M, array, pair, scalar

from codedag.calibrate.inputs import (
    describe,
    input_bytes,
    rebuild_call,
    signature,
)
from codedag.errors import TraceError


def test_arrays_scalars_and_sequences_come_back_with_their_shapes_and_values() -> None:
    args = [array("0", [24, 32, 3], "uint8"), array("1", [2, 3], "float64", WARP_M),
            pair("2", 16, 12), scalar("flags", cv2.INTER_AREA)]  # fmt: skip
    positional, keywords = rebuild_call(args)
    image, matrix, dsize = positional
    assert image.shape == (24, 32, 3) and image.dtype == np.uint8 and image.flags.c_contiguous
    assert np.array_equal(matrix, WARP_M)  # small arrays are replayed exactly
    assert dsize == (16, 12) and keywords == {"flags": cv2.INTER_AREA}
    assert cv2.warpAffine(*positional, **keywords).shape == (12, 16, 3)
    again, _ = rebuild_call(args)
    assert np.array_equal(again[0], image)  # deterministic per seed


def test_layouts_dtypes_and_non_finite_floats() -> None:
    fortran = array("0", [5, 7], "float32") | {"layout": "F"}
    (x,), kw = rebuild_call([fortran, {"name": "eps", "kind": "scalar", "float": "nan"}])
    assert x.flags.f_contiguous and x.dtype == np.float32 and np.isnan(kw["eps"])
    for dtype in ("bool", "int16", "uint16", "float64", "complex64"):
        (y,), _ = rebuild_call([array("0", [3, 4], dtype)])
        assert y.dtype == np.dtype(dtype) and y.shape == (3, 4)


def test_an_opaque_argument_cannot_be_rebuilt() -> None:
    with pytest.raises(TraceError, match="cannot be rebuilt"):
        rebuild_call([{"name": "0", "kind": "object", "type": "mylib.Thing"}])


def test_signature_keeps_what_time_depends_on_and_drops_contents_and_float_parameters() -> None:
    base = [array("0", [24, 32, 3], "uint8"), pair("1", 16, 12), scalar("sigma", 1.5)]
    same = [array("0", [24, 32, 3], "uint8", np.ones((24, 32, 3), np.uint8)), pair("1", 16, 12),
            scalar("sigma", 0.7)]  # fmt: skip
    assert signature(base) == signature(same)
    bigger = [array("0", [48, 32, 3], "uint8"), pair("1", 16, 12), scalar("sigma", 1.5)]
    other_size = [array("0", [24, 32, 3], "uint8"), pair("1", 8, 12), scalar("sigma", 1.5)]
    as_float = [array("0", [24, 32, 3], "float32"), pair("1", 16, 12), scalar("sigma", 1.5)]
    keys = {signature(a) for a in (base, bigger, other_size, as_float)}
    assert len(keys) == 4


def test_describe_and_input_bytes() -> None:
    args = [array("0", [24, 32, 3], "uint8"), pair("1", 16, 12), scalar("interpolation", 3)]
    assert describe(args) == "uint8[24,32,3], (16, 12), interpolation=3"
    assert input_bytes(args) == 24 * 32 * 3
