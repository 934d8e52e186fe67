"""cv2.resize against cv2: sizes, factors, every interpolation, what it declares unsupported."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.backends.contract import DeclaredUnsupported
from codedag.backends.ops import cv2 as ops
from codedag.backends.probe import migrated_call

INTERPOLATIONS = [
    cv2.INTER_NEAREST,
    cv2.INTER_LINEAR,
    cv2.INTER_LINEAR_EXACT,
    cv2.INTER_CUBIC,
    cv2.INTER_AREA,
    cv2.INTER_LANCZOS4,
    cv2.INTER_NEAREST_EXACT,
]


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=(np.uint8, np.float32, np.float64)),
    dst_w=st.integers(1, 40),
    dst_h=st.integers(1, 40),
    interpolation=st.sampled_from(INTERPOLATIONS),
)
def test_resize_to_size(
    device: str, batch: np.ndarray, dst_w: int, dst_h: int, interpolation: int
) -> None:
    if interpolation == cv2.INTER_LINEAR_EXACT and batch.dtype != np.uint8:
        assert refusal("cv2.resize", batch[0], (dst_w, dst_h), interpolation=interpolation)
        return
    check_batch(
        "cv2.resize",
        batch,
        lambda im: cv2.resize(im, (dst_w, dst_h), interpolation=interpolation),
        lambda t: ops.resize(t, (dst_w, dst_h), interpolation=interpolation),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(min_side=4),
    fx=st.sampled_from([0.25, 0.5, 0.7, 1.5, 2.0, 3.0]),
    fy=st.sampled_from([0.5, 1.0, 1.3, 2.0]),
    interpolation=st.sampled_from(INTERPOLATIONS[:2] + INTERPOLATIONS[3:6]),
)
def test_resize_by_factors(
    device: str, batch: np.ndarray, fx: float, fy: float, interpolation: int
) -> None:
    """fx/fy set both the output size (rounded) and the sampling scale, as in cv2."""
    check_batch(
        "cv2.resize",
        batch,
        lambda im: cv2.resize(im, None, fx=fx, fy=fy, interpolation=interpolation),
        lambda t: ops.resize(t, None, fx=fx, fy=fy, interpolation=interpolation),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=(np.uint8,), max_side=40),
    size=st.tuples(st.integers(1, 48), st.integers(1, 48)),
    factors=st.sampled_from([None, (0.5, 0.5), (0.25, 1.0), (1 / 3, 1 / 3), (1.5, 0.75)]),
    interpolation=st.sampled_from(
        [cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_LINEAR_EXACT, cv2.INTER_AREA]
    ),
)
def test_resize_uint8_is_bit_exact(
    device: str,
    batch: np.ndarray,
    size: tuple[int, int],
    factors: tuple[float, float] | None,
    interpolation: int,
) -> None:
    """uint8 nearest, linear (11-bit fixed point), linear-exact and area equal cv2 exactly."""
    fx, fy = factors or (0, 0)
    dsize = None if factors else size
    if factors and min(round(batch.shape[2] * fx), round(batch.shape[1] * fy)) < 1:
        return
    ref = np.stack(
        [cv2.resize(im, dsize, fx=fx, fy=fy, interpolation=interpolation) for im in batch]
    )
    t = torch.from_numpy(batch).to(device)
    out = ops.resize(t, dsize, fx=fx, fy=fy, interpolation=interpolation).cpu().numpy()
    assert np.array_equal(out, ref)


def _halves(shape: tuple[int, int, int]) -> np.ndarray:
    """A checkerboard of 100/101 (channel k adds 20k): every 2x2, 4x1 or 1x4 cell holds two of
    each, a mean of exactly x.5, where cv2's integer-scale INTER_AREA roundings differ."""
    h, w, c = shape
    board = 100 + (np.arange(h)[:, None] + np.arange(w)[None, :]) % 2
    return (board[:, :, None] + 20 * np.arange(c)).astype(np.uint8)


