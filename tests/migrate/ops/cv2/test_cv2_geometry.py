"""cv2 geometry backends (resize, flips, rotations, borders, warps) against cv2, per image."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.migrate.ops import cv2 as ops

INTERPOLATIONS = [
    cv2.INTER_NEAREST,
    cv2.INTER_LINEAR,
    cv2.INTER_LINEAR_EXACT,
    cv2.INTER_CUBIC,
    cv2.INTER_AREA,
    cv2.INTER_LANCZOS4,
    cv2.INTER_NEAREST_EXACT,
]
BORDERS = [
    cv2.BORDER_CONSTANT,
    cv2.BORDER_REPLICATE,
    cv2.BORDER_REFLECT,
    cv2.BORDER_WRAP,
    cv2.BORDER_REFLECT_101,
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


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(batch=batches(dtypes=(np.uint8, np.float32, np.float64, np.int16)), code=st.integers(-1, 1))
def test_flip(device: str, batch: np.ndarray, code: int) -> None:
    check_batch(
        "cv2.flip", batch, lambda im: cv2.flip(im, code), lambda t: ops.flip(t, code), device
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(batch=batches(), code=st.sampled_from([0, 1, 2]))
def test_rotate_and_transpose(device: str, batch: np.ndarray, code: int) -> None:
    check_batch(
        "cv2.rotate", batch, lambda im: cv2.rotate(im, code), lambda t: ops.rotate(t, code), device
    )
    check_batch("cv2.transpose", batch, cv2.transpose, ops.transpose, device)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(min_side=3),
    pads=st.tuples(*[st.integers(0, 6)] * 4),
    border=st.sampled_from(BORDERS),
    value=st.sampled_from([None, 7, (1, 2, 3, 4), 300.5]),
)
def test_copy_make_border(
    device: str, batch: np.ndarray, pads: tuple[int, int, int, int], border: int, value: object
) -> None:
    top, bottom, left, right = pads
    check_batch(
        "cv2.copyMakeBorder",
        batch,
        lambda im: cv2.copyMakeBorder(im, top, bottom, left, right, border, value=value),
        lambda t: ops.copyMakeBorder(t, top, bottom, left, right, border, value=value),
        device,
    )


def _random_affine(seed: int, w: int, h: int) -> np.ndarray:
    """A generic rotation/scale/shift (drawn from an RNG: exact .5 ties of nearest-neighbour
    sampling, where cv2's and our float rounding may pick different pixels, have measure zero)."""
    rng = np.random.default_rng(seed)
    m = cv2.getRotationMatrix2D(
        (w / 2, h / 2), float(rng.uniform(-45, 45)), float(rng.uniform(0.6, 1.5))
    )
    m[:, 2] += rng.uniform(-4, 4, 2)
    return m


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=(np.uint8, np.float32, np.float64), min_side=8, max_side=20),
    seed=st.integers(0, 2**32 - 1),
    interpolation=st.sampled_from([0, 1, 2, 3, 4]),
    inverse=st.booleans(),
    border=st.sampled_from(BORDERS),
    dsize=st.tuples(st.integers(8, 24), st.integers(8, 24)),
)
def test_warp_affine(
    device: str,
    batch: np.ndarray,
    seed: int,
    interpolation: int,
    inverse: bool,
    border: int,
    dsize: tuple[int, int],
) -> None:
    m = _random_affine(seed, batch.shape[2], batch.shape[1])
    flags = interpolation | (cv2.WARP_INVERSE_MAP if inverse else 0)
    if batch.dtype == np.float64 and interpolation == cv2.INTER_CUBIC:
        assert refusal("cv2.warpAffine", batch[0], m, dsize, flags=flags)
        return
    value = (10, 200, 30, 40)
    check_batch(
        "cv2.warpAffine",
        batch,
        lambda im: cv2.warpAffine(im, m, dsize, flags=flags, borderMode=border, borderValue=value),
        lambda t: ops.warpAffine(
            t, torch.from_numpy(m), dsize, flags=flags, borderMode=border, borderValue=value
        ),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(min_side=8, max_side=20),
    seed=st.integers(0, 2**32 - 1),
    interpolation=st.sampled_from([0, 1, 2, 4]),
    inverse=st.booleans(),
    border=st.sampled_from(BORDERS),
)
def test_warp_perspective(
    device: str, batch: np.ndarray, seed: int, interpolation: int, inverse: bool, border: int
) -> None:
    h, w = batch.shape[1:3]
    persp = np.random.default_rng(seed + 1).uniform(-2e-3, 2e-3, 2)
    m = np.vstack([_random_affine(seed, w, h), [persp[0], persp[1], 1.0]])
    flags = interpolation | (cv2.WARP_INVERSE_MAP if inverse else 0)
    check_batch(
        "cv2.warpPerspective",
        batch,
        lambda im: cv2.warpPerspective(im, m, (w, h), flags=flags, borderMode=border),
        lambda t: ops.warpPerspective(t, m, (w, h), flags=flags, borderMode=border),
        device,
    )


def test_geometry_declares_what_it_does_not_reproduce() -> None:
    img = np.zeros((8, 8, 3), dtype=np.uint8)
    m = np.eye(2, 3)
    assert refusal("cv2.warpAffine", img, m, (8, 8), borderMode=cv2.BORDER_TRANSPARENT)
    assert refusal("cv2.warpAffine", img, np.eye(3), (8, 8))
    assert refusal("cv2.resize", img, (4, 4), interpolation=cv2.INTER_MAX)
    assert refusal("cv2.resize", img, None)
    assert refusal("cv2.resize", torch.zeros((8, 8, 3), dtype=torch.uint8), (4, 4))
    assert refusal("cv2.rotate", img, 3)
    assert refusal("cv2.flip", np.zeros((2, 8, 8, 3), np.uint8), 1)  # 4-d: not an image
    assert refusal("cv2.resize", img, (4, 4)) is None
