"""The cv2 BACKENDS table: canonical names, cv2's signatures, tolerances, the backend contract."""

from __future__ import annotations

import inspect
import re

import cv2
import numpy as np
import pytest
import torch
from migrate_support import DEVICES

from codedag.backends.ops.cv2 import BACKENDS
from codedag.backends.probe import migrated_call
from codedag.backends.tolerances import TOLERANCES
from codedag.errors import UnsupportedOperation


def test_every_backend_names_a_cv2_function_and_has_a_tolerance() -> None:
    for name, fn in BACKENDS.items():
        module, attr = name.split(".", 1)
        assert module == "cv2"
        assert callable(getattr(cv2, attr)), name
        assert fn.__name__ == attr
        assert name in TOLERANCES, f"{name} has no tolerance entry"
        assert TOLERANCES[name].note, f"{name}: tolerance without a note"
    cv2_group = [k for k in TOLERANCES if k.startswith("cv2.")]
    assert cv2_group == sorted(cv2_group)
    assert set(cv2_group) == set(BACKENDS)


def test_backends_have_cv2s_parameters_in_cv2s_order() -> None:
    """Names and positions as in cv2's own signature line (``resize(src, dsize[, dst[, ...``)."""
    for name, fn in BACKENDS.items():
        line = getattr(cv2, name.split(".", 1)[1]).__doc__.splitlines()[0]
        cv2_params = re.findall(r"\w+", line.split("(", 1)[1].split(")", 1)[0])
        assert list(inspect.signature(fn).parameters) == cv2_params, name


def test_backends_take_the_array_first_and_document_themselves() -> None:
    for name, fn in BACKENDS.items():
        params = list(inspect.signature(fn).parameters)
        assert params[0] in ("src", "src1", "image"), name
        assert fn.__doc__, name


@pytest.mark.parametrize("device", DEVICES)
def test_a_single_call_is_a_batch_of_one_and_stays_on_its_device(device: str) -> None:
    img = np.random.default_rng(0).integers(0, 256, (32, 48, 3)).astype(np.uint8)
    t = torch.from_numpy(img)[None].to(device)
    out = BACKENDS["cv2.resize"](t, (24, 16))
    assert out.device.type == device and out.shape == (1, 16, 24, 3)
    assert np.array_equal(out[0].cpu().numpy(), cv2.resize(img, (24, 16)))
    gray = BACKENDS["cv2.cvtColor"](t, cv2.COLOR_BGR2GRAY)
    assert gray.shape == (1, 32, 48) and gray.dtype == torch.uint8


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_numpy_input_is_refused_not_converted(name: str) -> None:
    """Arrays arrive as tensors; anything else raises UnsupportedOperation (caller falls back)."""
    arr = np.zeros((1, 8, 8), np.uint8)
    args: dict[str, tuple] = {
        "cv2.resize": ((4, 4),),
        "cv2.cvtColor": (cv2.COLOR_GRAY2BGR,),
        "cv2.GaussianBlur": ((3, 3), 0),
        "cv2.blur": ((3, 3),),
        "cv2.boxFilter": (-1, (3, 3)),
        "cv2.filter2D": (-1, np.ones((3, 3))),
        "cv2.Sobel": (-1, 1, 0),
        "cv2.medianBlur": (3,),
        "cv2.flip": (1,),
        "cv2.rotate": (0,),
        "cv2.warpAffine": (np.eye(2, 3), (8, 8)),
        "cv2.warpPerspective": (np.eye(3), (8, 8)),
        "cv2.copyMakeBorder": (1, 1, 1, 1, 0),
        "cv2.threshold": (1, 2, 0),
        "cv2.LUT": (torch.arange(256, dtype=torch.uint8),),
        "cv2.addWeighted": (0.5, arr, 0.5, 0),
        "cv2.add": (arr,),
        "cv2.subtract": (arr,),
        "cv2.multiply": (arr,),
        "cv2.absdiff": (arr,),
        "cv2.Canny": (10, 20),
    }
    with pytest.raises(UnsupportedOperation):
        BACKENDS[name](arr, *args.get(name, ()))


ONE_CHANNEL_CALLS = {
    "cv2.GaussianBlur": ((3, 3), 0),
    "cv2.blur": ((3, 3),),
    "cv2.medianBlur": (3,),
    "cv2.filter2D": (-1, np.ones((3, 3), np.float32) / 9),
    "cv2.flip": (1,),
    "cv2.LUT": (np.arange(256, dtype=np.uint8)[::-1].copy(),),
    "cv2.add": ("self",),
    "cv2.multiply": ("self",),
    "cv2.normalize": (None, 0, 255, cv2.NORM_MINMAX),
    "cv2.resize": ((7, 5),),
    "cv2.warpAffine": (np.array([[1.0, 0.1, 1.0], [0.0, 1.0, 2.0]]), (16, 12)),
    "cv2.warpPerspective": (np.array([[1.0, 0.1, 1.0], [0.0, 1.0, 2.0], [0, 1e-3, 1]]), (16, 12)),
    "cv2.copyMakeBorder": (1, 2, 3, 4, cv2.BORDER_REFLECT),
}


@pytest.mark.parametrize("name", sorted(ONE_CHANNEL_CALLS))
def test_single_channel_3d_images_come_back_2d_like_cv2(name: str) -> None:
    """cv2 sees an (H, W, 1) array as the one-channel image (H, W) and returns (H, W)."""
    img = np.random.default_rng(0).integers(0, 256, (12, 16, 1), dtype=np.uint8)
    args = tuple(img if isinstance(a, str) else a for a in ONE_CHANNEL_CALLS[name])
    want = getattr(cv2, name[4:])(img, *args)
    got = migrated_call(name)(img, *args)
    assert want.shape == (12, 16) or want.ndim == 2
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
