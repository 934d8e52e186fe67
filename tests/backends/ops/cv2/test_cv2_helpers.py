"""The cv2 backends' shared helpers checked against cv2 itself: border rules, padding,
saturation, the HSV/HLS pixel formulas and the fast warp paths, each bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import codedag.backends.ops.cv2._common as common
import codedag.backends.ops.cv2._hsv as hsv
import codedag.backends.ops.cv2._warp_fast as warp_fast
from codedag.backends.ops.cv2._warp_coords import f32_coords

cv2 = pytest.importorskip("cv2")

BORDERS = {
    "constant": common.BORDER_CONSTANT,
    "replicate": common.BORDER_REPLICATE,
    "reflect": common.BORDER_REFLECT,
    "wrap": common.BORDER_WRAP,
    "reflect_101": common.BORDER_REFLECT_101,
}


@pytest.mark.parametrize("border", BORDERS.values(), ids=BORDERS.keys())
@pytest.mark.parametrize("length", [1, 2, 3, 7])
def test_border_interpolate_matches_cv2(border: int, length: int) -> None:
    positions = np.arange(-3 * length - 2, 4 * length + 3)
    expected = [cv2.borderInterpolate(int(p), length, border) for p in positions]
    assert common.border_interpolate(positions, length, border).tolist() == expected
    as_tensor = common.torch_border(torch.from_numpy(positions), length, border)
    assert as_tensor.tolist() == expected


@pytest.mark.parametrize("border", BORDERS.values(), ids=BORDERS.keys())
@pytest.mark.parametrize(("h", "w"), [(1, 1), (3, 5), (6, 4)])
@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 2, 3, 0), (7, 9, 11, 13)])
def test_pad_nhwc_matches_copy_make_border(
    border: int, h: int, w: int, pads: tuple[int, int, int, int]
) -> None:
    rng = np.random.default_rng(h * 31 + w)
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    value = (10, 200, 255)
    expected = cv2.copyMakeBorder(image, *pads, border, value=value)
    got = common.pad_nhwc(torch.from_numpy(image)[None], *pads, border, [float(v) for v in value])
    assert np.array_equal(got[0].numpy(), expected)


def test_saturate_rounds_half_to_even_and_clamps_as_cv2() -> None:
    values = np.array(
        [-300.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999, 127.5, 254.5, 255.5, 300.0, 1e12],
        dtype=np.float64,
    )
    for dtype, depth, torch_dtype in (
        (np.uint8, cv2.CV_8U, torch.uint8),
        (np.int8, cv2.CV_8S, torch.int8),
        (np.uint16, cv2.CV_16U, torch.uint16),
        (np.int16, cv2.CV_16S, torch.int16),
    ):
        # cv2.add computes in float64 and converts with saturate_cast
        expected = cv2.add(values, np.zeros_like(values), dtype=depth).reshape(-1)
        got = common.saturate(torch.from_numpy(values), torch_dtype).numpy()
        assert got.dtype == dtype
        assert np.array_equal(got, expected), dtype


def test_saturate_keeps_floats_and_maps_bool() -> None:
    x = torch.tensor([0.25, -3.0, 0.0])
    assert common.saturate(x, torch.float32).tolist() == [0.25, -3.0, 0.0]
    assert common.saturate(x, torch.bool).tolist() == [True, True, False]


def test_argument_checks_name_the_problem() -> None:
    assert common.int_pair((3, np.int64(4))) == (3, 4)
    assert common.int_pair((3, 4.0)) is None and common.int_pair((True, 1)) is None
    assert common.border_reason(common.BORDER_REFLECT | common.BORDER_ISOLATED, (2,)) is None
    assert "not an integer" in (common.border_reason("x", (0,)) or "")
    assert "unsupported" in (common.border_reason(3, (0, 1)) or "")
    assert common.scalar_reason((1, 2, 3, 4)) is None
    assert "Scalar" in (common.scalar_reason((1, 2, 3, 4, 5)) or "")
    assert common.mat_shape(np.zeros((4, 5, 1))) == (4, 5)
    assert common.channels_of(np.zeros((4, 5))) == 1
    assert common.finite(np.zeros((3, 3), np.float32))
    assert not common.finite(np.array([[0.0, np.nan]], np.float32))
    with pytest.raises(common.UnsupportedOperation, match="shape"):
        common.check_image(torch.zeros(3, 3))


# -- HSV and HLS: cv2's SIMD body and scalar tail, by column ---------------------------------


def _rows(width: int, dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is np.uint8:
        return rng.integers(0, 256, (5, width, 3), dtype=np.uint8)
    image = rng.random((5, width, 3), dtype=np.float32)
    image[0, : min(width, 3)] = 0.5  # grey pixels: zero saturation, hue 0
    return image


@pytest.mark.parametrize("width", [1, 5, 17, 40, 263])
def test_bgr2hsv_float_matches_cv2_in_simd_and_tail_columns(width: int) -> None:
    image = _rows(width, np.float32, width)
    expected = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
    got = hsv.bgr2hsv_f(torch.from_numpy(image)[None], 0)[0].numpy()
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("width", [1, 5, 17, 40, 263])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_hsv2bgr_matches_cv2(width: int, dtype: type) -> None:
    image = _rows(width, dtype, width + 1)
    if dtype is np.float32:
        image = image * np.float32([360.0, 1.0, 1.0])
    else:
        image[..., 0] %= 180
    expected = cv2.cvtColor(image, cv2.COLOR_HSV2BGR)
    hrange = 180.0 if dtype is np.uint8 else 360.0
    got = hsv.hsv2bgr(torch.from_numpy(image)[None], 0, hrange, 3)[0].numpy()
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("width", [3, 17, 300])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_hls_both_ways_match_cv2(width: int, dtype: type) -> None:
    image = _rows(width, dtype, width + 2)
    hrange = 180.0 if dtype is np.uint8 else 360.0
    forward = hsv.bgr2hls(torch.from_numpy(image)[None], 0, hrange)[0].numpy()
    assert np.array_equal(forward, cv2.cvtColor(image, cv2.COLOR_BGR2HLS))
    back = hsv.hls2bgr(torch.from_numpy(forward)[None], 2, hrange, 3)[0].numpy()
    assert np.array_equal(back, cv2.cvtColor(forward, cv2.COLOR_HLS2RGB))


@pytest.mark.parametrize("code", ["COLOR_BGR2HSV", "COLOR_BGR2HLS", "COLOR_RGB2HLS"])
def test_float_hue_of_the_scalar_tail_is_rounded_once_as_cv2s_fma(code: str) -> None:
    """Seven pixels a row: all of them in cv2's scalar tail, where ``(b - r) * k + 120`` is one
    fused multiply-add (thousands of hues one ulp off if computed in two roundings)."""
    image = np.random.default_rng(0).random((3000, 7, 3), dtype=np.float32)
    expected = cv2.cvtColor(image, getattr(cv2, code))
    x = torch.from_numpy(image)[None]
    rgb = code.startswith("COLOR_RGB")
    got = hsv.bgr2hsv_f(x, 0) if code.endswith("HSV") else hsv.bgr2hls(x, 2 if rgb else 0, 360.0)
    assert np.array_equal(got[0].numpy(), expected)


def test_simd_lanes_and_columns() -> None:
    assert hsv.simd_lanes() in (0, 4, 8, 16)
    columns = hsv.simd_columns(10, 4, torch.device("cpu"))
    assert columns.tolist() == [True] * 8 + [False] * 2
    chunked = hsv.simd_columns(10, 4, torch.device("cpu"), chunk=5)
    assert chunked.tolist() == [True] * 4 + [False] + [True] * 4 + [False]
    assert not hsv.simd_columns(6, 0, torch.device("cpu")).any()


# -- the fast bilinear warp paths --------------------------------------------------------------


def _affine_case(dtype: type, seed: int, halves: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype is np.uint8:
        image = rng.integers(0, 256, (2, 21, 27, 3), dtype=np.uint8)
    else:
        image = (rng.random((2, 21, 27, 3)) * 255).astype(np.float32)
    if halves:  # every coordinate's fraction an exact half: all doubtful for the sampled path
        matrix = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
    else:
        angle = rng.uniform(-0.6, 0.6)
        scale = rng.uniform(0.7, 1.4)
        matrix = np.array(
            [
                [scale * np.cos(angle), -scale * np.sin(angle), rng.uniform(-6, 6)],
                [scale * np.sin(angle), scale * np.cos(angle), rng.uniform(-6, 6)],
            ]
        )
    return image, matrix


WARP_BORDERS = {k: v for k, v in BORDERS.items() if k != "wrap"}


@pytest.mark.parametrize("border", WARP_BORDERS.values(), ids=WARP_BORDERS.keys())
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("seed", [0, 1])
def test_remap_paths_match_warp_affine(border: int, dtype: type, seed: int) -> None:
    images, matrix = _affine_case(dtype, seed)
    dw, dh = 25, 19
    cval = [17.0, 90.0, 250.0]
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    expected = np.stack(
        [
            cv2.warpAffine(im, matrix, (dw, dh), flags=flags, borderMode=border, borderValue=cval)
            for im in images
        ]
    )
    coords = f32_coords(matrix[None].astype(np.float64), dw, dh, False, torch.device("cpu"))
    x = torch.from_numpy(images)
    paths = [warp_fast.remap_table]
    if dtype is np.uint8:
        paths.append(warp_fast.remap_sampled)
    for path in paths:
        out = path(x, coords, border, cval)
        assert out is not None, path.__name__
        got = out.reshape(2, dh, dw, 3).numpy()
        assert np.array_equal(got, expected), path.__name__


@pytest.mark.parametrize("border", BORDERS.values(), ids=BORDERS.keys())
@pytest.mark.parametrize("per_sample", [False, True], ids=["one-matrix", "per-sample"])
@pytest.mark.parametrize("halves", [False, True], ids=["generic", "halves"])
def test_sampled_path_settles_doubtful_elements_as_cv2(
    monkeypatch: pytest.MonkeyPatch, border: int, per_sample: bool, halves: bool
) -> None:
    """A band wide enough to settle about half the elements point by point (every element of a
    warp by exact halves, ties included), with one matrix or one per sample, must still give
    cv2's bytes: the flat indices, the taps' border rules and the lerps of the doubtful path."""
    monkeypatch.setattr(warp_fast, "DOUBT", 0.25)
    monkeypatch.setattr(warp_fast, "MAX_DOUBTFUL", 1.0)
    images = np.concatenate([_affine_case(np.uint8, seed)[0] for seed in (5, 6)])
    matrices = [_affine_case(np.uint8, seed, halves)[1] for seed in (4, 5, 6, 7)]
    if not per_sample:
        matrices = matrices[:1]
    dw, dh = 25, 19
    cval = [17.0, 90.0, 250.0]
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    expected = np.stack(
        [
            cv2.warpAffine(
                im,
                matrices[i % len(matrices)],
                (dw, dh),
                flags=flags,
                borderMode=border,
                borderValue=cval,
            )
            for i, im in enumerate(images)
        ]
    )
    coords = f32_coords(np.stack(matrices), dw, dh, False, torch.device("cpu"))
    out = warp_fast.remap_sampled(torch.from_numpy(images), coords, border, cval)
    assert out is not None
    assert np.array_equal(out.reshape(4, dh, dw, 3).numpy(), expected)


def test_doubtful_fractions_are_found_at_any_position() -> None:
    frac = torch.full((8 * 37 + 5,), 0.5, dtype=torch.float64)
    doubtful = [0, 7, 8, 100, 101, len(frac) - 1]
    frac[doubtful] = torch.tensor([0.0, 1e-9, 2 * warp_fast.DOUBT * 0.99, 0, 0, 0]).double()
    frac[50] = 2 * warp_fast.DOUBT  # at the bound: not doubtful
    found = warp_fast._doubtful(frac)
    assert found is not None and found.tolist() == doubtful
    assert warp_fast._doubtful(torch.zeros(100, dtype=torch.float64)) is None


def test_sampled_path_hands_exact_halves_to_the_table_path() -> None:
    images, matrix = _affine_case(np.uint8, 3, halves=True)
    coords = f32_coords(matrix[None], 27, 21, False, torch.device("cpu"))
    x = torch.from_numpy(images)
    assert warp_fast.remap_sampled(x, coords, common.BORDER_REPLICATE, [0.0] * 3) is None
    out = warp_fast.remap_linear(x, coords, common.BORDER_REPLICATE, [0.0] * 3)
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    expected = cv2.warpAffine(images[1], matrix, (27, 21), flags=flags, borderMode=1)
    assert out is not None
    assert np.array_equal(out.reshape(2, 21, 27, 3)[1].numpy(), expected)


def test_coordinates_not_finite_leave_it_to_the_general_path() -> None:
    x = torch.zeros((1, 4, 4, 3), dtype=torch.uint8)
    nan = torch.tensor([[[0.0, float("nan")], [0.0, 0.0]]])
    assert warp_fast.remap_linear(x, nan, common.BORDER_REPLICATE, [0.0] * 3) is None
    far = torch.tensor([[[0.0, 2.0**31], [0.0, 0.0]]])
    assert warp_fast.remap_table(x.float(), far, common.BORDER_REPLICATE, [0.0] * 3) is None
    zeros = torch.zeros((1, 2, 2))
    assert warp_fast.remap_linear(x.double(), zeros, common.BORDER_REPLICATE, [0.0] * 3) is None
