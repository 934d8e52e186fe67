"""cv2 geometry backends (resize, flips, rotations, borders, warps) against cv2, per image."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.migrate.contract import DeclaredUnsupported
from codedag.migrate.ops import cv2 as ops
from codedag.migrate.probe import migrated_call

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


# -- differences found by running real augmentation code with every call migrated ---------------


def test_copy_make_border_with_zero_borders_returns_a_copy() -> None:
    img = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    for border in (cv2.BORDER_CONSTANT, cv2.BORDER_REFLECT):
        got = migrated_call("cv2.copyMakeBorder")(img, 0, 0, 0, 0, border)
        np.testing.assert_array_equal(got, img)
        assert not np.shares_memory(got, img)


@pytest.mark.parametrize("center", [(50.0, 50.0), (49.5, 49.5), (0.0, 0.0), (31.3, 77.1)])
def test_warp_affine_nearest_rotation_is_exact(center: tuple[float, float]) -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (100, 100), dtype=np.uint8)
    m = cv2.getRotationMatrix2D(center, 45, 1.0)
    want = cv2.warpAffine(img, m, (100, 100), flags=cv2.INTER_NEAREST, borderMode=0)
    got = migrated_call("cv2.warpAffine")(img, m, (100, 100), flags=cv2.INTER_NEAREST, borderMode=0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("channels", [2, 5])
@pytest.mark.parametrize("flags", [cv2.INTER_NEAREST, cv2.INTER_LINEAR])
def test_warp_affine_on_2_and_5_channels_is_exact(channels: int, flags: int) -> None:
    """cv2 warps these through its fixed-point remap (1/32 pixel, 15-bit weights)."""
    rng = np.random.default_rng(channels)
    img = rng.integers(0, 256, (40, 50, channels), dtype=np.uint8)
    for angle in (17.0, 45.0, 71.0):
        m = cv2.getRotationMatrix2D((20.0, 20.0), angle, 1.1)
        want = cv2.warpAffine(img, m, (50, 40), flags=flags)
        np.testing.assert_array_equal(
            migrated_call("cv2.warpAffine")(img, m, (50, 40), flags=flags), want
        )


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
def test_warps_of_inf_give_nan_where_cv2_does(name: str) -> None:
    """cv2 interpolates ``p00 + a * (p01 - p00)``: an inf next to a weight of 0 gives NaN."""
    img = np.random.default_rng(2).random((12, 16)).astype(np.float32)
    img[5, 7] = np.inf
    img[2, 3] = -np.inf
    m = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]])
    if name == "cv2.warpPerspective":
        m = np.vstack([m, [0.0, 0.0, 1.0]])
    want = getattr(cv2, name[4:])(img, m, (16, 12))
    got = migrated_call(name)(img, m, (16, 12))
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_warp_perspective_with_a_zero_divisor_writes_the_border_value() -> None:
    rng = np.random.default_rng(3)
    m = np.array([[0.533, 0, 0], [0, 1.133, 0], [-0.0467, 0.0133, 1]])
    img = rng.integers(0, 256, (30, 30, 3), dtype=np.uint8)
    want = cv2.warpPerspective(img, m, (30, 30))
    np.testing.assert_array_equal(migrated_call("cv2.warpPerspective")(img, m, (30, 30)), want)
    imgf = rng.random((30, 30)).astype(np.float32)
    wantf = cv2.warpPerspective(imgf, m, (30, 30))
    gotf = migrated_call("cv2.warpPerspective")(imgf, m, (30, 30))
    np.testing.assert_array_equal(np.isnan(gotf), np.isnan(wantf))
    np.testing.assert_allclose(gotf[~np.isnan(wantf)], wantf[~np.isnan(wantf)], atol=1e-5)


@pytest.mark.parametrize(
    "m", [np.zeros((3, 3)), np.array([[1.0, 2, 0], [2, 4, 0], [0, 0, 1]])], ids=["zero", "rank2"]
)
def test_warp_perspective_with_a_singular_matrix_warps_like_cv2(m: np.ndarray) -> None:
    """cv2 inverts a singular matrix to zeros and warps with them; no LinAlgError."""
    img = np.random.default_rng(4).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    for flags in (cv2.INTER_NEAREST, cv2.INTER_LINEAR):
        want = cv2.warpPerspective(img, m, (12, 10), flags=flags)
        got = migrated_call("cv2.warpPerspective")(img, m, (12, 10), flags=flags)
        np.testing.assert_array_equal(got, want)


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


# -- differences found by the conformance suite ---------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "int8", "float64"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_flip_and_rotate_take_every_dtype_cv2_takes(dtype: str, order: str) -> None:
    """torch's CPU flip has no uint16/uint32 kernel: those flip as the signed ints of their width."""
    img = np.arange(12 * 16 * 3, dtype=dtype).reshape(12, 16, 3)
    img = np.asfortranarray(img) if order == "F" else img
    for code in (0, 1, -1):
        got = migrated_call("cv2.flip")(img, code)
        want = cv2.flip(img, code)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for code in (cv2.ROTATE_90_CLOCKWISE, cv2.ROTATE_180, cv2.ROTATE_90_COUNTERCLOCKWISE):
        got = migrated_call("cv2.rotate")(img, code)
        want = cv2.rotate(img, code)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
@pytest.mark.parametrize("flags", [cv2.INTER_CUBIC, cv2.INTER_LANCZOS4])
def test_cubic_and_lanczos_warps_of_more_than_4_channels_are_left_to_cv2(
    name: str, flags: int
) -> None:
    """cv2's remap refuses them (an error the backend would hide by returning an image)."""
    img = np.zeros((12, 16, 5), dtype=np.uint8)
    m = np.eye(2, 3) if name == "cv2.warpAffine" else np.eye(3)
    with pytest.raises(cv2.error):
        getattr(cv2, name[4:])(img, m, (16, 12), flags=flags)
    assert "more than 4 channels" in (refusal(name, img, m, (16, 12), flags=flags) or "")
    assert refusal(name, img[..., :4], m, (16, 12), flags=flags) is None
    assert refusal(name, img, m, (16, 12), flags=cv2.INTER_LINEAR) is None


def test_copy_make_border_of_an_empty_image_is_left_to_cv2() -> None:
    """cv2 reflecting an empty image never returns: the declaration refuses empty images, so the
    conformance suite does not call cv2 on them either."""
    img = np.zeros((0, 16, 3), dtype=np.uint8)
    assert refusal("cv2.copyMakeBorder", img, 1, 1, 1, 1, cv2.BORDER_REFLECT_101)


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
@pytest.mark.parametrize("value", [(10, 20, 30, 40), (10, 20, 30), 7])
def test_border_values_of_more_than_4_channels_repeat_every_4_channels(
    name: str, value: object
) -> None:
    """cv2's Scalar has 4 values: channel c of a wider image takes value c % 4."""
    img = np.full((12, 16, 6), 100, np.uint8)
    m = cv2.getRotationMatrix2D((8, 6), 45, 1.0)
    m = m if name == "cv2.warpAffine" else np.vstack([m, [0.0, 0.0, 1.0]])
    want = getattr(cv2, name[4:])(img, m, (16, 12), borderValue=value)
    got = migrated_call(name)(img, m, (16, 12), borderValue=value)
    np.testing.assert_array_equal(got, want)
    assert want[0, 0, 4] == want[0, 0, 0]