AREA_HALVES = [
    # (h, w, c), dsize, fx: cv2's first output pixel
    ((1, 4, 3), (1, 1), 0.0, [100, 120, 140]),  # 4x1 cell: sum * 0.25f, half to even
    ((4, 1, 1), (1, 1), 0.0, [100]),  # 1x4 cell, likewise
    ((2, 2, 2), (1, 1), 0.0, [100, 120]),  # 2x2 of 2 channels: no shift path
    ((2, 2, 1), (1, 1), 0.0, [101]),  # 2x2 of 1, 3, 4 channels: (sum + 2) >> 2, half up
    ((2, 2, 3), (1, 1), 0.0, [101, 121, 141]),
    ((2, 2, 4), (1, 1), 0.0, [101, 121, 141, 161]),
    ((3, 3, 2), None, 0.5, [100, 120]),  # cells cut by the border, 2 channels
    ((5, 5, 3), None, 0.5, [101, 121, 141]),  # cut cells, 3 channels
    ((3, 8, 1), None, 0.25, [100]),  # 4x4: sum * (1/16)f
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("shape", "dsize", "fx", "first"), AREA_HALVES)
def test_resize_area_integer_scale_rounds_halves_like_cv2(
    device: str, shape: tuple[int, int, int], dsize: tuple[int, int] | None, fx: float, first: list
) -> None:
    """Integer-scale INTER_AREA on uint8: only 2x2 cells of 1, 3 or 4 channels round half up."""
    img = _halves(shape)
    if shape == (1, 4, 3):  # the pixels of the shrink that first showed the difference
        img = np.array([[[140, 100, 126], [140, 101, 127]] * 2], np.uint8)
        first = [140, 100, 126]
    ref = cv2.resize(img, dsize, fx=fx, fy=fx, interpolation=cv2.INTER_AREA)
    ref3 = ref.reshape(ref.shape[0], ref.shape[1], -1)
    assert ref3[0, 0].tolist() == first  # the example really lands on a half
    t = torch.from_numpy(img[None]).to(device)
    out = ops.resize(t, dsize, fx=fx, fy=fx, interpolation=cv2.INTER_AREA)[0].cpu().numpy()
    np.testing.assert_array_equal(out, ref.reshape(out.shape))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factor", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_resize_area_integer_shrinks_are_bit_exact(device: str, factor: int, channels: int) -> None:
    """Every integer shrink of x, y and both, on images that do and do not divide evenly, with
    values of two levels (many exact halves), equals cv2 bit for bit."""
    rng = np.random.default_rng(factor * 10 + channels)
    for h, w in ((factor * 3, factor * 4), (factor * 3 + 1, factor * 2 + factor - 1)):
        img = (100 + rng.integers(0, 2, (h, w, channels))).astype(np.uint8)
        for sx, sy in ((factor, 1), (1, factor), (factor, factor)):
            dsize = (-(-w // sx), -(-h // sy))
            ref = cv2.resize(img, dsize, interpolation=cv2.INTER_AREA)
            t = torch.from_numpy(img[None]).to(device)
            out = ops.resize(t, dsize, interpolation=cv2.INTER_AREA)[0].cpu().numpy()
            np.testing.assert_array_equal(out, ref.reshape(out.shape), err_msg=f"{sx}x{sy}")


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (((20.0, 15.0),), {}),  # float dsize: cv2 raises
        (((2**31, 1),), {}),  # beyond int32: cv2 raises at once
        (((30000, 30000),), {}),  # 900 M values: left to cv2 rather than allocated here
    ],
    ids=["float-dsize", "int32-overflow", "huge"],
)
def test_resize_declares_sizes_it_does_not_take(args: tuple, kwargs: dict) -> None:
    gray = np.zeros((8, 8), np.uint8)
    assert refusal("cv2.resize", gray, *args, **kwargs)
    with pytest.raises(DeclaredUnsupported):  # refused before anything is allocated
        migrated_call("cv2.resize")(gray, *args, **kwargs)


def test_resize_declares_tensors_and_512_channels() -> None:
    assert refusal("cv2.resize", torch.zeros((8, 8), dtype=torch.uint8), (4, 4))
    assert refusal("cv2.resize", np.zeros((4, 4, 512), np.uint8), (2, 2))
    with pytest.raises(cv2.error):  # what the original then raises
        cv2.resize(np.zeros((4, 4, 512), np.uint8), (2, 2))


def test_resize_with_a_zero_side_in_dsize_uses_fx_fy_like_cv2() -> None:
    img = np.random.default_rng(5).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    want = cv2.resize(img, (5, 0), fx=0.5, fy=0.75)
    np.testing.assert_array_equal(migrated_call("cv2.resize")(img, (5, 0), fx=0.5, fy=0.75), want)
